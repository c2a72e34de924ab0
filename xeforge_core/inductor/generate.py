"""The generation job: compile a plain-PyTorch problem with TorchInductor and capture its output code.

Runs in its own worker process (``python -m xeforge_core.inductor.generate JOB_DIR``, started
by :func:`xeforge_core.inductor.capture.capture` through the sandboxed runner), never in the
caller: it imports and traces the problem module, which is untrusted code.

The job (``JOB_DIR/job.json``): ``source`` (the problem module's text), ``filename``,
``device`` (``cpu``, ``cuda`` or ``xpu``), ``overrides`` (module-level size constants to set
before ``get_inputs()`` / ``get_init_inputs()``, e.g. the reduced sizes the verifier checks
at), ``seed``, ``target`` (``[backend, arch, warp_size]`` of the stand-in driver on cpu).

What it does: builds ``Model(*get_init_inputs())`` and the inputs on the device, and calls
``torch.compile(model, backend=<recording backend>, dynamic=True, fullgraph=True)`` under
``torch.no_grad()`` with the model in the mode the problem leaves it in (the mode the verifier
runs it in). Parameter shapes are made dynamic too, so the code holds for every size of the
problem. Traced at reduced sizes (``overrides``), the inputs carry the published sizes as the
hints Inductor's heuristics read (:func:`_hint_published_sizes`); a trace they break runs again
without them. The recording backend notes what each graph input is (a parameter or buffer of the
model, a forward input, or a size of one of them) and hands the graph to Inductor; Inductor's
output code is taken from ``GraphLowering.save_output_code`` before Inductor loads it, and the
compile is stopped there. On cpu, Inductor generates Triton code (``cpu_backend = "triton"``)
for the stand-in driver's GPU target (:mod:`xeforge_core.inductor.driver`); on cuda/xpu the
real driver is used.

The result (``JOB_DIR/result.json``): ``ok``; on success ``output_code`` (Inductor's module
text, verbatim), ``graph_inputs`` (in the order of ``call(args)``: ``{"kind": "parameter" |
"buffer" | "input" | "size", "expr": "self.lin.weight" | "x" | "x.size(0)", "shape", "dtype"}``),
``outputs`` (``{"structure": "tensor" | "tuple" | "list", "count": n}``), ``forward_params``,
``device``, ``generated_for``, ``size_hints`` (the published sizes given as hints) and
``size_hints_note`` (why none were, where the trace was at reduced sizes), ``torch`` and
``triton`` versions; on failure ``stage``
(``load``, ``inputs``, ``forward``, ``trace``, ``generate``) and ``error``.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

from xeforge_core.errors import XeForgeError

RESULT_FILE = "result.json"
JOB_FILE = "job.json"

#: The job's steps in order, with what each does (a failure's ``stage`` is one of them).
STEPS: dict[str, str] = {
    "load": "importing the problem",
    "inputs": "building the model and its inputs",
    "forward": "running the model's forward on its inputs",
    "trace": "tracing the model (torch.compile, one graph)",
    "generate": "TorchInductor's code generation",
}

#: The prefix of the line the job writes to stderr as each step begins: a job stopped from
#: outside (its time limit, a crash in a compiler) writes no result, and its last such line says
#: which step it was in (:func:`last_step`).
STEP_MARK = "xeforge-inductor-step: "


def _begin(step: str) -> None:
    print(f"{STEP_MARK}{step}", file=sys.stderr, flush=True)


def last_step(stderr: str) -> str | None:
    """The step (a key of :data:`STEPS`) a generation job was in when it stopped, from its
    ``stderr``; ``None`` where it wrote no step line."""
    steps = [line[len(STEP_MARK):].strip() for line in stderr.splitlines() if line.startswith(STEP_MARK)]
    return steps[-1] if steps and steps[-1] in STEPS else None


class _Captured(XeForgeError):
    """Raised from the output-code hook: the code is taken, Inductor need not load it."""


def _origin(exc: BaseException, filename: str | None = None) -> str:
    """Where the innermost exception of ``exc``'s cause chain was raised, as
    ``path:line in function: `code` `` (path from ``site-packages`` on); empty if unknown. An
    Inductor failure is often an ``AssertionError`` with no message, wrapped in an
    ``InductorError``: the line of the assertion is then the only thing that says what failed.
    A frame in the problem module's copy in the job folder is named by the problem's
    ``filename``, the file the user knows."""
    inner, seen = exc, set()
    while id(inner) not in seen:
        seen.add(id(inner))
        nxt = inner.__cause__ or inner.__context__
        if nxt is None:
            break
        inner = nxt
    frames = traceback.extract_tb(inner.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    path = f.filename.split("site-packages/", 1)[-1]
    if filename and Path(path).name == Path(filename).name and "site-packages/" not in f.filename:
        path = filename
    return f"{path}:{f.lineno} in {f.name}: `{(f.line or '').strip()}`"


def _fail(stage: str, exc: BaseException | str, job: dict[str, Any] | None = None) -> dict[str, Any]:
    if isinstance(exc, BaseException):
        text = f"{type(exc).__name__}: {exc}"
        origin = _origin(exc, (job or {}).get("filename"))
        if origin:
            text = f"{text.rstrip()} (raised at {origin})"
        return {"ok": False, "stage": stage, "error": text[:4000], "traceback": traceback.format_exc()[-6000:]}
    return {"ok": False, "stage": stage, "error": exc}


def _get_inputs_at(module: Any, job: dict[str, Any]) -> str:
    """``problem.py:LINE`` of the problem's ``get_inputs`` (the file name alone where its source
    cannot be read), for a bad-input message."""
    name = Path(job.get("filename") or "problem.py").name
    try:
        return f"{name}:{inspect.getsourcelines(module.get_inputs)[1]}"
    except (OSError, TypeError):
        return name


def _load_problem(job_dir: Path, job: dict[str, Any]) -> Any:
    name = Path(job.get("filename") or "problem.py").name
    path = job_dir / "src" / (name if name.endswith(".py") else name + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job["source"], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("xeforge_inductor_problem", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _name(source: Any) -> str:
    """A dynamo source's name (a property in recent torch, a method before)."""
    name = source.name
    return name() if callable(name) else str(name)


