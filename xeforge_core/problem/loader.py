"""Load a kernel problem (kernel module + optional reference + optional spec) and cross-check it.

Everything is read statically (:mod:`.module`, :mod:`.spec`); no model code runs here.

Files found next to ``kernel.py`` when not given:

* spec: ``kernel.yaml`` (or ``kernel.yml``);
* reference: ``kernel_pytorch.py`` or ``kernel_ref.py`` (its own ``Model``). For a file in
  KernelBench's solution convention (it defines ``ModelNew``), its own ``Model`` is the
  reference when it defines one.

Cross-checks (errors are :class:`ProblemError` naming file, line and field; softer findings go
to ``Problem.warnings``):

* the spec's ``inits`` count against the model's ``__init__`` positional parameters;
* each variant's ``params`` count against ``forward()``'s parameters;
* no spec: ``get_inputs()`` must exist (in the kernel or the reference module), and
  ``get_init_inputs()`` too when ``__init__`` needs arguments;
* warnings: a variant dtype that a dtype assertion or a hard-coded kernel dtype rejects
  (e.g. Flash Attention's float32 ``ci`` against its float16-only kernel; when the spec's own
  ``inputs`` section declares a dtype the kernel accepts, the variant's override is dropped and
  it runs with the declared dtypes, and the warning says so); inits whose dim names
  do not match the constructor parameters they land in; no Triton kernel in the kernel module.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from xeforge_core.errors import missing_path_hint, nearest_name_hint
from xeforge_core.worker import formats
from xeforge_core.worker.astutil import parse as parse_python

from .entry import entry_point, kernels_reached, module_bindings, problem_class
from .model import ModuleFile, Problem, ProblemError, Spec, Variant
from .module import DtypeConstraint, ModuleFacts, Signature, read_module
from .scaling import lift_literal_sizes, reduced_module_variant, reduced_spec_variant
from .spec import MAX_SOURCE_BYTES, build_variant, check_text, parse_spec

__all__ = ["load_problem", "problem_from_source", "find_spec", "find_reference", "read_candidate"]


def _read(path: Path, what: str) -> str:
    """Read a text file with the same guards as pasted text (size, UTF-8, not empty)."""
    if not path.exists():
        raise ProblemError(f"{what} file not found{missing_path_hint(path)}", file=path)
    if not path.is_file():
        raise ProblemError(f"{what} path is not a file", file=path)
    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise ProblemError(f"{what} is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes", file=path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProblemError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    return check_text(data, path, what)


def read_candidate(path: str | Path, *, posed: str | None = None) -> str:
    """Read a candidate module from a file with the same guards as a problem's kernel.

    Raises ``ProblemError`` naming ``path`` when the file is missing (with the nearest name
    in its folder), too large, not UTF-8 text (a binary file), empty, a spec (``.yaml``,
    ``.yml``), a file without the ``.py`` suffix that does not parse as Python (a JSON, text or
    CUDA file: not a kernel module at all), or parses but defines neither ``Model`` nor
    ``ModelNew`` (or ``<posed>New``, KernelBook's name for a solution of the problem class
    ``posed``). A syntax error of a ``.py`` file is *not* raised here: it is the candidate's
    fault, so verification turns it into a ``compile_error`` verdict with its line.
    """
    path = Path(path)
    expected = (f"expected a Python module (.py) defining {' or '.join(formats.class_names())} "
                f"(or the function {' or '.join(formats.function_names())})")
    suffix = path.suffix.lower()
    if suffix in formats.spec_suffixes() and path.is_file():
        raise ProblemError(f"the candidate is a spec (a {suffix} file), {expected}; a spec is given with --spec",
                           file=path)
    source = _read(path, "candidate")
    if suffix != ".py":
        kind = f"a {suffix} file" if suffix else "a file without a suffix"
        try:
            parse_python(source)
        except (SyntaxError, ValueError):
            raise ProblemError(f"the candidate is not Python ({kind} that does not parse as Python), {expected}",
                               file=path) from None
        try:
            check_candidate_entry(source, file=path, posed=posed)
        except ProblemError:
            raise ProblemError(f"the candidate is not a kernel module ({kind} that parses as Python but "
                               f"defines none of these), {expected}", file=path) from None
    check_candidate_entry(source, file=path, posed=posed)
    return source


def check_candidate_entry(source: str, *, file: str | Path | None = None, posed: str | None = None) -> None:
    """Raise ``ProblemError`` (naming ``file``) when ``source`` parses but binds neither a
    ``Model`` / ``ModelNew`` class (nor ``<posed>New`` for a problem whose class is ``posed``,
    KernelBook's convention) nor a function entry (``kernel_function``): there is nothing to
    call. Each may be defined, assigned (``kernel_function = triton_kernel_wrapper``,
    ``ModelNew = FusedLinear``) or imported. A module that does not parse passes: its syntax
    error is a ``compile_error`` verdict."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return
    b = module_bindings(tree)  # type: ignore[arg-type]
    classes, functions = formats.class_names(), formats.function_names()
    if posed and posed not in classes:
        classes = (*classes, posed + "New")
    if any(b.class_like(n) for n in classes) or any(b.bound(n) for n in functions):
        return
    found = ", ".join(sorted(b.classes, key=lambda n: b.lines.get(n, 0))) or "none"
    names = sorted(b.bound_names())
    near = next((m for want in (classes[0], *functions) for m in difflib.get_close_matches(want, names, n=1)), None)
    hint = f"; the nearest name it binds is {near!r}" if near else ""
    raise ProblemError(f"the candidate defines no {' or '.join(reversed(classes))} class (classes found: {found}) "
                       f"and no {'(), '.join(functions)}() (KernelAgent's convention; each may be defined, "
                       f"assigned or imported){hint}", file=file)


def find_spec(kernel_path: str | Path) -> Path | None:
    """The sibling spec of ``kernel_path`` (``<stem>.yaml`` / ``<stem>.yml``: the registered
    formats' ``spec_suffixes``), if any."""
    kp = Path(kernel_path)
    for suffix in formats.spec_suffixes():
        cand = kp.with_suffix(suffix)
        if cand.is_file():
            return cand
    return None


def find_reference(kernel_path: str | Path) -> Path | None:
    """The sibling reference of ``kernel_path`` (``<stem>_pytorch.py`` / ``<stem>_ref.py``: the
    registered formats' ``reference_suffixes``)."""
    kp = Path(kernel_path)
    for suffix in formats.reference_suffixes():
        cand = kp.with_name(f"{kp.stem}{suffix}.py")
        if cand.is_file() and cand.resolve() != kp.resolve():
            return cand
    return None


def _function_text(source: str, name: str) -> str | None:
    """The source of the module-level function ``name`` in ``source`` without its docstring and
    comments (``ast.unparse``), ``None`` where there is none or the module does not parse."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            body = node.body[1:] if (node.body and isinstance(node.body[0], ast.Expr)
                                     and isinstance(getattr(node.body[0], "value", None), ast.Constant)) else node.body
            return ast.unparse(ast.Module(body=body, type_ignores=[]))
    return None


def load_problem(kernel_path: str | Path, spec_path: str | Path | None = None,
                 reference_path: str | Path | None = None) -> Problem:
    """Load a kernel problem from files.

    Args:
        kernel_path: the Triton kernel module (``Model``, or ``ModelNew`` in KernelBench's
            solution convention).
        spec_path: an Xe-Forge YAML spec; default: a sibling ``<stem>.yaml`` when present.
        reference_path: a PyTorch reference module with its own ``Model``; default: the
            kernel file's own ``Model`` when the kernel class is ``ModelNew``, else a sibling
            ``<stem>_pytorch.py`` / ``<stem>_ref.py`` when present.

    Returns:
        A :class:`Problem` named after the kernel file's stem, with ``warnings`` from the spec
        and from the cross-checks.

    Raises:
        ProblemError: a missing/unreadable/empty/non-UTF-8/oversized file, a syntax error, no
            ``Model``, a bad spec, or an inconsistency between spec and module (see the module
            docstring); the message names the file, line and field.
    """
    kp = Path(kernel_path)
    if kp.suffix.lower() in formats.spec_suffixes() and kp.is_file():
        raise ProblemError(f"the kernel module is a spec (a {kp.suffix} file), expected the Triton kernel's "
                           "Python module (.py); its spec is found next to it, or given with --spec", file=kp)
    source = _read(kp, "kernel or problem module")
    sp = Path(spec_path) if spec_path is not None else find_spec(kp)
    spec_text = _read(sp, "spec") if sp is not None else None
    rp = Path(reference_path) if reference_path is not None else None
    reference_source = _read(rp, "reference module") if rp is not None else None
    return _build(kp.stem, source, kp, spec_text, sp, reference_source, rp,
                  sibling_reference=find_reference(kp) if rp is None else None)


def problem_from_source(source: str | bytes, *, name: str = "kernel", spec_text: str | bytes | None = None,
                        reference_source: str | bytes | None = None,
                        spec_path: str | Path | None = None) -> Problem:
    """Build a problem from pasted code (the UI). Same checks as :func:`load_problem`; messages
    call the pasted files ``<name>.py``, ``<name>.yaml`` and ``<name>_ref.py``.

    Args:
        source: the kernel module's text.
        name: the problem's name (used for messages and the module file name).
        spec_text: the spec's YAML text, if any.
        reference_source: a PyTorch reference module's text, if any.
        spec_path: read the spec from this file instead when ``spec_text`` is not given.

    Raises:
        ProblemError: as :func:`load_problem`.
    """
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_.\-]{1,100}$", name):
        raise ProblemError(f"problem name {name!r} must be 1-100 letters, digits, '_', '-' or '.'")
    sp = Path(spec_path) if spec_path is not None else None
    if spec_text is None and sp is not None:
        spec_text = _read(sp, "spec")
    return _build(name, source, None, spec_text, sp, reference_source, None, sibling_reference=None)


def _function_entry_problem(name: str, source_text: str, kp: Path | None, entry: str,
                            spec_text: str | bytes | None, sp: Path | None, reference_source: str | bytes | None,
                            rp: Path | None, sibling_reference: Path | None) -> Problem:
    """A problem whose kernel is a KernelAgent-style module (``entry`` is its function, e.g.
    ``kernel_function``): the function is called with the inputs and the reference ``Model``'s
    parameters, so the problem is the reference's (its ``Model``, inputs and size constants)
    with this module as its Triton version. The reference is the one given, else a sibling
    reference file, else the module's own plain-PyTorch ``Model`` (KernelAgent's self-test
    copy of the problem).

    Raises:
        ProblemError: no reference anywhere; or any error of loading the reference.
    """
    label = f"{name}.py"
    if reference_source is None and sibling_reference is not None:
        reference_source, rp = _read(sibling_reference, "reference module"), sibling_reference
    if reference_source is None:
        own = read_module(source_text, kp, label=label, require_model=False)
        if problem_class(source_text) not in own.classes:
            raise ProblemError(
                f"the module's entry is {entry}() (KernelAgent's convention: called with the inputs and the "
                f"reference Model's parameters) and it defines no Model class: give the PyTorch reference module "
                f"whose Model it computes (--reference problem.py, or a sibling {name}_ref.py)", file=kp or label)
        reference_source, rp = source_text, kp
    base = _build(name, reference_source, rp, spec_text, sp, None, None, sibling_reference=None, as_reference=True)
    problem = base.with_kernel_source(source_text, label="baseline")
    problem.kernel.path = kp
    ref_label = rp.name if rp is not None else label
    problem.warnings.append(f"{label}: the kernel is {entry}() (KernelAgent's convention), called with the inputs "
                            f"and the parameters of {ref_label}'s Model, which is the reference")
    return problem


def _build(name: str, source: str | bytes, kp: Path | None, spec_text: str | bytes | None, sp: Path | None,
           reference_source: str | bytes | None, rp: Path | None, *, sibling_reference: Path | None,
           as_reference: bool = False) -> Problem:
    kernel_label = f"{name}.py"
    if not as_reference:
        text = check_text(source, kp or kernel_label, "module")
        kind, entry = entry_point(text)
        if kind == "function":
            return _function_entry_problem(name, text, kp, entry, spec_text, sp, reference_source, rp,
                                           sibling_reference)
    source_text = check_text(source, kp or kernel_label, "module")
    posed = problem_class(source_text)  # Model, or a KernelBook problem's own module (GetMask)
    facts = read_module(source, kp, label=kernel_label, class_name=posed if as_reference else None)
    kernel = ModuleFile(source=source_text, path=kp, class_name=facts.model_class or "Model", label="baseline")
    # A plain-PyTorch Model (KernelBench's or KernelAgent's problem file) is the reference and
    # the eager baseline at once: the candidate is the first Triton version of it. Plain PyTorch
    # means the Model reaches no Triton kernel, whatever else the file defines.
    reached = kernels_reached(source_text, posed) if facts.model_class == posed else None
    eager = facts.model_class == posed and not (reached if reached is not None else facts.kernels) and (
        reference_source is None or check_text(reference_source, rp or f"{name}_ref.py", "reference module")
        == source_text)

    # Reference: explicit > the file's own truth (a KernelBench solution's Model) > the eager
    # Model itself > sibling file.
    fmt = formats.format_for_entry("class", facts.model_class or "")
    own_reference = fmt.reference_class if fmt is not None and fmt.reference_class in facts.classes \
        and fmt.reference_class != facts.model_class else None
    reference: ModuleFile | None = None
    ref_facts: ModuleFacts | None = None
    if reference_source is not None:
        ref_label = rp.name if rp else f"{name}_ref.py"
        ref_text = check_text(reference_source, rp or ref_label, "reference module")
        ref_class = problem_class(ref_text)
        ref_facts = read_module(reference_source, rp, class_name=ref_class, label=ref_label)
        reference = ModuleFile(source=ref_text, path=rp, class_name=ref_class, label="reference")
    elif own_reference is not None:
        ref_facts = read_module(source_text, kp, class_name=own_reference, label=kernel_label)
        reference = ModuleFile(source=source_text, path=kp, class_name=own_reference, label="reference")
    elif eager:
        ref_facts = facts
        reference = ModuleFile(source=source_text, path=kp, class_name=posed, label="reference")
    elif sibling_reference is not None:
        ref_text = _read(sibling_reference, "reference module")
        ref_class = problem_class(ref_text)
        ref_facts = read_module(ref_text, sibling_reference, class_name=ref_class)
        reference = ModuleFile(source=ref_text, path=sibling_reference, class_name=ref_class, label="reference")

    spec: Spec | None = None
    if spec_text is not None:
        spec = parse_spec(spec_text, sp, label=None if sp else f"{name}.yaml")

    # Inputs without a spec: whichever file defines get_inputs(), the problem's own first. A
    # reference given explicitly is the problem (a published solution checked against its
    # problem file): its get_inputs() is the contract, not the solution's copy, which may build
    # other sizes or put them on a device by name.
    inputs: ModuleFile | None = None
    warnings: list[str] = list(spec.warnings) if spec else []
    if reference is not None and reference.class_name != "Model":
        warnings.append(f"{reference.path.name if reference.path else 'the reference'} has no class Model: its one "
                        f"outermost nn.Module, {reference.class_name}, is the problem (KernelBook's convention)"
                        # a misspelt Model (Modle), not a KernelBook name (MyModel, GetMask)
                        + (nearest_name_hint(reference.class_name, ["Model"]) if abs(len(reference.class_name) - 5) <= 1
                           else ""))
    problem_inputs = reference is not None and ref_facts is not None and ref_facts.has_get_inputs
    if spec is None:
        if facts.has_get_inputs and not (problem_inputs and reference_source is not None):
            inputs = ModuleFile(source=lift_literal_sizes(source_text) or source_text, path=kp,
                                class_name=kernel.class_name, label="inputs")
        elif problem_inputs:
            inputs = ModuleFile(source=lift_literal_sizes(reference.source) or reference.source, path=reference.path,
                                class_name=reference.class_name, label="inputs")
            if facts.has_get_inputs and _function_text(source_text, "get_inputs") != _function_text(
                    reference.source, "get_inputs"):
                warnings.append(f"{kernel_label}'s own get_inputs() differs from the problem's "
                                f"({reference.path.name if reference.path else 'the reference'}): the problem's "
                                "builds the inputs, as the problem poses them")

    _cross_check(facts, ref_facts, spec, sp.name if sp else f"{name}.yaml", warnings, eager=eager,
                 kernel_role=not as_reference)
    problem = Problem(name=name, kernel=kernel, reference=reference, spec=spec, warnings=warnings,
                      inputs=inputs, eager_baseline=eager)
    reduced = reduced_module_variant(problem) or reduced_spec_variant(problem)
    if reduced is not None:
        problem.module_variants[reduced.name] = reduced
    return problem


def _cross_check(facts: ModuleFacts, ref_facts: ModuleFacts | None, spec: Spec | None, spec_label: str,
                 warnings: list[str], *, eager: bool = False, kernel_role: bool = True) -> None:
    model = facts.model
    assert model is not None  # read_module raised otherwise
    cls = model.name
    spec_where = spec.path if spec and spec.path else spec_label

    if kernel_role and eager:
        unused = f" (it defines @triton.jit {', '.join(facts.kernel_names)}, which {cls} never reaches)" \
            if facts.kernels else ""
        warnings.append(f"{facts.label}: a plain-PyTorch Model (no @triton.jit kernel){unused}: it is the reference "
                        "and the eager baseline; a candidate is its first Triton version, timed against "
                        "PyTorch eager")
    elif kernel_role and not facts.kernels:  # (the reference of a function entry says nothing of the kernel)
        warnings.append(f"{facts.label}: no @triton.jit kernel is defined in this module, so nothing here "
                        f"runs as a Triton kernel")
    if model.forward is None:
        raise ProblemError(f"class {cls} (line {model.line}) has no forward() method", file=facts.label,
                           line=model.line)

    init = model.init
    init_where = facts.where(init.line if init and not init.implicit else model.line)
    init_desc = f"{cls}.__init__ at {init_where}" if init and not init.implicit else \
        f"{cls} (line {model.line}, nn.Module's __init__)"

    if spec is not None and spec.inits:
        n = len(spec.inits)
        if init is not None and not init.accepts(n):
            names = ", ".join(str(i.value) for i in spec.inits)
            raise ProblemError(
                f"spec {spec_label} gives {n} inits ({names}) but {init_desc} takes {init.takes()} "
                f"positional argument{'s' if init.takes() != '1' else ''}: {init.describe()}",
                file=spec_where, line=spec.line_of("inits"), field="inits")
        if init is not None and not init.implicit:
            _check_init_names(spec, init, cls, init_where, spec_label, warnings)
    elif init is not None and init.required > 0:
        has_init_inputs = facts.has_get_init_inputs or bool(ref_facts and ref_facts.has_get_init_inputs)
        if not has_init_inputs:
            where = "the spec gives no inits" if spec is not None else "there is no spec"
            raise ProblemError(f"{init_desc} needs {init.required} argument(s) ({init.describe()}), but {where} "
                               f"and the module has no get_init_inputs()", file=facts.label, line=init.line)

    if spec is None:
        if not facts.has_get_inputs and not (ref_facts and ref_facts.has_get_inputs):
            near = difflib.get_close_matches("get_inputs", [n for n in facts.functions if n != "get_init_inputs"],
                                             n=1, cutoff=0.7)
            hint = (f"; did you mean {near[0]}() to be get_inputs()?" if near
                    else "; a KernelBench solution (its ModelNew alone) takes its problem as the reference: "
                         "--reference problem.py" if ref_facts is None and model.name == "ModelNew" else "")
            raise ProblemError("no spec was given and the module defines no get_inputs(), so there is no way "
                               f"to build inputs (give a spec, or define get_inputs()){hint}", file=facts.label,
                               line=facts.functions[near[0]] if near else None)
    else:
        fwd = model.forward
        for vname, variant in spec.variants.items():
            n = len(variant.params)
            if not fwd.accepts(n):
                raise ProblemError(
                    f"variant {vname} passes {n} input(s) ({', '.join(variant.params) or 'none'}) but "
                    f"{cls}.forward at {facts.where(fwd.line)} takes {fwd.takes()}: {fwd.describe()}",
                    file=spec_where, line=spec.line_of(f"{vname}[0].params"), field=f"{vname}[0].params")
        _check_dtypes(facts, spec, spec_label, warnings)

    if ref_facts is not None and ref_facts.model is not None and ref_facts.model.forward is not None:
        rf, kf = ref_facts.model.forward, model.forward
        if rf.max_positional is not None and kf.max_positional is not None and \
                (rf.required, rf.max_positional) != (kf.required, kf.max_positional):
            said = (f"{ref_facts.where(rf.line)}: the reference's Model.forward takes {rf.takes()} input(s) "
                    f"({rf.describe()}) but {cls}.forward at {facts.where(kf.line)} takes {kf.takes()} "
                    f"({kf.describe()})")
            if rf.max_positional < kf.required or kf.max_positional < rf.required:
                # no count of inputs suits both: every call of the kernel with the problem's inputs fails
                raise ProblemError(f"{cls}.forward takes {kf.takes()} input(s) ({kf.describe()}) but the "
                                   f"reference's Model.forward at {ref_facts.where(rf.line)} takes {rf.takes()} "
                                   f"({rf.describe()}): the kernel cannot be called with the problem's inputs",
                                   file=facts.label, line=kf.line)
            warnings.append(said)


_TOKEN = re.compile(r"[a-z]+")


def _related(dim: str, param: str) -> bool:
    """Whether a spec dim name plausibly names a constructor parameter (IN_FEAT ~ in_features,
    D ~ D_HEAD, BN_EPS ~ bn_eps), so a positional mismatch can be flagged."""
    a, b = dim.lower().replace("_", ""), param.lower().replace("_", "")
    if not a or not b or a.startswith(b) or b.startswith(a):
        return True
    ta, tb = _TOKEN.findall(dim.lower()), _TOKEN.findall(param.lower())
    return any(len(x) >= 3 and len(y) >= 3 and (x.startswith(y) or y.startswith(x)) for x in ta for y in tb)


def _check_init_names(spec: Spec, init: Signature, cls: str, init_where: str, spec_label: str,
                      warnings: list[str]) -> None:
    odd: list[str] = []
    for i, item in enumerate(spec.inits):
        if i >= len(init.params) or not isinstance(item.value, str):
            continue
        if not any(item.value in v.dims for v in spec.variants.values()):
            continue
        param = init.params[i]
        if len(item.value) < 3 or len(param) < 3:
            continue  # conventional short names (K, N, D) say nothing about the parameter
        if not _related(item.value, param):
            odd.append(f"inits[{i}] ({item.value}) lands in parameter {param!r}")
    if odd:
        warnings.append(f"{spec_label} [inits]: inits are passed to {cls}.__init__ ({init_where}) by position, "
                        f"and the names do not match: {'; '.join(odd)}. Check that the spec fits the "
                        f"constructor ({init.describe()})")


def _check_dtypes(facts: ModuleFacts, spec: Spec, spec_label: str, warnings: list[str]) -> None:
    """Warn when a variant's input dtype is one the module rejects (see module docstring)."""
    model = facts.model
    assert model is not None and model.forward is not None
    fwd_params = list(model.forward.params)
    coerces = [c for c in facts.dtype_constraints if c.kind == "coerces" and c.inputs]
    rules = [c for c in facts.dtype_constraints if c.kind in ("requires", "hardcodes") and c.inputs]

    def converted(rule: DtypeConstraint, origin: str) -> bool:
        return any(origin in c.inputs and set(c.dtypes) & set(rule.dtypes) for c in coerces)

    repaired: dict[str, Variant] = {}
    for vname, variant in spec.variants.items():
        for rule in rules:
            bad: list[str] = []
            got: set[str] = set()
            for origin in rule.inputs:
                if origin not in fwd_params:
                    continue
                idx = fwd_params.index(origin)
                if idx >= len(variant.params):
                    continue
                input_name = variant.params[idx]
                dtype = variant.input_dtypes.get(input_name)
                if dtype and dtype not in rule.dtypes and not converted(rule, origin):
                    bad.append(input_name)
                    got.add(dtype)
            if not bad:
                continue
            bad.sort(key=variant.params.index)
            allowed = " or ".join(rule.dtypes)
            source = f"{vname}[0].dtype" if variant.dtype else "the inputs' dtype"
            gives = f"variant {vname} gives {', '.join(bad)} as {', '.join(sorted(got))} ({spec_label} [{source}])"
            # The variant's dtype override contradicts both the kernel and the spec's own inputs
            # section: two of three agree, so the variant runs with the inputs' declared dtypes.
            declared = {n: spec.inputs[n].dtype for n in bad if n in spec.inputs}
            if variant.dtype and len(declared) == len(bad) and all(d in rule.dtypes for d in declared.values()):
                repaired[vname] = build_variant(
                    vname, params=list(variant.params), dims=dict(variant.dims), inputs=spec.inputs,
                    inits=spec.inits, dtype=None, flop_formula=variant.flop_formula, rtol=variant.rtol,
                    atol=variant.atol)
                consequence = (f"the spec's inputs section declares {', '.join(sorted(set(declared.values())))} "
                               f"({spec_label} [inputs.{bad[0]}.dtype]), so variant {vname} runs with the "
                               f"inputs' declared dtypes instead of its {', '.join(sorted(got))} override")
            elif rule.kind == "hardcodes":
                consequence = "this variant is likely to fail to compile or run"
            else:
                consequence = ""
            it = "them" if len(bad) > 1 else "it"
            if rule.kind == "hardcodes":
                warnings.append(
                    f"{facts.where(rule.line)}: {gives}, but kernel {rule.function} hard-codes {allowed} "
                    f"(`{rule.text}`) and the module never converts {it}: {consequence}")
            else:
                warnings.append(
                    f"{facts.where(rule.line)}: {gives}, but {rule.function} accepts only {allowed} "
                    f"(`{rule.text}`) and the module never converts {it}" + (f": {consequence}" if consequence
                                                                             else ""))
            if vname in repaired:
                break
    spec.variants.update(repaired)
