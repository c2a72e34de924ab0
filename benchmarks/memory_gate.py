"""Admit parallel benchmark children by the memory their problems need, not by count alone.

A KernelBench problem at its published size can take 6-8 GiB of inputs (a 4-D pooling, a
mat-vec with K = 1M), and a verification holds several copies of them at once: the inputs, the
float64 truth's inputs and output, the baseline's, the candidate's and the anchors' outputs, and
the runs it saves to disk. On the H200 (2026-12-04) eight such children at once held 134 GiB of
its 140 GiB, and the next to allocate failed with "out of memory" or "No space left on device":
rows that measure the machine, not the kernel.

``MemoryGate`` admits a child only while the estimates of the children running fit in its
capacity, and, where the device's free memory can be read (``device_free_bytes``), while that
free memory holds the next child's estimate too: processes the gate does not admit (a second
benchmark sharing the GPU) take memory it cannot count. A child whose estimate alone exceeds the
capacity runs by itself. The capacity counts the disk the children write their saved runs to as
well (``device_capacity``). ``pair_footprint`` is the
estimate: :data:`COPIES` times the input bytes ``get_inputs()`` allocates at the largest size
the child checks (read statically, ``xeforge_core.problem.scaling.estimate_input_bytes``), plus
:data:`FIXED_BYTES` for the CUDA contexts of its worker processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress

__all__ = ["COPIES", "FIXED_BYTES", "MemoryGate", "device_capacity", "device_free_bytes", "pair_footprint"]

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
    true to stop waiting: ``admit`` then yields ``False`` and nothing is held. ``free_bytes``
    (optional) reads the device's free memory now (``None``: unknown); beside running children
    ``n`` must also fit in it.

    Raises ``ValueError`` for a capacity that is not positive."""

    def __init__(self, capacity_bytes: int, free_bytes: Callable[[], int | None] | None = None) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
        self.capacity = capacity_bytes
        self.free_bytes = free_bytes
        self.held = 0
        self.running = 0
        self._cond = threading.Condition()

    def _fits(self, n: int) -> bool:
        if self.running == 0:
            return True
        if self.held + n > self.capacity:
            return False
        free = self.free_bytes() if self.free_bytes is not None else None
        return free is None or n <= free

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


def device_free_bytes(index: int = 0) -> int | None:
    """Free memory of GPU ``index`` now, in bytes, from ``nvidia-smi`` (no CUDA context in this
    process); ``None`` where it cannot be read (no such tool, another vendor's device)."""
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return int(float(out.strip().splitlines()[0])) * 2**20
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def device_capacity(device_type: str, share: float = 0.85, work_dir: str | None = None) -> int | None:
    """``share`` of the smallest of the GPU's memory, the host's (the verifier's saved runs and
    the truth's copies live on the host as well) and the disk free under ``work_dir`` (where the
    saved runs are written: on the H200 machine's 64 GiB disk, children checking 8-15 GB problems
    at once ran out of it), in bytes; ``None`` on cpu or where the GPU cannot be read."""
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
    if work_dir is not None:
        with suppress(OSError):
            sizes.append(shutil.disk_usage(work_dir).free)
    return int(share * min(sizes))
