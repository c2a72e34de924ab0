"""Portability codemod: make a module that hard-codes one GPU run on whatever device is present.

Xe-Forge kernels are written for Intel GPUs and say so everywhere: ``device="xpu"``,
``x.to("xpu")``, ``torch.device("xpu")``, ``x.device.type != "xpu"``, ``Y.xpu()``,
``torch.xpu.synchronize()``, ``assert torch.xpu.is_available()`` and ``if not
torch.xpu.is_available(): raise ...`` (or a PyTorch fallback branch). Such a module cannot run
on an NVIDIA GPU nor in Triton's CPU interpreter. This codemod rewrites every one of those
into device-agnostic code (the same is done for ``"cuda"``):

* a device string becomes ``_xf_device(t)``: ``t``'s device when ``t`` (the function's input
  tensor, where one is evident) already lives on an accelerator, else the accelerator present
  (``torch.accelerator``), else the CPU (also when ``TRITON_INTERPRET=1``); comparisons with
  ``device.type`` compare against ``_xf_device().type``;
* ``torch.xpu.synchronize()`` / ``torch.cuda.synchronize()`` become ``_xf_synchronize()``,
  which synchronises the accelerator in use and does nothing on the CPU;
* availability checks are true by construction (the module runs where its tensors are), so
  ``assert``s of them are dropped, ``if not available: ...`` branches (raises or PyTorch
  fallbacks) are removed and ``if available: A else: B`` keeps ``A``;
* ``.xpu()`` / ``.cuda()`` become ``.to(_xf_device(t))``; ``x.is_xpu`` / ``x.is_cuda`` become
  ``(x.device.type == _xf_device(x).type)``: is ``x`` on the device the module runs on;
* Intel-only compile options (``grf_mode``) given at a launch (``kernel[grid](..., grf_mode="256")``)
  or in a ``triton.Config`` kwargs dict become ``**_xf_compile_options(grf_mode="256")``, which
  passes them on xpu and drops them elsewhere: CUDA's Triton rejects an
  unknown launch option (``KeyError: 'Keyword argument grf_mode was specified but
  unrecognised'``, seen on the H200 with kernels 1, 39 and 55 of the Xe-Forge cases); Triton's
  interpreter ignores them;
* an autotuned kernel whose launch grid fixes the tile sizes (``triton.cdiv(M, 128)`` while the
  configs range over 64 and 128) gets a grid that reads them from the chosen config
  (:mod:`xeforge_core.codemods.autotune_grid`): the autotuner picks a different config on each
  device, so such a kernel is correct on one GPU and leaves output unwritten on another.

The two helpers are added once, after the imports. They need ``torch.accelerator``
(PyTorch >= 2.6); with an older PyTorch they fall back to the CPU. Calls with no device-agnostic
equivalent (``torch.xpu.get_device_capability`` and similar) are left alone and listed.
Kernels (``@triton.jit`` bodies) are never touched.
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from xeforge_core.codemods.autotune_grid import grid_follows_autotune, kernels_with_fixed_grids
from xeforge_core.codemods.common import (
    CodemodResult,
    dotted_name,
    ensure_nonempty_blocks,
    is_kernel,
    keyword_arg,
    not_applicable,
    parse_module,
    still_parses,
    string_value,
)
from xeforge_core.codemods.registry import CodemodSettings, register

NAME = "portability"

DEVICE_HELPER_NAME = "_xf_device"
SYNC_HELPER_NAME = "_xf_synchronize"
OPTIONS_HELPER_NAME = "_xf_compile_options"
HELPER_NAMES = {DEVICE_HELPER_NAME, SYNC_HELPER_NAME, OPTIONS_HELPER_NAME}

#: Compile options only Intel's Triton backend understands (passed at launch or in a Config).
#: Source: Intel XPU backend for Triton (``grf_mode`` is an XPU compile option).
XPU_ONLY_OPTIONS = ("grf_mode",)

_DEVICE_STRING = re.compile(r"^(xpu|cuda)(:\d+)?$")
_VENDORS = ("xpu", "cuda")

HELPERS_SOURCE = '''

def _xf_device(like=None) -> torch.device:
    """The device this module's kernels run on: ``like``'s device when it is a tensor on an
    accelerator, else the accelerator present, else the CPU (Triton's interpreter)."""
    if isinstance(like, torch.Tensor) and like.device.type != "cpu":
        return like.device
    import os

    accelerator = getattr(torch, "accelerator", None)
    if os.environ.get("TRITON_INTERPRET") == "1" or accelerator is None or not accelerator.is_available():
        return torch.device("cpu")
    return accelerator.current_accelerator()


def _xf_synchronize() -> None:
    """Wait for the work queued on the accelerator in use (nothing to wait for on the CPU)."""
    if _xf_device().type != "cpu":
        torch.accelerator.synchronize()
'''

OPTIONS_HELPER_SOURCE = '''

def _xf_compile_options(**options):
    """Intel-only Triton compile options (e.g. grf_mode): passed on xpu, dropped elsewhere."""
    return options if _xf_device().type == "xpu" else {}
'''


def _is_device_string(node: cst.BaseExpression | None) -> bool:
    value = string_value(node)
    return value is not None and bool(_DEVICE_STRING.match(value))


def _availability(node: cst.BaseExpression) -> bool | None:
    """Truth value of an expression made only of availability checks (already rewritten to
    ``True``) combined with ``not``/``and``/``or``; ``None`` when anything else is in it."""
    if isinstance(node, cst.Name) and node.value in {"True", "False"}:
        return node.value == "True"
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        inner = _availability(node.expression)
        return None if inner is None else not inner
    if isinstance(node, cst.BooleanOperation):
        left, right = _availability(node.left), _availability(node.right)
        if left is None or right is None:
            return None
        return (left and right) if isinstance(node.operator, cst.And) else (left or right)
    return None


def _ref_param(fn: cst.FunctionDef) -> str | None:
    """The function's input tensor, where one is evident: the first parameter annotated as a
    tensor; for ``forward(self, x, ...)`` the first one after ``self``; else the first whose
    name says it is an input (``x``, ``input...``, ``...tensor...``, ``q``)."""
    params = list(fn.params.params)
    for p in params:
        if p.annotation is not None and dotted_name(p.annotation.annotation).endswith("Tensor"):
            return p.name.value
    names = [p.name.value for p in params]
    if fn.name.value == "forward" and len(names) >= 2 and names[0] == "self":
        return names[1]
    for n in names:
        if n == "x" or n == "q" or n.startswith("input") or "tensor" in n:
            return n
    return None


class _Port(cst.CSTTransformer):
    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []
        self.left_alone: list[str] = []
        self.need_device = False
        self.need_sync = False
        self.need_options = False
        self._decorator_depth = 0
        self._fn_stack: list[str | None] = []
        self._kernel_depth = 0
        self._helper_depth = 0
        self.counts: dict[str, int] = {}

    # -- context ---------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if is_kernel(node):
            self._kernel_depth += 1
        if node.name.value in HELPER_NAMES:
            self._helper_depth += 1
        self._fn_stack.append(_ref_param(node))
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if is_kernel(original):
            self._kernel_depth -= 1
        if original.name.value in HELPER_NAMES:
            self._helper_depth -= 1
        self._fn_stack.pop()
        return updated

    @property
    def _active(self) -> bool:
        return self._kernel_depth == 0 and self._helper_depth == 0

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _device_call(self, with_ref: bool = True) -> cst.Call:
        self.need_device = True
        ref = self._fn_stack[-1] if (with_ref and self._fn_stack) else None
        args = [cst.Arg(cst.Name(ref))] if ref else []
        return cst.Call(func=cst.Name(DEVICE_HELPER_NAME), args=args)

    def _options_call(self, name: str, value: cst.BaseExpression) -> cst.Call:
        self.need_options = True
        self.need_device = True
        self._count(f"Intel-only compile option {name}")
        return cst.Call(func=cst.Name(OPTIONS_HELPER_NAME), args=[keyword_arg(name, value)])

    def visit_Decorator(self, node: cst.Decorator) -> bool:
        self._decorator_depth += 1
        return True

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        self._decorator_depth -= 1
        return updated

    def leave_Dict(self, original: cst.Dict, updated: cst.Dict) -> cst.Dict:
        # Configs often sit in a kernel's own @triton.autotune decorator: rewrite them there too.
        if self._helper_depth or (self._kernel_depth and not self._decorator_depth):
            return updated
        elements = []
        for el in updated.elements:
            key = string_value(el.key) if isinstance(el, cst.DictElement) else None
            if key in XPU_ONLY_OPTIONS:
                elements.append(cst.StarredDictElement(value=self._options_call(key, el.value),
                                                       comma=el.comma))
            else:
                elements.append(el)
        return updated.with_changes(elements=elements)

    def _device_type(self) -> cst.Attribute:
        return cst.Attribute(value=self._device_call(with_ref=False), attr=cst.Name("type"))

    # -- expressions -------------------------------------------------------------------------
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not self._active:
            return updated
        name = dotted_name(updated.func)
        if (name == "hasattr" and len(updated.args) == 2 and dotted_name(updated.args[0].value) == "torch"
                and string_value(updated.args[1].value) in _VENDORS):
            self._count("hasattr(torch, <device>) check (now True)")
            return cst.Name("True")
        if name in {f"torch.{v}.is_available" for v in _VENDORS}:
            self._count(f"{name}() check (now True)")
            return cst.Name("True")
        if name in {f"torch.{v}.synchronize" for v in _VENDORS}:
            self._count(f"{name}()")
            self.need_sync = True
            return cst.Call(func=cst.Name(SYNC_HELPER_NAME), args=[])
        if name == "torch.device" and updated.args and _is_device_string(updated.args[0].value):
            self._count("torch.device(<device string>)")
            return self._device_call()
        if (isinstance(updated.func, cst.Attribute) and updated.func.attr.value in _VENDORS
                and not updated.args and dotted_name(updated.func.value) != "torch"):
            self._count(f".{updated.func.attr.value}()")
            return cst.Call(func=updated.func.with_changes(attr=cst.Name("to")),
                            args=[cst.Arg(self._device_call())])
        if isinstance(updated.func, cst.Subscript) and any(
                a.keyword is not None and a.keyword.value in XPU_ONLY_OPTIONS for a in updated.args):
            return updated.with_changes(args=[
                cst.Arg(value=self._options_call(a.keyword.value, a.value), star="**", comma=a.comma)
                if a.keyword is not None and a.keyword.value in XPU_ONLY_OPTIONS else a
                for a in updated.args])
        if name.startswith(("torch.xpu.", "torch.cuda.")):
            self.left_alone.append(f"{name}() has no device-agnostic equivalent here; left as is")
            return updated
        new_args = []
        changed = False
        is_to = isinstance(updated.func, cst.Attribute) and updated.func.attr.value in {"to", "new_empty",
                                                                                         "new_zeros", "new_ones"}
        for arg in updated.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if _is_device_string(arg.value) and (keyword == "device" or (keyword is None and is_to)):
                self._count("device string argument")
                new_args.append(arg.with_changes(value=self._device_call()))
                changed = True
            else:
                new_args.append(arg)
        return updated.with_changes(args=new_args) if changed else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        # ``x.is_cuda`` / ``x.is_xpu``: is x on the device this module runs on?
        if not (self._active and updated.attr.value in {f"is_{v}" for v in _VENDORS}
                and dotted_name(updated.value) != "torch"):
            return updated
        self._count(f".{updated.attr.value} check")
        self.need_device = True
        here = cst.Attribute(value=cst.Call(func=cst.Name(DEVICE_HELPER_NAME), args=[cst.Arg(updated.value)]),
                             attr=cst.Name("type"))
        return cst.Comparison(
            left=cst.Attribute(value=cst.Attribute(value=updated.value, attr=cst.Name("device")), attr=cst.Name("type")),
            comparisons=[cst.ComparisonTarget(operator=cst.Equal(), comparator=here)],
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        if not self._active:
            return updated
        left = updated.left
        if _is_device_string(left):
            self._count("device-type comparison")
            left = self._device_type()
        targets = []
        for comp in updated.comparisons:
            if _is_device_string(comp.comparator):
                self._count("device-type comparison")
                targets.append(comp.with_changes(comparator=self._device_type()))
            else:
                targets.append(comp)
        return updated.with_changes(left=left, comparisons=targets)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if self._active and _is_device_string(updated.value):
            self._count("device string assignment")
            return updated.with_changes(value=self._device_call())
        return updated

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        if self._active and updated.default is not None and _is_device_string(updated.default):
            self._count("device string default")
            self.need_device = True
            return updated.with_changes(default=cst.Call(func=cst.Name(DEVICE_HELPER_NAME), args=[]))
        return updated

    def leave_BooleanOperation(self, original: cst.BooleanOperation,
                               updated: cst.BooleanOperation) -> cst.BaseExpression:
        value = _availability(updated)
        if self._active and value is not None and isinstance(updated.operator, cst.And) and value:
            return cst.Name("True")
        return updated

    # -- statements --------------------------------------------------------------------------
    def leave_Assert(self, original: cst.Assert, updated: cst.Assert):
        if self._active and _availability(updated.test) is True:
            self._count("device availability assert")
            return cst.RemoveFromParent()
        return updated

    def leave_If(self, original: cst.If, updated: cst.If):
        if not self._active:
            return updated
        value = _availability(updated.test)
        if value is None:
            return updated
        if value:
            self._count("device availability branch")
            return cst.FlattenSentinel(list(updated.body.body))
        self._count("branch taken only when the device is missing")
        if updated.orelse is None:
            return cst.RemoveFromParent()
        if isinstance(updated.orelse, cst.Else):
            return cst.FlattenSentinel(list(updated.orelse.body.body))
        return updated.orelse  # an elif becomes a plain if


def _insert_helpers(module: cst.Module, need_device: bool, need_sync: bool,
                    need_options: bool = False) -> cst.Module:
    defined = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    if DEVICE_HELPER_NAME in defined:
        return module
    helpers = list(cst.parse_module(HELPERS_SOURCE).body)
    if need_options:
        helpers += list(cst.parse_module(OPTIONS_HELPER_SOURCE).body)
    if not (need_device or need_sync):
        return module
    body = list(module.body)
    has_torch = False
    last_import = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            last_import = i
            for s in stmt.body:
                if isinstance(s, cst.Import) and any(dotted_name(a.name) == "torch" for a in s.names):
                    has_torch = True
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            break
    insert: list[cst.BaseStatement] = []
    if not has_torch:
        insert.append(cst.parse_statement("import torch\n"))
    two_blank = [cst.EmptyLine(), cst.EmptyLine()]
    insert.extend(h.with_changes(leading_lines=two_blank) for h in helpers)
    rest = body[last_import + 1:]
    if rest and isinstance(rest[0], (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        lines = list(rest[0].leading_lines)
        if sum(1 for ln in lines if ln.comment is None) < 2:
            rest[0] = rest[0].with_changes(leading_lines=two_blank + [ln for ln in lines if ln.comment])
    return module.with_changes(body=body[: last_import + 1] + insert + rest)


def port_source(source: str) -> CodemodResult:
    """Rewrite hard-coded devices in ``source`` (a kernel module) into device-agnostic code.

    Returns a :class:`CodemodResult`; not applicable (with the reason) when the module does not
    parse or has nothing device-specific. Raises nothing on bad input.
    """
    parsed = parse_module(NAME, source)
    if isinstance(parsed, CodemodResult):
        return parsed
    port = _Port()
    new = parsed.visit(port)
    if not port.counts:
        grid = grid_follows_autotune(source)
        if grid.changed:
            return CodemodResult(codemod=NAME, source=grid.source, changed=True, notes=list(grid.notes))
        reason = ("no hard-coded device strings ('xpu', 'cuda'), device-specific synchronize or "
                  "availability checks outside the kernels, and no fixed launch grid for an autotuned "
                  "kernel: the module is already device-agnostic")
        if port.left_alone:
            reason += "; " + "; ".join(sorted(set(port.left_alone)))
        return not_applicable(NAME, source, reason)
    new = ensure_nonempty_blocks(new)
    new = _insert_helpers(new, port.need_device, port.need_sync, port.need_options)
    code = new.code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    grid = grid_follows_autotune(code)
    if grid.changed:
        code = grid.source
    notes = [f"replaced {n} × {what}" for what, n in sorted(port.counts.items())]
    notes.extend(grid.notes if grid.changed else [])
    if port.need_device:
        notes.append("devices now come from _xf_device(): the input tensor's device, else the "
                     "accelerator present, else the CPU (Triton's interpreter)")
    if port.need_sync:
        notes.append("_xf_synchronize() synchronises whichever accelerator is in use and is a no-op on the CPU")
    if port.need_options:
        notes.append("_xf_compile_options() passes Intel-only compile options (grf_mode) on xpu and "
                     "drops them elsewhere, where Triton rejects them")
    notes.extend(sorted(set(port.left_alone)))
    return CodemodResult(codemod=NAME, source=code, changed=code != source, notes=notes)


def hard_coded_devices(source: str, device_type: str, module: cst.Module | None = None) -> list[str]:
    """Device names (``xpu``, ``cuda``) that ``source`` hard-codes and that differ from
    ``device_type`` (``cpu``, ``cuda`` or ``xpu``): device strings, ``torch.<dev>.*`` calls,
    ``.<dev>()`` moves, ``.is_<dev>`` checks. The helpers this codemod adds name ``"xpu"`` themselves and are not
    counted. ``module`` is ``source`` already parsed, if at hand. Never raises."""
    if module is None:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            module = None
    text = source if module is None else module.with_changes(body=[
        s for s in module.body if not (isinstance(s, cst.FunctionDef) and s.name.value in HELPER_NAMES)]).code
    found = []
    for dev in _VENDORS:
        pattern = (rf"""(['"]){dev}(:\d+)?\1|torch\.{dev}\.(synchronize|is_available|device|current_device)"""
                   rf"""|\.{dev}\(\s*\)|\.is_{dev}\b""")
        if dev != device_type and re.search(pattern, text):
            found.append(dev)
    return found


def _launch_options(module: cst.Module) -> list[tuple[str, str]]:
    """``(option, where)`` for each Intel-only compile option given at a launch keyword or as a
    key of a dict literal (a ``triton.Config``'s kwargs), outside ``_xf_compile_options(...)``."""
    found: list[tuple[str, str]] = []

    class _V(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0

        def visit_Call(self, node: cst.Call) -> None:
            if dotted_name(node.func) == OPTIONS_HELPER_NAME:
                self.depth += 1
            elif not self.depth and isinstance(node.func, cst.Subscript):
                for a in node.args:
                    if a.keyword is not None and a.keyword.value in XPU_ONLY_OPTIONS:
                        found.append((a.keyword.value, f"the launch of {dotted_name(node.func.value)}"))

        def leave_Call(self, node: cst.Call) -> None:
            if dotted_name(node.func) == OPTIONS_HELPER_NAME:
                self.depth -= 1

        def visit_DictElement(self, node: cst.DictElement) -> None:
            key = string_value(node.key)
            if key in XPU_ONLY_OPTIONS:
                found.append((key, "a triton.Config"))

    module.visit(_V())
    return found


def portability_needs(source: str, device_type: str) -> list[str]:
    """Why ``source`` cannot run correctly on ``device_type`` (``cpu``/``cuda``/``xpu``) as
    written, one phrase each (empty when nothing needs porting): a hard-coded other device
    (``hard-codes xpu``), an Intel-only compile option on cuda (``passes the Intel-only option
    grf_mode in the launch of _attn_fwd``: CUDA's Triton rejects it; Triton's interpreter
    ignores it), an autotuned kernel whose launch grid fixes the tile sizes (on any device).
    Never raises: a module that does not parse needs nothing from this step (the verifier
    reports it). Memoised: the Optimize page asks on every rerun, and each answer parses the
    module twice with libcst."""
    return list(_portability_needs(source, device_type))


@functools.lru_cache(maxsize=32)
def _portability_needs(source: str, device_type: str) -> tuple[str, ...]:
    try:
        module: cst.Module | None = cst.parse_module(source)
    except cst.ParserSyntaxError:
        module = None
    needs = [f"hard-codes {dev}" for dev in hard_coded_devices(source, device_type, module)]
    if module is None:
        return tuple(needs)
    if device_type == "cuda":
        for option, where in dict.fromkeys(_launch_options(module)):
            needs.append(f"passes the Intel-only option {option} in {where}")
    kernels = kernels_with_fixed_grids(source)
    if kernels:
        needs.append(f"launches autotuned {', '.join(kernels)} with a grid that fixes the tile sizes")
    return tuple(needs)


@register("portability", "device-agnostic devices, synchronisation and launch grids")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return port_source(source)
