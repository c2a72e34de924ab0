"""The ``memcheck`` role: one correctness call of the candidate under a memory checker.

The parent (``xeforge_core.verify``, with ``VerifyOptions.memcheck``) starts this worker after
the candidate matched the truth. It loads the candidate as the candidate job does, builds the
model and the inputs of the first correctness combination (first variant, first seed, first
distribution) and makes one call, nothing compared. On a GPU the checker is outside: the runner
started this worker under compute-sanitizer, which writes its own log. In Triton's interpreter
the checker is ``xeforge_core.worker.bounds.BoundsCheck``, and what it found is written to the
``memcheck`` step's evidence (``accesses``, ``lanes``).
"""

from __future__ import annotations

import contextlib

from xeforge_core.verdict import Step
from xeforge_core.worker.bounds import BoundsCheck
from xeforge_core.worker.context import WorkerContext
from xeforge_core.worker.roles import _compile_step, combos_of


def run_memcheck(ctx: WorkerContext) -> None:
    """Make the checked call; the verdict's ``compile`` step says how it went, its ``memcheck``
    step carries the interpreter's findings (empty on a GPU, where the log holds them)."""
    combo = combos_of(ctx.job)[:1]
    check = BoundsCheck() if ctx.ops.interpreter else None
    holder: dict = {}
    with check if check is not None else contextlib.nullcontext():
        _compile_step(ctx, combo, holder)
    evidence = {"variant": combo[0].vname, "checker": "interpreter" if check is not None else "external"}
    if check is not None:
        evidence.update(accesses=check.accesses, lanes=check.lanes)
    ctx.verdict.steps.append(Step(name="memcheck", status=ctx.verdict.steps[-1].status,
                                  summary=f"one call at {combo[0].describe()}", evidence=evidence))
