"""Unit tests of the worker's parts that need no subprocess: output comparison, static
integrity rules, error classification, roofline arithmetic, and the cross-process device lock."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from xeforge_core.devlock import DeviceLock, LockTimeout, lock_path
from xeforge_core.verdict import VerdictKind
from xeforge_core.worker.compare import Tolerance, bitwise_equal, compare_outputs, default_tolerance
from xeforge_core.worker.errors import classify, hardcoded_device_note, map_compilation_line
from xeforge_core.worker.inputs import make_tensor
from xeforge_core.worker.integrity import aliased_outputs, mutated_inputs, static_findings
from xeforge_core.worker.timing import roofline, stats_of

# ----------------------------------------------------------------------------- comparison


def test_default_tolerances_by_dtype():
    assert default_tolerance(torch.float16) == (1e-2, 1e-2)
    assert default_tolerance(torch.bfloat16) == (2e-2, 2e-2)
    assert default_tolerance(torch.int32) == (0.0, 0.0)


def test_close_outputs_pass_and_atol_scales_with_magnitude():
    exp = torch.randn(64, generator=torch.Generator().manual_seed(0)) * 100
    ok, comps, warns, note = compare_outputs([exp + 0.5], [exp], Tolerance())
    assert ok and not warns and not note  # atol 1e-2 x rms(~100) absorbs 0.5 near zero
    ok, comps, _, _ = compare_outputs([exp + 0.5], [exp], Tolerance(rtol=1e-3, atol=1e-3, explicit=True))
    assert not ok and comps[0].mismatches > 0  # explicit tolerances are not scaled


def test_nan_and_inf_placement_must_match():
    exp = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    ok, comps, _, _ = compare_outputs([exp.clone()], [exp], Tolerance())
    assert ok
    moved = torch.tensor([float("nan"), 1.0, float("inf"), 2.0])
    ok, comps, _, _ = compare_outputs([moved], [exp], Tolerance())
    assert not ok and comps[0].nan_mismatch == 2
    flipped = torch.tensor([1.0, float("nan"), float("-inf"), 2.0])
    ok, comps, _, _ = compare_outputs([flipped], [exp], Tolerance())
    assert not ok and comps[0].inf_mismatch == 1


def test_every_element_of_a_tuple_output_is_compared():
    a, b = torch.ones(3), torch.zeros(3)
    ok, comps, _, _ = compare_outputs([a, b + 1], [a, b], Tolerance())
    assert not ok and [c.passed for c in comps] == [True, False]
    ok, _, _, note = compare_outputs([a], [a, b], Tolerance())
    assert not ok and "returned 1 output(s), expected 2" in note


def test_dtype_and_shape_changes_fail_unless_allowed():
    exp = torch.randn(4, 4)
    ok, comps, _, _ = compare_outputs([exp.half()], [exp], Tolerance())
    assert not ok and "dtype changed: expected float32, got float16" in comps[0].note
    ok, _, _, _ = compare_outputs([exp.half()], [exp], Tolerance(), allow_dtype_change=True)
    assert ok
    ok, comps, _, _ = compare_outputs([exp.reshape(16)], [exp], Tolerance())
    assert not ok and "shape changed" in comps[0].note
    assert comps[0].note.endswith("its 16 value(s) match in that shape, so only the shape differs "
                                  "(--allow-shape-change accepts it)")
    ok, _, _, _ = compare_outputs([exp.reshape(16)], [exp], Tolerance(), allow_shape_change=True)
    assert ok
    # a loss returned as [1] for the reference's 0-d scalar; and wrong values are not called only a shape change
    loss = torch.tensor(0.25)
    ok, comps, _, _ = compare_outputs([loss.reshape(1)], [loss], Tolerance())
    assert not ok and "expected [], got [1]; its 1 value(s) match" in comps[0].note
    ok, comps, _, _ = compare_outputs([(exp + 1).reshape(16)], [exp], Tolerance())
    assert not ok and "only the shape differs" not in comps[0].note


def test_vacuous_tolerance_is_flagged_and_judged_by_scale():
    exp = torch.full((100,), 1e-3)
    wrong = torch.zeros(100)  # every element within atol=0.01, but nothing like the answer
    ok, comps, warns, _ = compare_outputs([wrong], [exp], Tolerance())
    assert warns and "vacuous" in warns[0]
    assert not ok and "normwise relative error" in comps[0].note
    ok, _, warns, _ = compare_outputs([exp * (1 + 1e-4)], [exp], Tolerance())
    assert ok and warns  # still flagged, but a right answer passes


def test_an_expected_output_of_rounding_noise_is_held_to_atol_only():
    # the mean of group-normalised values: about 1e-8 in float32, and another summation order
    # gives other noise (seen on a public KernelBench pair): no relative error can be asked
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(32, generator=gen) * 1e-8
    other = torch.randn(32, generator=gen) * 1e-8
    ok, comps, warns, _ = compare_outputs([other], [noise], Tolerance())
    assert ok and "rounding noise" in warns[0], (comps[0].note, warns)
    # 1e-3 is signal, not noise: the normwise check still applies (the test above)
    assert not compare_outputs([torch.zeros(100)], [torch.full((100,), 1e-3)], Tolerance())[0]


def test_unwritten_elements_are_counted_when_memory_is_poisoned():
    exp = torch.ones(8)
    out = exp.clone()
    out[5:] = float("nan")
    ok, comps, _, _ = compare_outputs([out], [exp], Tolerance(), poisoned=True)
    assert not ok and "3 output element(s) left unwritten" in comps[0].note
    assert "(first at [5]: got nan, expected 1)" in comps[0].note  # where to look


def test_an_integer_maximum_the_expected_output_takes_is_a_value_not_poison():
    """Fresh integer outputs are poisoned with the dtype's maximum. A saturating int8
    quantisation writes 127 itself, so a wrong 127 there is a wrong value (seen on lightllm's
    per-row int8 quantiser, whose off-by-one rounding was called "left unwritten ... NaN"); an
    int32 index output that never reaches its maximum still tells an unwritten element."""
    exp = torch.tensor([[127, 40, -3], [126, 127, 0]], dtype=torch.int8)
    out = exp.clone()
    out[1, 0] = 127
    ok, comps, _, _ = compare_outputs([out], [exp], Tolerance(), poisoned=True)
    assert not ok and "left unwritten" not in comps[0].note and "NaN" not in comps[0].note, comps[0].note
    assert "1 of 6 element(s) outside" in comps[0].note and comps[0].kernelbench_mismatches == 1
    idx = torch.arange(6, dtype=torch.int32)
    out = idx.clone()
    out[4:] = torch.iinfo(torch.int32).max
    ok, comps, _, _ = compare_outputs([out], [idx], Tolerance(), poisoned=True)
    assert not ok and "2 output element(s) left unwritten" in comps[0].note, comps[0].note
    assert "they hold 2147483647, the int32 maximum" in comps[0].note and "NaN" not in comps[0].note


def test_kernelbench_refuses_an_integer_output_off_by_one():
    """KernelBench's ``allclose`` at 1e-4 refuses a difference of 1 on a value of 127; its column
    said pass where only a float output beside it was judged."""
    exp = torch.arange(10, dtype=torch.int64) * 1000
    _, comps, _, _ = compare_outputs([exp + 1], [exp], Tolerance())
    # 1 > 1e-4 + 1e-4 * |e| below |e| = 9999: only 0 ... 9000 fail
    assert comps[0].kernelbench_tol == 1e-4 and comps[0].kernelbench_mismatches == 10


def test_integer_outputs_are_exact():
    exp = torch.arange(10, dtype=torch.int32)
    ok, _, _, _ = compare_outputs([exp + 0], [exp], Tolerance())
    assert ok
    ok, comps, _, _ = compare_outputs([exp + 1], [exp], Tolerance())
    assert not ok and comps[0].mismatches == 10


def test_bitwise_equal_is_nan_aware():
    a = torch.tensor([1.0, float("nan")])
    assert bitwise_equal(a, a.clone())
    assert not bitwise_equal(a, torch.tensor([1.0, 2.0]))
    assert bitwise_equal(torch.tensor(3.0), torch.tensor(3.0))


def test_input_distributions():
    g = torch.Generator().manual_seed(0)
    u = make_tensor([1000], torch.float32, "uniform", g)
    assert float(u.min()) >= -1 and float(u.max()) <= 1
    m = make_tensor([1000], torch.float32, "mixed", g)
    assert float(m.abs().min()) >= 1e-3 - 1e-9 and float(m.abs().max()) <= 10
    assert bool((m < 0).any()) and bool((m > 0).any())
    i = make_tensor([100], torch.int32, "normal", g)
    assert i.dtype == torch.int32 and int(i.min()) >= 0 and int(i.max()) < 16


def test_redraws_are_kept_only_where_the_truth_stays_finite_and_depends_on_them():
    from xeforge_core.worker.domain import TruthDomain, nonfinite_summary, redraw_seeds

    assert redraw_seeds(["module", "normal", "uniform"], [0, 1, 2]) == {
        "module": [0, 1, 2], "normal": [0], "uniform": [0]}
    assert redraw_seeds(["normal", "uniform"], [0, 1]) == {"normal": [0, 1], "uniform": [0, 1]}
    # the stress redraw far from zero runs once, with a spec too
    assert redraw_seeds(["normal", "shifted"], [0, 1]) == {"normal": [0, 1], "shifted": [0]}
    nan = nonfinite_summary([torch.tensor([1.0, float("nan"), float("-inf")]), torch.tensor([3])])
    assert nan == "output 0: 1 NaN, 1 Inf of 3 element(s)"
    assert nonfinite_summary([torch.ones(2)]) is None

    d = TruthDomain("module", "reference")
    for seed in (0, 1):
        d.record("small", "module", seed, f"in{seed}", (f"out{seed}",), None)
    d.record("small", "normal", 0, "n0", ("nan-out",), "output 0: 1 NaN of 1 element(s)")  # leaves the domain
    d.record("small", "uniform", 0, "u0", ("out0",), None)  # the same truth as on other inputs
    d.record("odd", "module", 0, "in0", ("o0",), "output 0: 2 Inf of 9 element(s)")  # not finite on its own
    d.record("odd", "normal", 0, "n0", ("o1",), "output 0: 1 NaN of 9 element(s)")
    skipped, nonfinite = d.decide()
    assert set(skipped["small"]) == {"normal", "uniform"}
    assert "not finite on normal inputs" in skipped["small"]["normal"]
    assert "does not change with uniform inputs" in skipped["small"]["uniform"]
    assert "odd" not in skipped  # the truth is not finite on the problem's own inputs either
    assert nonfinite["odd"] == {"module/s0": "output 0: 2 Inf of 9 element(s)",
                                "normal/s0": "output 0: 1 NaN of 9 element(s)"}
    # integer inputs only: the redraw draws what the problem's own inputs drew, so it says so
    ints = TruthDomain("module", "reference")
    for seed in (0, 1):
        ints.record("small", "module", seed, f"in{seed}", (f"out{seed}",), None)
    ints.record("small", "normal", 0, "in0", ("out0",), None)
    why = ints.decide()[0]["small"]["normal"]
    assert why.startswith("normal inputs are the problem's own: it has no floating-point element to redraw"), why
    assert not ints.unchanged


def test_a_difference_only_where_the_truth_is_not_finite_is_excused():
    from xeforge_core.worker.domain import excused_by_nonfinite_truth

    truth = [torch.tensor([1.0, float("-inf"), 3.0])]
    clamped = [torch.tensor([1.0, -100.0, 3.0])]
    assert not compare_outputs(clamped, truth, Tolerance())[0]
    assert excused_by_nonfinite_truth(clamped, truth, Tolerance(), torch.device("cpu"))
    wrong_too = [torch.tensor([1.0, -100.0, 4.0])]
    assert not excused_by_nonfinite_truth(wrong_too, truth, Tolerance(), torch.device("cpu"))
    unwritten = [torch.tensor([float("nan"), float("-inf"), 3.0])]
    assert not excused_by_nonfinite_truth(unwritten, truth, Tolerance(), torch.device("cpu"), poisoned=True)


def test_mutation_and_alias_helpers():
    x = torch.randn(4)
    before = [x.clone()]
    assert mutated_inputs(before, [x]) == []
    x.add_(1)
    assert mutated_inputs(before, [x]) == [0]
    assert aliased_outputs([x[1:]], [x]) == [(0, 0)]
    assert aliased_outputs([x.clone()], [x]) == []


# ----------------------------------------------------------------------------- static rules

def _rules(src: str) -> set[tuple[str, int | None]]:
    return {(f.rule, f.line) for f in static_findings(ast.parse(textwrap.dedent(src)))}


def test_static_rules():
    src = """
    import sys
    import threading
    import time
    import torch

    def launch(x):
        try:
            kernel[(1,)](x)
        except Exception:
            return x * 2

    def relaunch(x):
        try:
            kernel[(1,)](x)
        except RuntimeError:
            raise

    def other(x):
        try:
            launch(x)
        except Exception:
            pass
        s = torch.cuda.Stream()
        f = sys._getframe(1)
        torch.cuda.Event.elapsed_time = lambda a, b: 1.0
        setattr(time, "perf_counter", lambda: 0.0)
        return f.f_back
    """
    rules = _rules(src)
    assert ("try_except_fallback", 10) in rules
    assert ("try_except_fallback", 22) in rules  # a try around a function that launches
    assert not any(r == "try_except_fallback" and line == 16 for r, line in rules)  # re-raises
    assert ("background_work", 3) in rules and ("background_work", 24) in rules
    assert ("inspects_frames", 25) in rules and ("inspects_frames", 28) in rules
    assert ("patches_timer", 26) in rules and ("patches_timer", 27) in rules


def test_static_rule_against_reaching_into_the_verifier():
    src = """
    import gc
    import os
    import sys
    import xeforge_core.worker.roles as roles

    def forward(x):
        open("result.json", "w").write("{}")
        mods = sys.modules
        os._exit(0)
    """
    rules = _rules(src)
    assert {("tampers_with_harness", line) for line in (2, 5, 8, 9, 10)} <= rules


def test_static_rules_quiet_on_a_plain_kernel():
    src = (Path(__file__).parent / "fixtures" / "planted" / "gemm_baseline.py").read_text()
    assert static_findings(ast.parse(src)) == []


# ----------------------------------------------------------------------------- errors

def test_classify_driver_faults_and_oom():
    path = "/nowhere/candidate.py"
    f = classify(RuntimeError("level_zero backend failed with error: 45 (UR_RESULT_ERROR_INVALID_ARGUMENT)"), path)
    assert f.kind is VerdictKind.CRASH and "UR_RESULT_ERROR_INVALID_ARGUMENT" in f.reason
    f = classify(RuntimeError("CUDA error: an illegal memory access was encountered"), path)
    assert f.kind is VerdictKind.CRASH
    f = classify(MemoryError(), path)
    assert f.kind is VerdictKind.OOM
    f = classify(RuntimeError("XPU out of memory. Tried to allocate 2.00 GiB"), path)
    assert f.kind is VerdictKind.OOM
    f = classify(ValueError("bad"), path)
    assert f.kind is VerdictKind.RUNTIME_ERROR


def test_an_oom_on_a_device_other_processes_fill_is_no_verdict_on_the_candidate():
    """PyTorch's allocator message (measured on the H200, twelve verifications sharing it): the
    process held 1.2 GiB and asked for 0.25 GiB of 139.8 GiB, 0.16 GiB free: the environment,
    not the candidate; a process that itself held most of the device is the candidate's oom."""
    path = "/nowhere/candidate.py"
    shared = ("CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 139.80 GiB of "
              "which 159.38 MiB is free. Including non-PyTorch memory, this process has 1.20 GiB memory in use. "
              "Of the allocated memory 800.00 MiB is allocated by PyTorch")
    f = classify(RuntimeError(shared), path)
    assert f.kind is VerdictKind.ENVIRONMENT, f.reason
    assert "other processes held 138.4 GiB of its 139.8 GiB" in f.reason and "not the cause" in f.reason
    own = shared.replace("this process has 1.20 GiB", "this process has 130.00 GiB")
    assert classify(RuntimeError(own), path).kind is VerdictKind.OOM
    huge = shared.replace("Tried to allocate 256.00 MiB", "Tried to allocate 90.00 GiB")
    assert classify(RuntimeError(huge), path).kind is VerdictKind.OOM
    capped = shared.replace("of which 159.38 MiB is free", "of which 120.00 GiB is free")  # a per-process cap
    assert classify(RuntimeError(capped), path).kind is VerdictKind.OOM


