"""Structure and integrity checks: is the candidate still a Triton kernel doing the work, and does
it play fair with the harness?

Static (AST) rules, each a ``Finding.rule``:

* ``try_except_fallback``  a ``try`` around a kernel launch whose handler does anything but
  re-raise (a fallback path that hides a failing kernel).
* ``background_work``      threads, process/thread pools or side streams (``threading``,
  ``concurrent.futures``, ``multiprocessing``, ``torch.cuda.Stream``/``torch.xpu.Stream``).
* ``patches_timer``        assignments to timing or synchronisation functions
  (``elapsed_time``, ``synchronize``, ``perf_counter``, ``do_bench``, ...), or ``setattr`` on
  ``torch.cuda``/``torch.xpu``/``time``/``triton.testing``.
* ``inspects_frames``      ``sys._getframe``, ``inspect.stack``/``currentframe``/
  ``getouterframes``, ``f_back``, ``traceback.extract_stack``.
* ``tampers_with_harness`` reaching into the verifier's process: importing ``xeforge_core``,
  ``gc`` or ``ctypes``, ``sys.modules``, ``__import__``/``importlib.import_module``,
  ``os._exit``, or naming the job's files (``result.json``, ``job.json``, ...). The worker runs
  the module in its own process, so these are the ways a module could forge its verdict.

Runtime rules (checked by the role code with the helpers here): ``no_triton_launch``,
``torch_fallback`` (heavy aten ops traced with a ``TorchDispatchMode`` that the baseline does not
run), ``mutates_input``, ``output_aliases_input``, ``cached_output``, ``reused_output_buffer``,
``tensor_subclass``, ``background_thread``, ``side_stream``, ``patches_timer``, ``kernels_unused``
(the outputs still match with every Triton launch skipped: the knockout call). An input modified
in place that the truth leaves unchanged (with an output aliasing it) fails the verdict as a wrong
answer after the correctness step, not as cheating (``roles._side_effects_to_verdict``).
"""

from __future__ import annotations

import ast
import contextlib
import threading
import time
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xeforge_core.verdict import Finding, Verdict
from xeforge_core.worker.astutil import dotted_name
from xeforge_core.worker.compare import bitwise_equal

#: aten ops that do the heavy work of a kernel; one of these in the candidate's forward that the
#: baseline's forward does not run means the hot op fell back to torch.
HEAVY_OPS = frozenset({
    "mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "linear", "dot", "vdot", "mv", "addmv",
    "einsum", "tensordot", "_int_mm", "_scaled_mm",
    "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "mkldnn_convolution",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_fused_attention_overrideable",
    "_softmax", "softmax", "_log_softmax", "log_softmax",
    "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "native_group_norm", "_fused_rms_norm",
})

_TIMER_ATTRS = {"elapsed_time", "synchronize", "perf_counter", "perf_counter_ns", "do_bench",
                "do_bench_cudagraph", "monotonic", "monotonic_ns", "time", "time_ns", "record",
                "current_stream", "Event"}
_TIMER_OWNERS = {"torch.cuda", "torch.xpu", "time", "triton.testing", "torch.cuda.Event",
                 "torch.xpu.Event", "torch.Event", "torch.accelerator"}


def _is_launch(node: ast.AST) -> bool:
    """``kernel[grid](...)``: a call whose callee is a subscript."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)


def _contains_launch(nodes: list[ast.stmt], launchers: set[str]) -> bool:
    for stmt in nodes:
        for sub in ast.walk(stmt):
            if _is_launch(sub):
                return True
            if isinstance(sub, ast.Call):
                name = dotted_name(sub.func).split(".")[-1]
                if name in launchers:
                    return True
    return False


def _handler_reraises(handler: ast.ExceptHandler) -> bool:
    body = [s for s in handler.body if not isinstance(s, ast.Expr) or not isinstance(
        getattr(s, "value", None), ast.Constant)]
    return bool(body) and all(isinstance(s, ast.Raise) for s in body)


def _launcher_functions(tree: ast.Module) -> set[str]:
    """Module-level functions whose body launches a kernel (one level deep)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _is_launch(sub) for sub in ast.walk(node)):
            out.add(node.name)
    return out


