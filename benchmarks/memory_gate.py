"""Admit parallel benchmark children by the memory their problems need, not by count alone.

A KernelBench problem at its published size can take 6-8 GiB of inputs (a 4-D pooling, a
mat-vec with K = 1M), and a verification holds several copies of them at once: the inputs, the
float64 truth's inputs and output, the baseline's, the candidate's and the anchors' outputs, and
the runs it saves to disk. On the H200 (2026-12-04) eight such children at once held 134 GiB of
its 140 GiB, and the next to allocate failed with "out of memory" or "No space left on device":
rows that measure the machine, not the kernel.

``MemoryGate`` admits a child only while the estimates of the children running fit in its
capacity; a child whose estimate alone exceeds it runs by itself. ``pair_footprint`` is the
estimate: :data:`COPIES` times the input bytes ``get_inputs()`` allocates at the largest size
the child checks (read statically, ``xeforge_core.problem.scaling.estimate_input_bytes``), plus
:data:`FIXED_BYTES` for the CUDA contexts of its worker processes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress

__all__ = ["COPIES", "FIXED_BYTES", "MemoryGate", "device_capacity", "pair_footprint"]

#: Copies of its inputs' bytes a child holds at its peak. Measured on the H200 (2026-12-04): a
#: baseline worker checking a 7-8 GiB problem (RMSNorm, 3-D pooling, a mean reduction) at its
#: published size held 40.6-42.6 GiB and asked for 14-16 GiB more (the inputs, their float64
#: truth at twice float32's bytes, the outputs and the saved runs), about 7-8 times its inputs.
COPIES = 8
#: Bytes each child holds whatever its size: a CUDA context (about 0.5 GiB on an H200) for
#: each of its worker processes that can be alive at once.
FIXED_BYTES = 2 * 2**30


def pair_footprint(input_bytes: Iterable[int | None]) -> int:
    """Estimated peak device bytes of one child whose sizes allocate ``input_bytes`` (bytes per
    size, ``None`` where unknown: counted as 0)."""
    largest = max((b or 0 for b in input_bytes), default=0)
    return COPIES * largest + FIXED_BYTES


class MemoryGate:
    """A counting gate over bytes: ``with gate.admit(n):`` waits until ``n`` bytes fit beside
    the children admitted (``capacity_bytes`` in all), or until nothing else runs when ``n``
    alone exceeds the capacity. ``give_up`` (called while waiting, about once a second) returns
    true to stop waiting: ``admit`` then yields ``False`` and nothing is held.

    Raises ``ValueError`` for a capacity that is not positive."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
        self.capacity = capacity_bytes
        self.held = 0
        self.running = 0
        self._cond = threading.Condition()

    def _fits(self, n: int) -> bool:
        return self.running == 0 or self.held + n <= self.capacity

    @contextmanager
    def admit(self, n: int, give_up: Callable[[], bool] = lambda: False) -> Iterator[bool]:
        with self._cond:
            while not self._fits(n):
                if give_up():
                    break
                self._cond.wait(timeout=1.0)
            admitted = self._fits(n)
            if admitted:
                self.held += n
                self.running += 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._cond:
                    self.held -= n
                    self.running -= 1
                    self._cond.notify_all()


def device_capacity(device_type: str, share: float = 0.85) -> int | None:
    """``share`` of the smaller of the GPU's memory and the host's (the verifier's saved runs
    and the truth's copies live on the host as well), in bytes; ``None`` on cpu or where
    neither can be read."""
    if device_type != "cuda":
        return None
    sizes: list[int] = []
    try:
        import torch

        sizes.append(int(torch.cuda.get_device_properties(0).total_memory))
    except Exception:  # noqa: BLE001 - no device to read: no gate
        return None
    with suppress(ValueError, OSError, AttributeError):
        sizes.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return int(share * min(sizes))