def test_runtime_error_points_at_the_module_line(tmp_path):
    mod = tmp_path / "candidate.py"
    mod.write_text("def f(x):\n    y = 1\n    return x / 0\n")
    ns: dict = {}
    exec(compile(mod.read_text(), str(mod), "exec"), ns)
    try:
        ns["f"](1)
    except ZeroDivisionError as exc:
        f = classify(exc, str(mod), during="running forward")
    assert f.kind is VerdictKind.RUNTIME_ERROR and f.line == 3
    assert "candidate.py:3" in f.reason and "return x / 0" in f.reason


def test_triton_compilation_error_line_mapping(tmp_path):
    """On a GPU, Triton reports lines counted from the kernel's ``def``; they map to file lines."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.jit import JITFunction

    mod = tmp_path / "kern.py"
    mod.write_text("import triton\n\n\n# padding\ndef kern(x):\n    a = 1\n    b = undefined_name\n")
    ns: dict = {}
    exec(compile(mod.read_text(), str(mod), "exec"), ns)
    jit = JITFunction(ns["kern"])
    node = ast.parse("b = undefined_name").body[0]
    node.lineno = 3  # third line of the function's source, counted from its def
    err = CompilationError(jit.src, node, "NameError: undefined_name is not defined")
    assert map_compilation_line(err, str(mod), [jit]) == 7
    f = classify(RuntimeError("launch failed").with_traceback(None), str(mod))
    assert f.kind is VerdictKind.RUNTIME_ERROR
    wrapped = RuntimeError("compile")
    wrapped.__cause__ = err
    f = classify(wrapped, str(mod), jit_functions=[jit])
    assert f.kind is VerdictKind.COMPILE_ERROR and f.line == 7 and "b = undefined_name" in f.reason


def test_hardcoded_device_note():
    src = 'x = x.to("xpu")\ntorch.xpu.synchronize()\n'
    assert "hard-codes the xpu device" in hardcoded_device_note(src, "AssertionError: XPU is not available", "cpu")
    assert hardcoded_device_note(src, "XPU", "xpu") is None
    assert hardcoded_device_note("y = 1", "ValueError", "cpu") is None


# ----------------------------------------------------------------------------- timing arithmetic

def test_stats_and_roofline():
    s = stats_of([10.0, 12.0, 11.0, 30.0], "events")
    assert s.median_us == 11.5 and s.min_us == 10.0 and s.trials == 4 and s.cv > 0
    profile = {"peak_tflops": {"fp16": 100.0}, "bandwidth_gbps": 1000.0}
    # 1 GFLOP over 1 MB in 1 ms: 1 TFLOP/s, 1000 GB/s; intensity 1000 flop/byte -> compute-bound (100 TFLOP/s)
    tflops, gbps, frac, suspect = roofline(1e9, 1e6, 1e-3, "fp16", profile)
    assert tflops == pytest.approx(1.0) and gbps == pytest.approx(1.0) and frac == pytest.approx(0.01)
    assert not suspect
    # memory-bound: intensity 1 flop/byte x 1000 GB/s = 1 TFLOP/s attainable; 2 TFLOP/s achieved
    tflops, _, frac, suspect = roofline(2e9, 2e9, 1e-3, "fp16", profile)
    assert frac == pytest.approx(2.0) and "above the attainable" in suspect
    assert roofline(1e9, None, 1e-3, "fp16", None)[2] is None


# ----------------------------------------------------------------------------- device lock

HOLDER = """
import sys, time
from xeforge_core.devlock import DeviceLock
with DeviceLock(sys.argv[1], "cuda0"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_device_lock_queues_across_processes(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "1.5"], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        progress = tmp_path / "progress.jsonl"
        queued: list[str] = []
        with pytest.raises(LockTimeout):
            DeviceLock(tmp_path, "cuda0", on_queued=queued.append, timeout_s=0.2).acquire()
        assert queued and "queued" in queued[0] and f"pid {proc.pid}" in queued[0]
        start = time.monotonic()
        with DeviceLock(tmp_path, "cuda0", on_queued=queued.append, progress_path=progress) as lock:
            assert lock.held and lock.waited_s > 0
        assert time.monotonic() - start < 10
        events = [json.loads(x)["event"] for x in progress.read_text().splitlines()]
        assert events == ["queued", "lock_acquired"]
    finally:
        proc.wait(timeout=10)
    # another device is independent, and a free lock is taken at once without a queued event
    with DeviceLock(tmp_path, "cuda1", on_queued=queued.append) as lock:
        assert lock.waited_s < 0.5
    assert lock_path(tmp_path, "xpu:0").name == "xpu_0.lock"


def test_device_lock_released_when_holder_dies(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "30"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    proc.kill()
    proc.wait(timeout=10)
    with DeviceLock(tmp_path, "cuda0", timeout_s=5) as lock:
        assert lock.held


SHARED_HOLDER = """
import sys, time
from xeforge_core.devlock import DeviceLock
with DeviceLock(sys.argv[1], "cuda0", shared=sys.argv[2] == "shared"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _holder(tmp_path, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SHARED_HOLDER, str(tmp_path), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _release(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait(timeout=30)


def test_device_lock_shared_holders_exclude_timing_only(tmp_path):
    """Correctness runs (shared) share the device with each other, never with a timing run
    (exclusive), and a timing run that waits blocks new shared holders (the turnstile)."""
    reader = _holder(tmp_path, "shared")
    try:
        with DeviceLock(tmp_path, "cuda0", shared=True, timeout_s=5) as other:  # two shared at once
            assert other.held and other.waited_s < 5
        with pytest.raises(LockTimeout):  # timing waits for the shared holder
            DeviceLock(tmp_path, "cuda0", timeout_s=0.3).acquire()
    finally:
        _release(reader)
    timing = _holder(tmp_path, "exclusive")
    try:
        with pytest.raises(LockTimeout):  # no correctness run while a timing run holds it
            DeviceLock(tmp_path, "cuda0", shared=True, timeout_s=0.3).acquire()
    finally:
        _release(timing)
    with DeviceLock(tmp_path, "cuda0", shared=True, timeout_s=5) as lock:
        assert lock.held


def test_device_lock_waiting_timing_run_is_not_starved(tmp_path):
    """A timing run queued behind a shared holder holds the turnstile: a later shared request
    waits for it instead of overtaking it."""
    reader = _holder(tmp_path, "shared")
    waiter = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "0"], stdout=subprocess.PIPE, text=True)
    try:
        gate = lock_path(tmp_path, "cuda0").with_suffix(".gate")
        deadline = time.monotonic() + 60
        while True:  # the timing run is at the turnstile once the gate cannot be taken
            fd = os.open(gate, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                break
            finally:
                os.close(fd)
            assert time.monotonic() < deadline, "the timing run never reached the turnstile"
            time.sleep(0.05)
        with pytest.raises(LockTimeout):
            DeviceLock(tmp_path, "cuda0", shared=True, timeout_s=0.3).acquire()
    finally:
        _release(reader)
    assert waiter.stdout.readline().strip() == "held"
    waiter.wait(timeout=30)


def test_sharing_gives_up_after_its_wait_and_says_so(tmp_path):
    """A shared holder waits for a timing run at most its limit, then runs without the lock and
    ends its queued wait in the job's progress (the wait is not held against its time limit)."""
    from xeforge_core.devlock import sharing

    timing = _holder(tmp_path, "exclusive")
    progress = tmp_path / "progress.jsonl"
    notes: list[str] = []
    try:
        with sharing(tmp_path, "cuda0", timeout_s=0.3, progress_path=progress, on_give_up=notes.append) as held:
            assert not held
    finally:
        _release(timing)
    assert notes and "without the device lock" in notes[0]
    assert [json.loads(x)["event"] for x in progress.read_text().splitlines()] == ["queued", "lock_acquired"]
    with sharing(tmp_path, "cuda0", timeout_s=5) as held:
        assert held


def test_device_lock_shared_inside_own_exclusive_hold_passes(tmp_path):
    """A timing run's own warm-up call asks for the device shared: it is let through."""
    with DeviceLock(tmp_path, "cuda0"):
        with DeviceLock(tmp_path, "cuda0", shared=True, timeout_s=0.5) as inner:
            assert inner.held
        assert not inner.held
    with DeviceLock(tmp_path, "cuda0", shared=True, timeout_s=0.5) as after:
        assert after.held


# ----------------------------------------------------------------------------- launch capture

def test_launch_recorder_sees_interpreted_launches_and_threads():
    import threading
    from collections import namedtuple

    import triton
    import triton.language as tl

    from xeforge_core.worker.capture import LaunchRecorder, kernel_info_from_compiled

    @triton.jit
    def twice(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)

    rec = LaunchRecorder()
    rec.install()
    try:
        x = torch.ones(10)
        twice[(1,)](x, 10, BLOCK=16)
        worker = threading.Thread(target=lambda: twice[(1,)](x, 10, BLOCK=16))
        worker.start()
        worker.join()
    finally:
        rec.uninstall()
    assert torch.equal(x, torch.full((10,), 4.0))
    assert [(r.kernel, r.constexprs, r.main_thread) for r in rec.launches] == [
        ("twice", {"BLOCK": 16}, True), ("twice", {"BLOCK": 16}, False)]
    assert len(rec.kernels) == 1

    # the GPU path reads a CompiledKernel; its shape (metadata namedtuple, asm dict) is all it needs
    Meta = namedtuple("Meta", "num_warps num_stages shared grf_mode threads_per_warp")

    class Compiled:
        metadata = Meta(8, 3, 16384, "256", 16)
        asm = {"ttir": "module {}", "ttgir": "#ttg", "spv": b"\x03\x02#\x07"}
        n_regs, n_spills = 128, 4

    info = kernel_info_from_compiled("k", Compiled(), {"BLOCK": 64})
    assert (info.num_warps, info.num_stages, info.shared_bytes, info.grf_mode) == (8, 3, 16384, "256")
    assert (info.registers, info.spills) == (128, 4)
    assert set(info.ir) == {"ttir", "ttgir"}  # the SPIR-V binary is skipped
    assert info.config == {"BLOCK": 64, "threads_per_warp": 16}


def test_minimum_bytes_counts_what_is_read_and_what_is_written_once_each():
    import torch

    from xeforge_core.worker.timing import _minimum_bytes

    model = torch.nn.Linear(8, 4, bias=True)  # weight 32 + bias 4 floats
    x = torch.randn(2, 8)                      # 16 floats
    out = model(x)                             # 8 floats
    assert _minimum_bytes([x, x], model, (out, out)) == 4 * (32 + 4 + 16 + 8)
    # a kernel that writes its input in place reads and writes it: twice its bytes, as out of place
    assert _minimum_bytes([x], torch.nn.Identity(), x) == 2 * 4 * 16 == _minimum_bytes([x], torch.nn.Identity(), x + 1)


def test_weights_move_across_different_names_by_shape():
    # KernelBench's Model keeps nn.Linear (state_dict: bias, gemm.weight) where a published
    # ModelNew keeps weight and bias of its own, initialised in another order: the same seed
    # gives other values, so the candidate takes the reference's tensors by shape
    import torch.nn as nn

    from xeforge_core.worker.inputs import load_matching_state

    class Ref(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gemm = nn.Linear(6, 4, bias=False)
            self.bias = nn.Parameter(torch.randn(4))

    class New(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 6))
            self.bias = nn.Parameter(torch.randn(4))

    ref, new = Ref(), New()
    note = load_matching_state(new, ref.state_dict())
    assert note.startswith("copied by shape") and "weight <- gemm.weight" in note
    assert torch.equal(new.weight, ref.gemm.weight) and torch.equal(new.bias, ref.bias)
    assert "own initial values differ (weight, bias)" in note  # built in another order, from other inits
    torch.manual_seed(3)
    same = New()
    torch.manual_seed(3)
    assert load_matching_state(New(), same.state_dict()) == "copied"
    assert "own initial values differ (weight, bias)" in load_matching_state(New(), New().state_dict())

    class Other(nn.Module):  # a tensor of a shape the reference does not have: nothing is copied
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(6, 4))
            self.bias = nn.Parameter(torch.randn(4))

    other = Other()
    before = other.weight.detach().clone()
    assert "same init seed used" in load_matching_state(other, ref.state_dict())
    assert torch.equal(other.weight, before)


def test_tf32_dots_names_every_way_a_float32_dot_runs_in_tf32():
    """The TF32 lint reads each tl.dot call, not the words in the source: ``allow_tf32=True``
    (as published KernelBench solutions write it) is TF32 as much as the default is."""
    from xeforge_core.worker.roles import tf32_dots

    src = '''
    @triton.jit
    def k(a, b, USE_TF32: tl.constexpr, PREC: tl.constexpr):
        x = tl.dot(a, b)
        x = tl.dot(a, b, allow_tf32=True)
        x = tl.dot(a, b, allow_tf32=USE_TF32)
        x = tl.dot(a, b, input_precision="tf32x3")
        x = tl.dot(a, b, input_precision=PREC)
        x = tl.dot(a, b, x, "tf32")
        x = tl.dot(a, b, allow_tf32=False)
        x = tl.dot(a, b, input_precision="ieee")
    '''
    found = tf32_dots(src)
    assert [f.split(":")[0] for f in found] == [f"line {n}" for n in (4, 5, 6, 7, 8, 9)]
    assert "Triton's default" in found[0] and "allow_tf32=True" in found[1]
    assert "allow_tf32=USE_TF32, chosen at compile time" in found[2]
    assert 'input_precision="tf32x3"' in found[3] and 'input_precision="tf32"' in found[5]
    assert tf32_dots("def k(a, b):\n    return tl.dot(a, b, allow_tf32=False)\n") == []
    assert tf32_dots("not python (") == []


def test_a_single_input_set_says_why_it_was_single():
    """One seed and no redraw at a size is not get_inputs() ignoring its seed: each variant is
    named with its own reason."""
    from xeforge_core.worker.roles import _fixed_inputs_phrase

    both = _fixed_inputs_phrase(["module-whole", "module-small"], ["module-whole"])
    assert both == ("; one fixed input set checked on module-whole, module-small (module-whole: one seed and no "
                    "redraw at that size; module-small: get_inputs() gives the same inputs whatever the seed)")
    assert "whatever the seed" not in _fixed_inputs_phrase(["module-whole"], ["module-whole"])


def test_a_launch_that_passes_int64_as_its_index_dtype_is_not_warned_of_int32_offsets():
    """A first version's kernel takes its index dtype as a constexpr (``INDEX_DTYPE``); the
    recorder keeps a dtype constexpr by name, so a launch past 2^31 elements that passes int64 is
    not told its offsets wrap, and one that passes int32 there is."""
    import ast

    import triton
    import triton.language as tl

    from xeforge_core.worker.capture import LaunchRecorder
    from xeforge_core.worker.roles import launch_findings

    source = ("@triton.jit\ndef scale(x_ptr, n, BLOCK: tl.constexpr, INDEX_DTYPE: tl.constexpr):\n"
              "    offs = tl.program_id(0).to(INDEX_DTYPE) * BLOCK + tl.arange(0, BLOCK).to(INDEX_DTYPE)\n"
              "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)\n")
    namespace = {"triton": triton, "tl": tl}
    exec(compile(ast.parse(source), "scale.py", "exec"), namespace)
    big = torch.ones(1).expand(2**31 + 5)
    rec = LaunchRecorder()
    rec.dry = True
    rec.install()
    try:
        for dtype in (tl.int64, tl.int32):
            namespace["scale"][(1,)](big, big.numel(), BLOCK=16, INDEX_DTYPE=dtype)
    finally:
        rec.uninstall()
    assert [r.constexprs["INDEX_DTYPE"] for r in rec.launches] == ["int64", "int32"]
    wide, narrow = ([f.rule for f in launch_findings([r], {"scale": source})] for r in rec.launches)
    assert "int32_offset_overflow" not in wide and "int32_offset_overflow" in narrow


def test_a_warning_repeated_with_other_numbers_is_given_once():
    """Each run's comparison warns of a vacuous atol with its own share (100%, 99%): one warning
    per output, not one per run; another output's is its own."""
    from types import SimpleNamespace

    from xeforge_core.worker.roles import _warn_once

    ctx = SimpleNamespace(verdict=SimpleNamespace(warnings=[]))
    for text in ("output 0: atol 0.001 exceeds |expected| for 100% of the elements",
                 "output 0: atol 0.001 exceeds |expected| for 99% of the elements",
                 "output 1: atol 0.001 exceeds |expected| for 99% of the elements"):
        _warn_once(ctx, text)
    assert ctx.verdict.warnings == ["output 0: atol 0.001 exceeds |expected| for 100% of the elements",
                                    "output 1: atol 0.001 exceeds |expected| for 99% of the elements"]


def test_the_cpu_allocators_refusal_is_out_of_memory_inside_the_worker():
    """PyTorch's CPU allocator under the worker's address-space limit says "can't allocate
    memory"; the worker called it a runtime error, so the sizes job skipped to the next size and
    ran out of time there instead of saying out of memory."""
    from xeforge_core.verdict import VerdictKind
    from xeforge_core.worker.errors import classify

    try:
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)")
    except RuntimeError as exc:
        failure = classify(exc, "k.py", during="probing the sizes at module-small")
    assert failure.kind is VerdictKind.OOM and failure.reason.startswith("out of memory while probing"), failure
