"""IR without a device: a module's Triton kernels compiled ahead of time for a chosen target.

* ``targets``  the compile targets (NVIDIA sm_80/89/90/100, AMD gfx942, Intel Xe2 / Xe-HPC when
  Intel's backend is installed) and the IR stage names.
* ``compile``  ``compile_ir(source, problem=..., target=...) -> IRReport``: runs the IR worker
  (a separate process), caches the result.
* ``worker``   ``python -m xeforge_core.ir.worker JOB_DIR``: records the launches of one
  ``forward()`` and compiles each launched kernel for the target (torch, triton, stdlib only).
* ``stats``    registers, spills and shared memory as each compiler reports them.
* ``text``     IR text helpers: source locations stripped for diffs, changed-line counts.

This ``__init__`` imports nothing eagerly: the worker process imports the package too.
"""

from __future__ import annotations
