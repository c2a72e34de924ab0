"""benchmarks/memory_gate.py: children are admitted while their estimated memory fits; one that
alone exceeds the capacity runs by itself; a waiter can give up (a deadline) and is woken when
memory is released. Synchronised with events, not sleeps."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from memory_gate import COPIES, FIXED_BYTES, MemoryGate, device_capacity, pair_footprint  # noqa: E402


def test_children_that_fit_run_together_and_one_that_does_not_waits():
    gate = MemoryGate(100)
    with gate.admit(40) as a, gate.admit(50) as b:
        assert a and b and gate.held == 90
        with gate.admit(20, give_up=lambda: True) as c:
            assert not c and gate.held == 90
    assert gate.held == 0 and gate.running == 0


def test_a_child_larger_than_the_capacity_runs_alone():
    gate = MemoryGate(100)
    with gate.admit(150) as big:
        assert big and gate.running == 1
        with gate.admit(1, give_up=lambda: True) as small:
            assert not small
    with gate.admit(1) as small, gate.admit(150, give_up=lambda: True) as big:
        assert small and not big


def test_a_waiter_is_woken_when_memory_is_released():
    gate = MemoryGate(100)
    holding, waiting, admitted = threading.Event(), threading.Event(), []

    def second() -> None:
        holding.wait()

        def give_up() -> bool:
            waiting.set()
            return False

        with gate.admit(80, give_up=give_up) as ok:
            admitted.append((ok, gate.held))

    t = threading.Thread(target=second)
    t.start()
    with gate.admit(60):
        holding.set()
        assert waiting.wait(timeout=30)
        assert admitted == []
    t.join(timeout=30)
    assert admitted == [(True, 80)]


def test_footprint_counts_the_largest_size_and_the_contexts():
    assert pair_footprint([2**30, None, 3 * 2**30]) == COPIES * 3 * 2**30 + FIXED_BYTES
    assert pair_footprint([]) == FIXED_BYTES
    assert device_capacity("cpu") is None
    with pytest.raises(ValueError, match="capacity_bytes"):
        MemoryGate(0)


def test_memory_others_hold_on_the_device_keeps_the_next_child_waiting():
    """A second benchmark sharing the GPU holds memory the gate never admitted: beside a running
    child, the next is admitted only when the device's free memory holds its estimate as well."""
    free = {"now": 10}
    gate = MemoryGate(100, free_bytes=lambda: free["now"])
    with gate.admit(30) as first:
        assert first
        calls = iter([False, True])
        with gate.admit(20, give_up=lambda: next(calls)) as second:
            assert not second  # 60 of 100 counted, but only 10 free on the device
        free["now"] = 50
        with gate.admit(20) as third:
            assert third
    with gate.admit(500) as alone:  # nothing else of the gate's runs: admitted whatever is free
        assert alone


def test_the_capacity_counts_the_free_disk(tmp_path, monkeypatch):
    """The saved runs go to disk: a 140 GiB GPU with 10 GiB of disk free admits 10 GiB."""
    import memory_gate
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: type("P", (), {"total_memory": 140 * 2**30})())
    monkeypatch.setattr(memory_gate.shutil, "disk_usage", lambda path: type("U", (), {"free": 10 * 2**30})())
    assert memory_gate.device_capacity("cuda", share=1.0, work_dir=str(tmp_path)) == 10 * 2**30
