"""Code that runs *inside* the isolated verification worker process.

Imports here are limited to torch, triton, numpy and the standard library (and sibling
modules of this package plus ``xeforge_core.verdict``), so the worker runs on any GPU box,
including one where the UI's packages are not installed. Run as
``python -m xeforge_core.worker JOB.json RESULT.json`` (see ``job.py`` for the formats).
"""
