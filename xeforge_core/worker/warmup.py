"""Warm-up of a pool worker (``worker.__main__.pool_main``) before it is handed a job.

The first Triton launch of a process pays for loading the compiler pipeline or, in the CPU
interpreter, its lazy imports (0.19 s against 0.02 s for a later, different kernel on the 2-core
CPU machine); a pool worker pays that here, with this module's own trivial kernel, instead of
during the job. Runs before any job: no code under test is involved. torch, triton and the
standard library only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def run(device: str) -> None:
    """Launch the trivial kernel once on ``device`` (``cpu``: Triton's interpreter) and wait
    for it; raises what the launch raises."""
    x = torch.zeros(64, device=device)
    _touch[(1,)](x, x.numel(), BLOCK=64)
    if device != "cpu":
        getattr(torch, device).synchronize()
    assert float(x.sum()) == 64.0
