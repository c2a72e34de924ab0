"""Xe-Forge Studio core: load kernel problems, verify candidates in isolated workers, and run
human-in-the-loop optimization sessions for Triton kernels on Intel Xe GPUs.

This package's top level stays import-light on purpose: the verification worker
(``xeforge_core.worker``) is imported in a subprocess that may only have torch, triton, numpy
and the standard library installed.
"""

__version__ = "0.1.0"
