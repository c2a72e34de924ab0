"""Code that runs *inside* the isolated verification worker process.

Imports here are limited to torch, triton, numpy and the standard library (and sibling
modules of this package plus ``xeforge_core.verdict``, ``xeforge_core.precision``,
``xeforge_core.errors`` and ``xeforge_core.devlock``), so the
worker runs on any GPU box, including one where the UI's packages are not installed. Run as
``python -m xeforge_core.worker JOB_DIR`` (see ``job.py`` for the file formats).

Modules:

* ``__main__``    entry point: read ``job.json``, dispatch the role, write ``result.json``.
* ``context``     the shared state of one job: device, hooks, progress events, steps.
* ``roles``       the ``baseline`` and ``candidate`` roles (compile, structure, correctness).
* ``timing``      the ``timing`` role (GPU): interleaved trials under the device lock.
* ``loading``     import the module under test from a file in the job directory.
* ``inputs``      models, seeded inputs and input distributions.
* ``compare``     output comparison and dtype-aware tolerances.
* ``truth64``     the truth in float64 (baseline job): the deviation and error scale saved per output.
* ``calibrated``  one output against the float64 truth (the bound of ``xeforge_core.precision``).
* ``precision_hints``  lower-precision arithmetic in a module's source (TF32 dots, float16 casts...).
* ``precision_report`` the verdict's precision record, findings and the option that accepts a downgrade.
* ``integrity``   structure/integrity rules (AST and run time).
* ``astutil``     AST helpers, standard library only (the parent's static analysis uses them too).
* ``capture``     Triton launch hooks; compiled-kernel metadata and IR.
* ``autotune``    ``@triton.autotune`` config enumeration and forcing.
* ``errors``      failure classification and source-line mapping.
* ``device_ops``  one interface over cpu (interpreter), cuda and xpu.
* ``probe``       device probe (role ``probe``).
"""