def _source_expr(source: Any, tensors: dict[str, str], forward_params: list[str]) -> str | None:
    """A Python expression (in ``forward``'s scope) for a dynamo input source: a forward
    parameter, an item of ``*args``, or a size/stride of a tensor bound in ``tensors``."""
    from torch._dynamo.source import GetItemSource, LocalSource, TensorProperty, TensorPropertySource

    if isinstance(source, TensorPropertySource):
        base = tensors.get(_name(source.base)) or _source_expr(source.base, tensors, forward_params)
        if base is None:
            return None
        if source.prop is TensorProperty.SIZE:
            return f"{base}.size({source.idx})"
        if source.prop is TensorProperty.STRIDE:
            return f"{base}.stride({source.idx})"
        return f"{base}.storage_offset()"
    if isinstance(source, LocalSource):
        return source.local_name if source.local_name in forward_params else None
    if isinstance(source, GetItemSource) and isinstance(source.index, int):
        base = _source_expr(source.base, tensors, forward_params)
        return f"{base}[{source.index}]" if base is not None else None
    return _module_attribute(_name(source))


_SELF = re.compile(r"""^L\[['"]self['"]\]""")
_SUBMODULE = re.compile(r"""\._modules\[['"]([A-Za-z_][A-Za-z0-9_]*)['"]\]""")


def _module_attribute(name: str) -> str | None:
    """``self.conv.groups`` for dynamo's ``L['self']._modules['conv'].groups``: an int attribute
    of the model or of a submodule (``allow_unspec_int_on_nn_module``), read where ``ModelNew``
    (the same ``__init__``) holds it; ``None`` for anything else."""
    if not _SELF.match(name):
        return None
    expr = _SUBMODULE.sub(r".\1", _SELF.sub("self", name))
    return expr if re.fullmatch(r"self(\.[A-Za-z_][A-Za-z0-9_]*)+", expr) else None