def static_findings(tree: ast.Module) -> list[Finding]:
    """AST rules of the module docstring, with lines."""
    findings: list[Finding] = []
    launchers = _launcher_functions(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _contains_launch(node.body, launchers):
            for handler in node.handlers:
                if not _handler_reraises(handler):
                    findings.append(Finding(
                        "try_except_fallback",
                        "a try/except around a kernel launch handles the failure instead of "
                        "re-raising it (a fallback path can hide a kernel that does not run)",
                        line=handler.lineno))
                    break
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                if root in ("xeforge_core", "gc", "ctypes"):
                    findings.append(Finding("tampers_with_harness", f"imports {name}: a kernel module has no "
                                            "business with the verifier's own code, the garbage collector or "
                                            "raw memory", line=node.lineno))
                if root in ("threading", "concurrent", "multiprocessing", "_thread", "asyncio"):
                    findings.append(Finding("background_work",
                                            f"imports {name}: work off the timed stream/thread is not allowed",
                                            line=node.lineno))
        elif isinstance(node, ast.Call):
            name = dotted_name(node.func)
            if name.endswith(("cuda.Stream", "xpu.Stream", "cuda.stream", "xpu.stream", "cuda.set_stream",
                              "xpu.set_stream", "torch.Stream")):
                findings.append(Finding("background_work",
                                        f"uses {name}: kernels must run on the default (timed) stream",
                                        line=node.lineno))
            if name in ("sys._getframe", "inspect.stack", "inspect.currentframe", "inspect.getouterframes",
                        "inspect.getframeinfo", "traceback.extract_stack", "traceback.walk_stack",
                        "_getframe", "currentframe"):
                findings.append(Finding("inspects_frames", f"calls {name}: inspecting the caller's frames "
                                        "is not allowed", line=node.lineno))
            if name in ("os._exit", "posix._exit", "__import__", "importlib.import_module", "gc.get_objects",
                        "gc.get_referrers"):
                findings.append(Finding("tampers_with_harness", f"calls {name}: not allowed in a kernel module "
                                        "(it can end or reach into the verifier's process)", line=node.lineno))
            if name in ("setattr", "builtins.setattr") and node.args:
                owner = dotted_name(node.args[0])
                if owner in _TIMER_OWNERS or owner.split(".")[-1] in ("cuda", "xpu", "time", "testing"):
                    findings.append(Finding("patches_timer", f"setattr on {owner}: patching timing or "
                                            "synchronisation is not allowed", line=node.lineno))
        elif isinstance(node, ast.Attribute) and node.attr in ("f_back", "f_locals", "f_globals") \
                and isinstance(node.ctx, ast.Load):
            findings.append(Finding("inspects_frames", f"reads frame attribute .{node.attr}", line=node.lineno))
        elif isinstance(node, ast.Attribute) and dotted_name(node) == "sys.modules":
            findings.append(Finding("tampers_with_harness", "uses sys.modules: a kernel module must not reach "
                                    "into other loaded modules", line=node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                name in node.value for name in ("result.json", "job.json", "meta.json", "progress.jsonl")):
            findings.append(Finding("tampers_with_harness", f"names the verifier's file {node.value!r}",
                                    line=node.lineno))
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    full = dotted_name(target)
                    owner = full.rsplit(".", 1)[0] if "." in full else ""
                    if target.attr in _TIMER_ATTRS and (owner in _TIMER_OWNERS or owner.endswith(
                            ("cuda", "xpu", "time", "testing", "Event"))):
                        findings.append(Finding("patches_timer", f"assigns {full}: patching timing or "
                                                "synchronisation is not allowed", line=node.lineno))
    # one finding per (rule, line)
    seen: set[tuple[str, int | None]] = set()
    unique = []
    for f in findings:
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            unique.append(f)
    return unique


def _timer_targets() -> list[tuple[Any, str, str]]:
    import triton.testing

    targets: list[tuple[Any, str, str]] = [
        (time, "perf_counter", "time.perf_counter"), (time, "perf_counter_ns", "time.perf_counter_ns"),
        (time, "time", "time.time"), (time, "monotonic", "time.monotonic"),
        (triton.testing, "do_bench", "triton.testing.do_bench"),
        (torch.cuda, "synchronize", "torch.cuda.synchronize"),
        (torch.cuda, "Event", "torch.cuda.Event"),
        (torch.cuda.Event, "elapsed_time", "torch.cuda.Event.elapsed_time"),
        (torch.cuda.Event, "record", "torch.cuda.Event.record"),
    ]
    if hasattr(torch, "xpu"):
        targets.append((torch.xpu, "synchronize", "torch.xpu.synchronize"))
        if hasattr(torch.xpu, "Event"):
            targets.append((torch.xpu, "Event", "torch.xpu.Event"))
            targets.append((torch.xpu.Event, "elapsed_time", "torch.xpu.Event.elapsed_time"))
            targets.append((torch.xpu.Event, "record", "torch.xpu.Event.record"))
    return targets


class TimerGuard:
    """Identity snapshot of timing/synchronisation functions, taken before any module under
    test runs; ``check()`` names those that were replaced and restores the originals."""

    def __init__(self) -> None:
        self.snapshot = [(owner, attr, label, getattr(owner, attr, None)) for owner, attr, label in _timer_targets()]

    def check(self) -> list[Finding]:
        """Findings for replaced timing functions (originals restored)."""
        findings = []
        for owner, attr, label, original in self.snapshot:
            current = getattr(owner, attr, None)
            if current is not original:
                findings.append(Finding("patches_timer", f"{label} was replaced at run time; restored"))
                with contextlib.suppress(Exception):
                    setattr(owner, attr, original)
        return findings


class ThreadWatch:
    """Records threads started (``threading.Thread.start``) while ``active``."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.active = False
        self._orig = threading.Thread.start
        watch = self

        def start(thread_self: threading.Thread, *a: Any, **k: Any) -> Any:
            if watch.active:
                watch.started.append(thread_self.name)
            return watch._orig(thread_self, *a, **k)

        threading.Thread.start = start  # type: ignore[method-assign]


class OpTracer(TorchDispatchMode):
    """Records the aten op names (overload packets, e.g. ``mm``) run while active."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Nothing is compiled in the worker; skipping the wrapper avoids importing torch._dynamo
        # (seconds of start-up) on the first traced op.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        try:
            self.ops.add(func.overloadpacket.__name__)
        except Exception:
            self.ops.add(str(func))
        return func(*args, **(kwargs or {}))


def heavy(ops: set[str]) -> set[str]:
    """The heavy ops among ``ops``."""
    return {op for op in ops if op in HEAVY_OPS}


def mutated_inputs(before: list[Any], after: list[Any]) -> list[int]:
    """Positions of tensor inputs whose bits changed (NaN-aware)."""

    return [i for i, (b, a) in enumerate(zip(before, after))
            if isinstance(b, torch.Tensor) and not bitwise_equal(a, b)]


#: At most this many elements at each end of a tensor are shared by the integrity run's inputs
#: with the first run's (:func:`splice_ends`).
SPLICED_ENDS = 4096


def splice_ends(args: list[Any], first: list[Any]) -> int:
    """Copy the first and last elements of each tensor of ``first`` into the tensor of ``args``
    at the same position (same shape, dtype and contiguous): up to :data:`SPLICED_ENDS` at each
    end and never more than an eighth of the tensor, so the two calls differ only inside. A cache
    keyed on the shape, the address or the end elements then returns the first call's result
    for the second (``cached_output``). An integer or boolean tensor is often structure (offsets
    that rise to a packed length, indices that must be distinct) that a kernel may rely on as its
    caller guarantees: it is spliced only where every tensor of the two draws has one shape (so
    that offsets ending at a packed length still end at the length of the data beside them) and
    the result keeps what both draws have (values in non-decreasing order, distinct values), else
    it keeps its own draw. Returns how many tensors were spliced."""
    done = 0
    same_shapes = all(a.shape == f.shape for a, f in zip(args, first)
                      if isinstance(a, torch.Tensor) and isinstance(f, torch.Tensor))
    with torch.no_grad():
        for a, f in zip(args, first):
            if not (isinstance(a, torch.Tensor) and isinstance(f, torch.Tensor)) or a.shape != f.shape \
                    or a.dtype != f.dtype or not (a.is_contiguous() and f.is_contiguous()):
                continue
            k = min(SPLICED_ENDS, a.numel() // 8)
            if k == 0:
                continue
            flat, src = a.view(-1), f.reshape(-1).to(a.device)
            spliced = torch.cat([src[:k], flat[k:-k], src[-k:]])
            if not (a.is_floating_point() or a.is_complex()) and not (
                    same_shapes and _keeps_structure(spliced, flat, src)):
                continue
            flat.copy_(spliced)
            done += 1
    return done


def _keeps_structure(spliced: torch.Tensor, own: torch.Tensor, other: torch.Tensor) -> bool:
    """Whether an integer or boolean tensor made of two draws keeps the order and distinctness
    both draws have (1-D views)."""
    def rising(t: torch.Tensor) -> bool:
        return t.numel() < 2 or bool((t[1:] >= t[:-1]).all())

    def distinct(t: torch.Tensor) -> bool:
        return t.dtype != torch.bool and torch.unique(t).numel() == t.numel()

    if rising(own) and rising(other) and not rising(spliced):
        return False
    return not (distinct(own) and distinct(other) and not distinct(spliced))


def refillable(args: list[Any], other: list[Any]) -> bool:
    """Whether ``args``' tensors can be refilled with ``other``'s values so that the call sees
    exactly ``other``'s inputs (the caching check's third call): every tensor with the same
    shape and dtype, every other argument equal. Inputs whose shapes follow the draw (packed
    variable-length segments: the logits' length is the sum of the lengths drawn) cannot: a
    partial refill would give one draw's offsets with another's data, inputs no caller passes."""
    if len(args) != len(other):
        return False
    for a, o in zip(args, other):
        if isinstance(a, torch.Tensor) or isinstance(o, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(o, torch.Tensor)) or a.shape != o.shape \
                    or a.dtype != o.dtype:
                return False
        elif a is not o:
            try:
                if not bool(a == o):
                    return False
            except Exception:  # noqa: BLE001 - a list of tensors, an object without equality
                return False
    return True


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def aliased_outputs(outputs: list[Any], inputs: list[Any]) -> list[tuple[int, int]]:
    """(output index, input index) pairs whose storages overlap."""
    pairs = []
    for i, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor) or o.numel() == 0:
            continue
        o0, o1 = _span(o)
        for j, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor) or x.numel() == 0 or x.device != o.device:
                continue
            x0, x1 = _span(x)
            if o0 < x1 and x0 < o1:
                pairs.append((i, j))
    return pairs


def subclass_outputs(outputs: list[Any]) -> list[tuple[int, str]]:
    """Outputs that are tensors but not plain ``torch.Tensor``."""
    return [(i, type(o).__name__) for i, o in enumerate(outputs)
            if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor]


def lint_findings(lints: list[dict[str, Any]] | None) -> list[Finding]:
    """Knowledge-base lint findings passed in by the parent (``options.lints``)."""
    out = []
    for item in lints or []:
        if not isinstance(item, dict) or "rule" not in item:
            continue
        rule = str(item["rule"])
        out.append(Finding(rule=rule if rule.startswith("kb:") else f"kb:{rule}",
                           message=str(item.get("message", "")),
                           severity=str(item.get("severity", "warning")),
                           line=item.get("line")))
    return out


class HarnessGuard:
    """Identity snapshot of the verifier's own functions (every callable attribute of the
    loaded ``xeforge_core`` modules, ``Verdict.to_dict``, ``json.dumps``, ``os.replace``), taken
    before any module under test runs; ``check()`` names those that were replaced since and
    puts the originals back. A module that rebinds them is trying to forge its verdict."""

    def __init__(self) -> None:
        import json
        import os
        import sys

        self.snapshot: list[tuple[Any, str, Any]] = []
        for name, mod in list(sys.modules.items()):
            if not name.startswith("xeforge_core") or mod is None:
                continue
            for attr, value in list(vars(mod).items()):
                if callable(value) and not attr.startswith("__"):
                    self.snapshot.append((mod, attr, value))

        self.snapshot += [(Verdict, "to_dict", Verdict.__dict__["to_dict"]), (json, "dumps", json.dumps),
                          (os, "replace", os.replace)]

    def check(self) -> list[Finding]:
        """Findings for replaced verifier functions (originals restored)."""
        findings = []
        for owner, attr, original in self.snapshot:
            current = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
            if current is not original:
                where = getattr(owner, "__name__", str(owner))
                findings.append(Finding("tampers_with_harness", f"{where}.{attr} was replaced at run time; restored"))
                with contextlib.suppress(Exception):
                    setattr(owner, attr, original)
        return findings