def _bindings(gm: Any, example_inputs: list[Any], model: Any, inputs: list[Any],
              forward_params: list[str]) -> list[dict[str, Any]]:
    """What each graph input of ``gm`` is, as an expression in ``ModelNew.forward``."""
    import torch

    owned: dict[int, tuple[str, str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        owned.setdefault(id(p), ("parameter", f"self.{name}"))
    for name, b in model.named_buffers(remove_duplicate=False):
        owned.setdefault(id(b), ("buffer", f"self.{name}"))
    by_input = {id(t): forward_params[i] if i < len(forward_params) else f"args[{i}]"
                for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensors: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    pending: list[tuple[int, Any]] = []
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        grapharg = node.meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        real = getattr(grapharg, "example", None)
        real = real if real is not None else value
        entry: dict[str, Any] = {"name": node.name, "source": _name(source) if source is not None else ""}
        if isinstance(real, torch.Tensor):
            kind, expr = owned.get(id(real), (None, None))
            if kind is None and id(real) in by_input:
                kind, expr = "input", by_input[id(real)]
            if kind is None:
                raise RuntimeError(f"graph input {node.name} ({entry['source'] or 'no source'}) is a tensor that is "
                                   "neither a parameter or buffer of the model nor a forward input (a tensor "
                                   "attribute or a global); keep such tensors as registered buffers")
            entry.update(kind=kind, expr=expr, shape=list(real.shape), dtype=str(real.dtype).replace("torch.", ""))
            if source is not None:
                tensors[_name(source)] = expr
        else:
            pending.append((i, source))
        out.append(entry)
    for i, source in pending:
        expr = _source_expr(source, tensors, forward_params) if source is not None else None
        if expr is None:
            raise RuntimeError(f"graph input {out[i]['name']} ({out[i]['source'] or 'no source'}) is a "
                               "non-tensor value that is not a size of an input or parameter")
        out[i].update(kind="size" if "." in expr else "input", expr=expr, shape=None, dtype="int")
    return out


#: ATen ops whose Inductor lowering turns sizes into integers (``guard_int_seq`` on the weight's
#: shape in ``torch/_inductor/kernel/conv.py``): the code would then hold only at the traced
#: channel counts and kernel size. They run as library calls (Inductor's fallback kernel, whose
#: output sizes stay symbolic), which is what the lowering chooses for them on most shapes anyway.
SIZE_GUARDING_OPS = ("convolution",)


def _fall_back_on_size_guards() -> None:
    """Replace Inductor's lowerings of :data:`SIZE_GUARDING_OPS` by fallback kernels (this
    process only)."""
    import torch
    from torch._inductor import lowering

    for name in SIZE_GUARDING_OPS:
        packet = getattr(torch.ops.aten, name)
        for overload in [packet, *(getattr(packet, o) for o in packet.overloads())]:
            if overload in lowering.lowerings:
                lowering.lowerings[overload] = lowering.fallback_handler(packet.default, add_to_fallback_set=False)


_MODULE_KEY = re.compile(r"\._modules\[['\"](\w+)['\"]\]")


def _constant_guards(model: Any) -> dict[str, float | int]:
    """``{"self.divisor": 2.0}``: the model's numeric attributes Dynamo has guarded as constants
    so far in this trace (``CONSTANT_MATCH`` / ``EQUALS_MATCH`` on ``L['self']...``, read from the
    tracing context while the backend runs; booleans left out), with their values on ``model``.
    ``specialize_float`` makes a float the constructor takes a constant of the kernels; the first
    version checks it in ``forward``."""
    import torch

    ctx = torch._guards.TracingContext.try_get()
    guards = getattr(getattr(ctx, "guards_context", None), "dynamo_guards", None) or []
    out: dict[str, float | int] = {}
    for g in guards:
        kind = g.create_fn_name() if hasattr(g, "create_fn_name") else ""
        name = _MODULE_KEY.sub(r".\1", str(getattr(g, "name", ""))).replace("L['self']", "self", 1)
        if kind not in ("CONSTANT_MATCH", "EQUALS_MATCH") or not re.fullmatch(r"self(\.[A-Za-z_]\w*)+", name):
            continue
        value: Any = model
        for attr in name.split(".")[1:]:
            value = getattr(value, attr, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
    return out


def _index_in_64_bits() -> None:
    """Make every generated kernel index in int64 (this process only).

    Inductor indexes in int32 when the traced sizes fit and installs a guard (``numel <= 2**31 - 1``)
    that recompiles past it; the first version keeps no guards, so its kernels must be right at
    every size: KernelBench level 2 problem 50's first version, traced small, hit an illegal memory
    access at a bench size of more than 2**31 elements on the H200 (2026-12-04). Inductor's own
    comment on the choice: "there is no correctness issue with using 64-bit for everything"
    (``torch/_inductor/codegen/simd.py``, ``can_use_32bit_indexing``)."""
    from torch._inductor.codegen import simd

    scheduling = getattr(simd, "SIMDScheduling", None)
    if scheduling is not None and hasattr(scheduling, "can_use_32bit_indexing"):
        scheduling.can_use_32bit_indexing = staticmethod(lambda numel, buffers: False)


def _published_shapes(module: Any) -> tuple[list[tuple[int, ...] | None] | None, str]:
    """The shapes of ``get_inputs()`` at the problem's published sizes (its own constants), made on
    the meta device (nothing allocated), and ``""``; ``(None, why)`` where they cannot be had that
    way (a ``get_inputs()`` that builds its tensors from numpy or Python data)."""
    import torch

    try:
        with torch.device("meta"):
            published = list(module.get_inputs())
    except Exception as exc:  # noqa: BLE001 - a get_inputs() that needs real data: no hints, said
        return None, (f"Inductor's heuristics (split reductions, block sizes) read the traced sizes, not the "
                      f"published ones: get_inputs() does not run on the meta device ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:160] if str(exc) else ''}); build its tensors with torch "
                      "factories (torch.randn, torch.rand) for kernels sized for the published inputs")
    return [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in published], ""


def _hint_published_sizes(inputs: list[Any], published: list[tuple[int, ...] | None] | None) -> dict[str, int]:
    """Give Inductor's heuristics the published sizes as the hints of the traced (smaller) ones:
    a split reduction's number of partial sums, a reduction's persistent or looped form and its
    block sizes are chosen from a size's hint, which is otherwise the traced value, so a trace at
    the verifier's reduced size wrote kernels for that size (KernelBench level 1's whole-tensor
    losses kept 8 partial sums for a billion elements: docs/measured/h200-inductor-kb-first).
    Every size stays a symbol. Set as ``torch._dynamo.mark_dynamic(..., hint_override=)`` sets it
    (the tensor's ``_dynamo_hint_overrides``, read when Dynamo makes its fake tensor: PyTorch pull
    request 161879) without mark_dynamic's constraint, which fails the trace where Dynamo
    specializes a size; only dims of at least 2 at both sizes (0 and 1 are specialized). Returns
    ``{"input i dim d": published size}`` of the hints set."""
    import torch

    hinted: dict[str, int] = {}
    if not published or len(published) != len(inputs):
        return hinted
    for i, (t, shape) in enumerate(zip(inputs, published)):
        if not isinstance(t, torch.Tensor) or shape is None or len(shape) != t.dim():
            continue
        over = {d: int(n) for d, n in enumerate(shape) if n != t.shape[d] and n >= 2 and t.shape[d] >= 2}
        if over:
            t._dynamo_hint_overrides = {**getattr(t, "_dynamo_hint_overrides", {}), **over}
            hinted.update({f"input {i} dim {d}": n for d, n in over.items()})
    return hinted


def _graph_input_dims(gm: Any, bindings: list[dict[str, Any]]) -> Any:
    """``(binding, dim, size, expr)`` for every dimension of every tensor graph input, ``expr``
    the size's symbolic expression (``None`` for a plain integer), read from the placeholders'
    fake values."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, entry in zip(placeholders, bindings):
        value = node.meta.get("example_value")
        if entry.get("shape") is None or value is None or not hasattr(value, "shape"):
            continue
        for dim, size in enumerate(value.shape):
            yield entry, dim, size, getattr(getattr(size, "node", None), "expr", None)


def _symbolic_sizes(gm: Any, bindings: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Any]]:
    """``(binding, size expression)`` for every dimension of every tensor graph input whose
    traced size is symbolic."""
    return [({"expr": f"{entry['expr']}.size({dim})", "traced": int(entry["shape"][dim])}, expr)
            for entry, dim, _size, expr in _graph_input_dims(gm, bindings)
            if expr is not None and getattr(expr, "free_symbols", None)]


def _static_sizes(gm: Any, bindings: list[dict[str, Any]]) -> dict[str, int]:
    """``{"x.size(2)": 2048}`` for every dimension of a tensor graph input that tracing kept a
    plain integer although every size was asked to be dynamic: dynamo fixed it (a tuple attribute
    such as LayerNorm's ``normalized_shape`` compared with the input's trailing sizes, a pooling
    window whose output length it guarded, or a size of 0 or 1), so the generated code holds only
    at that size (KernelBench level 1 problems 40 and 41 gave wrong shapes at every other size).
    Such a size is an ``int`` or a SymInt whose expression dynamo replaced by a number."""
    return {f"{entry['expr']}.size({dim})": int(size) for entry, dim, size, expr in _graph_input_dims(gm, bindings)
            if isinstance(size, int) or (expr is not None and not getattr(expr, "free_symbols", True))}


def _shape_env() -> Any:
    """The shape environment of the graph being compiled (``None`` outside a compile)."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    return getattr(getattr(ctx, "fake_mode", None), "shape_env", None) if ctx is not None else None


def _specialised(sized: list[tuple[dict[str, Any], Any]], shape_env: Any) -> dict[str, int]:
    """The sizes code generation fixed to their traced value (a lowering guarded the symbol to
    an integer: the shape environment replaced it by a number), as ``{"x.size(1)": 8}``."""
    if not sized or shape_env is None:
        return {}
    out: dict[str, int] = {}
    for entry, expr in sized:
        now = shape_env.replace(expr)
        if not now.free_symbols:
            out[entry["expr"]] = int(now)
    return out


def _output_structure(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {"structure": "tensor", "count": 1}
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return {"structure": type(value).__name__, "count": len(value)}
    raise RuntimeError(f"forward() returns {type(value).__name__}; only a tensor or a tuple/list of tensors "
                       "can be converted")


def run(job: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    """Run the generation job (see the module docstring); never raises."""
    os.environ.pop("TRITON_INTERPRET", None)  # the interpreter would replace the kernels Inductor writes
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(job_dir / "inductor-cache"))
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    device = str(job.get("device") or "cpu")
    _begin("load")
    try:
        import torch
        import triton

        module = _load_problem(job_dir, job)
    except BaseException as exc:
        return _fail("load", exc, job)
    _begin("inputs")
    try:
        from xeforge_core.worker.inputs import inputs_list_problem, module_overrides, seed_all

        with module_overrides(module, job.get("overrides") or {}):
            seed_all(0)  # as the verifier's workers do (worker.inputs.init_values), then the inputs' seed
            init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
            seed_all(int(job.get("seed", 0)))
            raw_inputs = module.get_inputs()
        wrong = inputs_list_problem(raw_inputs)
        if wrong:
            return _fail("inputs", f"{_get_inputs_at(module, job)}: get_inputs() {wrong}", job)
        raw_inputs = list(raw_inputs)
        published, hints_note = _published_shapes(module) if job.get("overrides") else (None, "")
        from xeforge_core.problem.entry import problem_class
        from xeforge_core.worker.formats.base import constructor_values

        cls = getattr(module, problem_class(job["source"]))  # Model, or a KernelBook problem's module
        model = cls(*constructor_values(cls, init)).to(device)
        inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in raw_inputs]
        hinted = _hint_published_sizes(inputs, published)
        positional = [(p, v) for p, v in inspect.signature(model.forward).parameters.items()
                      if v.kind in (v.POSITIONAL_ONLY, v.POSITIONAL_OR_KEYWORD)]
        forward_params = [p for p, _ in positional]
        required = [p for p, v in positional if v.default is v.empty]
        if len(raw_inputs) < len(required):
            return _fail("inputs", f"{_get_inputs_at(module, job)}: get_inputs() returned {len(raw_inputs)} input(s); "
                                   f"{cls.__name__}.forward requires {len(required)} ({', '.join(required)})", job)
    except BaseException as exc:
        return _fail("inputs", exc, job)
    _begin("forward")
    try:
        with torch.no_grad():
            structure = _output_structure(model(*inputs))
    except BaseException as exc:
        return _fail("forward", exc, job)

    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config
    import torch.fx.experimental._config as fx_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering

    generated_for = device
    if device == "cpu":
        from xeforge_core.inductor.driver import install

        target = tuple(job.get("target") or ("cuda", 90, 32))
        install(target)  # type: ignore[arg-type]
        inductor_config.cpu_backend = "triton"
        generated_for = f"{target[0]} (arch {target[1]}, warp {target[2]}; generated without the device)"
    # every size is a symbol (parameters' too, and two sizes equal at the traced shape stay two
    # symbols), so the code holds for every size of the problem, not only the traced one
    dynamo_config.force_parameter_static_shapes = False
    dynamo_config.force_nn_module_property_static_shapes = False
    fx_config.use_duck_shape = False
    # a module's int attributes (InstanceNorm's num_features, compared with its input's channel
    # count) are symbols too: a constant there would fix that size at the traced value
    dynamo_config.allow_unspec_int_on_nn_module = True
    # a warning or print in forward (InstanceNorm warns when its num_features differs from the
    # input's channels) is no part of the computation: Dynamo moves it after the graph instead
    # of breaking the one graph there
    dynamo_config.reorderable_logging_functions.update({warnings.warn, print})
    # floats (a module's momentum or scale) are constants of the code, not graph inputs
    dynamo_config.specialize_float = True
    inductor_config.fx_graph_cache = False
    # no channels-last copies of inputs and weights around convolutions: plain layouts, no
    # layout kernels that fix the channel counts
    inductor_config.layout_optimization = False
    # Inductor's coalescing tiling analysis "does not yet apply to dynamic shapes" (its config's
    # own comment), and every size here is dynamic: on torch 2.11 it asserted in
    # tiling_utils.get_pw_red_splits on KernelBench level 2 problem 25 (conv, min over channels)
    inductor_config.triton.coalesce_tiling_analysis = False
    _fall_back_on_size_guards()
    _index_in_64_bits()
    graphs: list[list[dict[str, Any]]] = []
    codes: list[str] = []

    sized: list[tuple[dict[str, Any], Any]] = []
    static: dict[str, int] = {}
    envs: list[Any] = []
    constants: dict[str, Any] = {}

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        graphs.append(_bindings(gm, example_inputs, model, inputs, forward_params))
        sized.extend(_symbolic_sizes(gm, graphs[-1]))
        static.update(_static_sizes(gm, graphs[-1]))
        envs.append(_shape_env())
        constants.update(_constant_guards(model))
        _begin("generate")
        return compile_fx(gm, example_inputs)

    def save(code: str) -> None:
        codes.append(code)
        raise _Captured()

    def trace() -> BaseException | None:
        _begin("trace")
        torch._dynamo.reset()
        try:
            with torch.no_grad():
                torch.compile(model, backend=backend, dynamic=True, fullgraph=True)(*inputs)
        except BaseException as exc:  # noqa: BLE001 - _Captured ends every successful trace
            return None if codes else exc
        return None

    saved_hook = GraphLowering.save_output_code
    GraphLowering.save_output_code = save  # type: ignore[assignment]
    try:
        failure = trace()
        if failure is not None and hinted:
            # the published sizes as hints can break a trace that compares a size with a module's
            # constant (LayerNorm's normalized_shape at the traced size): trace without them
            for t in inputs:
                if isinstance(t, torch.Tensor) and hasattr(t, "_dynamo_hint_overrides"):
                    del t._dynamo_hint_overrides
            hinted = {}
            hints_note = ("Inductor's heuristics read the traced sizes: the trace failed with the published "
                          "sizes as hints and was run again without them")
            for found in (graphs, codes, sized, envs):
                found.clear()
            static.clear()
            constants.clear()   # the retried trace's own guards, not the failed one's
            failure = trace()
    finally:
        GraphLowering.save_output_code = saved_hook  # type: ignore[assignment]
    if failure is not None:
        return _fail("trace" if not graphs else "generate", failure, job)
    if len(codes) != 1 or len(graphs) != 1:
        return _fail("generate", f"TorchInductor produced {len(codes)} output module(s) for {len(graphs)} "
                                 "graph(s); exactly one of each is expected")
    return {"ok": True, "output_code": codes[0], "graph_inputs": graphs[0], "outputs": structure,
            "specialised": {**static, **_specialised(sized, envs[0] if envs else None)},
            "forward_params": forward_params, "device": device, "generated_for": generated_for,
            "size_hints": hinted, "size_hints_note": hints_note, "constants": constants,
            "torch": torch.__version__, "triton": triton.__version__}


def main(argv: list[str] | None = None) -> int:
    """``python -m xeforge_core.inductor.generate JOB_DIR``: run the job, write ``result.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m xeforge_core.inductor.generate JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(args[0])
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    result = run(job, job_dir)
    tmp = job_dir / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, job_dir / RESULT_FILE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
