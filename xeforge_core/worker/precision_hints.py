"""Where a module's source lowers the precision of its arithmetic: the evidence that names a
measured precision change (``worker/precision_report.py``).

Read statically from the module's AST (nothing runs), per downgrade name of
``xeforge_core.precision.DOWNGRADES``, each piece of evidence as ``"kernel K, line N: why"``
(``line`` in the module's file):

* ``tf32``: a ``tl.dot`` that multiplies float32 operands in TF32 on NVIDIA GPUs (no
  ``input_precision``, Triton's default there; ``allow_tf32=True``; ``input_precision`` of
  ``"tf32"``/``"tf32x3"``; either chosen at compile time);
* ``fp16-accumulation`` / ``bf16-accumulation``: an accumulator made in that dtype
  (``tl.zeros``/``tl.full`` with ``dtype=tl.float16`` assigned to a name the kernel then adds
  into: ``acc += ...``, ``acc = tl.dot(a, b, acc)``), or a sum or scan (``tl.sum``,
  ``tl.cumsum``, ``tl.reduce``, ``tl.associative_scan``) of values cast to it;
* ``fp16`` / ``bf16``: any other cast to it in a kernel (``.to(tl.float16)``), or a conversion
  to it in the host code (``.half()``, ``.to(torch.bfloat16)``, ``dtype=torch.float16``; a dtype
  only named, as a key of a dtype table or in a comparison, is none);
* ``approx-math``: approximate functions (``fast_expf`` and the other ``fast_*`` of libdevice,
  inline PTX with ``.approx``).

Host code that turns TF32 on for PyTorch's float32 products (``allow_tf32 = True``,
``set_float32_matmul_precision("high")``) is ``tf32`` evidence too.

Casts to the problem's own dtype are not downgrades and are not reported, nor is an accumulator
in it: a float16 problem's reference may itself round each step in float16 (a chain of adds), and
no measurement here tells that reliably from PyTorch's float32 accumulation rounded once
(``docs/measured/cpu-precision-rule``).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable

from xeforge_core.worker.astutil import name_closure

#: Values of ``tl.dot``'s ``input_precision`` that multiply float32 operands in TF32 (Triton's
#: ``tl.dot`` documentation: "tf32", "tf32x3" and "ieee"; the default on NVIDIA is "tf32").
_TF32_PRECISIONS = ("tf32", "tf32x3")

#: Reductions and scans: values cast to a low precision and fed to one are accumulated in it.
_ACCUMULATING = {"sum", "cumsum", "cumprod", "reduce", "associative_scan"}

_LOW = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16"}

#: Downgrades :func:`precision_hints` reports wherever a module's source has them (every
#: ``tl.dot`` in TF32, host code that turns TF32 on for PyTorch's products, every cast to a
#: half-precision type in a kernel or the host code): where it reports none of them, a measured
#: precision change is not one of them. Approximate math
#: also hides in formulas (GELU through tanh for the exact one through erf), which no scan sees.
SCANNED_DOWNGRADES = frozenset({"tf32", "fp16", "bf16"})

#: aten ops (overload packets) of the functions kernels compute with approximations as coarse as
#: the ``approx-math`` allowance (a relative error up to 2^-11, ``precision.DOWNGRADES``):
#: ``tanh.approx.f32`` (PTX ISA: maximum relative error 2^-10.987) and what is built on it
#: (sigmoid, SiLU, Mish, GELU), formulas that stand for a function (GELU through tanh for the one
#: through erf, ``exp(x) - 1`` for ``expm1``, ``log(1 + x)`` for ``log1p``, softplus and its
#: kin), and the fast intrinsics whose error grows with the argument (``__sinf``, ``__powf``):
#: an error of that size on such a truth is named approximate math, with the option.
APPROXIMABLE_OPS = frozenset({
    "expm1", "log1p", "logaddexp", "tanh", "sigmoid", "log_sigmoid_forward", "erf", "erfc", "erfinv", "gelu",
    "silu", "mish", "softplus", "elu", "selu", "celu", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh",
    "cosh", "asinh", "acosh", "atanh", "pow", "float_power", "lgamma", "digamma", "xlogy", "special_xlog1py",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "glu", "logit", "sinc", "soft_margin_loss",
})

#: aten ops of the functions whose hardware approximations are within a few float32 units in the
#: last place (PTX ISA: ``sqrt.approx``, ``rsqrt.approx``, ``ex2.approx``, ``lg2.approx``), inside
#: the float32 bound: the square root, the exponential, the logarithm, and the variances, norms,
#: softmaxes and attentions made of them (``pow_root``: a power with a half-integer exponent,
#: ``x ** 0.5``, recorded so by the float64 truth's tracer, which records no integer power). A kernel errs
#: beyond the bound on such a truth only through an approximation of its own (a polynomial
#: exponential, FlashAttention-4's on FMA units, a one-pass variance) or a fault of logic (a
#: variance divided by n - 1 errs by 4.5e-4 at 1100 columns, the allowance's size), and the error
#: does not tell which: ``approx-math`` is not named as the cause unless the source shows a fast
#: intrinsic or ``.approx`` assembly (:func:`truth_unlikely`), and the verdict says to look for a
#: fault first; the allowance, given, still applies (the user vouches for the approximation).
FINELY_APPROXIMATED_OPS = frozenset({
    "exp", "exp2", "log", "log2", "log10", "logsumexp", "_softmax", "_log_softmax", "softmax", "log_softmax",
    "nll_loss", "nll_loss_forward", "kl_div", "sqrt", "rsqrt", "pow_root", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "native_batch_norm", "native_layer_norm", "native_group_norm",
    "linalg_vector_norm", "norm", "std", "var", "var_mean", "std_mean", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "scaled_dot_product_attention", "logcumsumexp", "_cdist_forward",
})


class Hints(dict):
    """``{downgrade: [causes]}`` a source scan found; ``scanned``: the downgrades the scans would
    have found wherever they are, so that one they did not find is no cause of an error
    (:data:`SCANNED_DOWNGRADES`, plus ``approx-math`` where the truth computes no function a
    kernel could approximate: :func:`truth_scanned`); ``unlikely``: downgrades that may apply but
    are not named as the cause of an error without the source's evidence (:func:`truth_unlikely`)."""

    def __init__(self, found: dict[str, list[str]] | None = None,
                 scanned: frozenset[str] = SCANNED_DOWNGRADES, unlikely: frozenset[str] = frozenset()) -> None:
        super().__init__(found or {})
        self.scanned = frozenset(scanned)
        self.unlikely = frozenset(unlikely) - self.scanned


def _functions(truth_ops: Iterable[str]) -> set[str]:
    """The op names with an in-place op read as its function (``tanh_`` as ``tanh``)."""
    return {op[:-1] if op.endswith("_") and not op.endswith("__") else op for op in truth_ops}


def truth_scanned(truth_ops: list[str] | None) -> frozenset[str]:
    """The downgrades known to be absent or present wherever they are, given the aten ops the
    float64 truth called (``None`` or empty: not traced, the source scans' alone): with ops among
    none of :data:`APPROXIMABLE_OPS` and :data:`FINELY_APPROXIMATED_OPS` (rational arithmetic),
    ``approx-math`` too."""
    if truth_ops and not (APPROXIMABLE_OPS | FINELY_APPROXIMATED_OPS) & _functions(truth_ops):
        return SCANNED_DOWNGRADES | {"approx-math"}
    return SCANNED_DOWNGRADES


def truth_unlikely(truth_ops: list[str] | None) -> frozenset[str]:
    """``{"approx-math"}`` where the float64 truth's functions are all among
    :data:`FINELY_APPROXIMATED_OPS` (none of :data:`APPROXIMABLE_OPS`): approximate math is then
    no likely cause of an error beyond the float32 bound (a fault of logic is as likely), so the
    verdict does not name it without the source's evidence; else nothing."""
    ops = _functions(truth_ops or ())
    if ops & FINELY_APPROXIMATED_OPS and not ops & APPROXIMABLE_OPS:
        return frozenset({"approx-math"})
    return frozenset()


def _tf32_calls(tree: ast.AST, constants: dict[str, object] | None = None) -> list[tuple[int, str]]:
    """``(line, why)`` of every ``tl.dot`` under ``tree`` that runs float32 operands in TF32;
    ``constants``: the values of the kernel's constexpr parameters at one launch, by name, which
    settle an ``input_precision``/``allow_tf32`` given by such a parameter."""
    constants = constants or {}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if "input_precision" not in kw and len(node.args) > 3:
            kw["input_precision"] = node.args[3]
        prec, allow = kw.get("input_precision"), kw.get("allow_tf32")
        for name in ("prec", "allow"):
            value = prec if name == "prec" else allow
            if isinstance(value, ast.Name) and isinstance(constants.get(value.id), (str, bool)):
                known = ast.Constant(constants[value.id])
                prec, allow = (known, allow) if name == "prec" else (prec, known)
        why = None
        if prec is not None:
            if isinstance(prec, ast.Constant):
                why = f'input_precision="{prec.value}"' if prec.value in _TF32_PRECISIONS else None
            else:
                why = f"input_precision={ast.unparse(prec)}, chosen at compile time"
        elif allow is not None:
            if isinstance(allow, ast.Constant):
                why = "allow_tf32=True" if allow.value else None
            else:
                why = f"allow_tf32={ast.unparse(allow)}, chosen at compile time"
        else:
            why = "no input_precision (Triton's default)"
        if why:
            out.append((node.lineno, why))
    return out


def tf32_dots(src: str, constants: dict[str, object] | None = None) -> list[str]:
    """Where ``src`` (a kernel's source) calls ``tl.dot`` in a way that multiplies float32
    operands in TF32 on NVIDIA GPUs, one ``"line N: why"`` each: no ``input_precision`` and no
    ``allow_tf32`` (the default), ``allow_tf32=True``, ``input_precision="tf32"``/``"tf32x3"``,
    or either given by a name whose value is known only at compile time (``allow_tf32=USE_TF32``)
    and not in ``constants`` (a launch's constexpr values by parameter name, which settle it).
    ``input_precision="ieee"`` and ``allow_tf32=False`` are full float32. Lines count from the
    source's first line; a source that does not parse gives ``[]``."""
    try:
        tree = ast.parse(textwrap.dedent(src))
    except SyntaxError:
        return []
    return [f"line {line}: {why}" for line, why in _tf32_calls(tree, constants)]


def _host_tf32(tree: ast.Module, inside: set[int]) -> list[tuple[int, str]]:
    """``(line, why)`` where host code turns TF32 on for PyTorch's float32 products
    (``torch.backends.cuda.matmul.allow_tf32 = True``, ``torch.backends.cudnn.allow_tf32 =
    True``, ``torch.set_float32_matmul_precision("high")`` or ``"medium"``; PyTorch's
    documentation of TF32 on Ampere and later devices)."""
    out = []
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == "allow_tf32":
                    out.append((node.lineno, f"{ast.unparse(target)} = True"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "set_float32_matmul_precision" and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("high", "medium"):
            out.append((node.lineno, f'set_float32_matmul_precision("{node.args[0].value}")'))
    return out


def _low_dtype(node: ast.AST) -> str | None:
    """``fp16``/``bf16`` when ``node`` names such a dtype (``tl.float16``, ``torch.bfloat16``,
    ``"float16"``)."""
    if isinstance(node, ast.Attribute) and node.attr in _LOW:
        return _LOW[node.attr]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _LOW.get(node.value.replace("torch.", "").replace("tl.", ""))
    return None


def _reads(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _adds_into(value: ast.AST, name: str) -> bool:
    """Whether assigning ``value`` to ``name`` adds into it: ``name + x`` / ``x - name`` (also
    behind casts), ``tl.dot(a, b, name)``, or a helper call handed ``name`` (``acc, m =
    inner(acc, m, ...)``). A running max or a select (``tl.maximum(m, x)``, ``tl.where(c, v,
    name)``) rounds nothing and is no accumulation."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to":
        value = value.func.value
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub)):
        return _reads(value.left, name) or _reads(value.right, name)
    if isinstance(value, ast.Call):
        fname = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
        if fname == "dot":
            acc = value.args[2] if len(value.args) > 2 else next((k.value for k in value.keywords if k.arg == "acc"), None)
            return acc is not None and _reads(acc, name)
        if fname not in ("maximum", "minimum", "where", "max", "min", "clamp"):
            return any(_reads(a, name) for a in [*value.args, *(k.value for k in value.keywords)])
    return False


def _accumulators(fn: ast.FunctionDef) -> set[int]:
    """The ``tl.zeros``/``tl.full`` calls of ``fn`` (by ``id``) that make an accumulator: the
    value of an assignment to a name the kernel later adds into (``acc += ...``, ``acc = acc +
    ...``, ``acc = tl.dot(a, b, acc)``, ``acc, m = inner(acc, m, ...)``: :func:`_adds_into`)."""
    into: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) \
                and isinstance(node.op, (ast.Add, ast.Sub)):
            into.add(node.target.id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            names = [target] if isinstance(target, ast.Name) else \
                [e for e in target.elts if isinstance(e, ast.Name)] if isinstance(target, ast.Tuple) else []
            into |= {n.id for n in names if _adds_into(node.value, n.id)}
    return {id(node.value) for node in ast.walk(fn)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in into and isinstance(node.value, ast.Call)}


def _rounded_sums(fn: ast.FunctionDef) -> set[int]:
    """The casts to a 16-bit float (``.to(tl.float16)`` calls, by ``id``) in the outer cast chain
    of an assignment in a loop that adds into its own target: ``acc = (acc + x).to(tl.float16)``,
    also ``acc = (acc + x).to(tl.float16).to(tl.float32)`` (a float32 name whose every sum is
    rounded to float16 accumulates in float16). Outside a loop such a line rounds once (a bias
    added to a result, then stored)."""
    out: set[int] = set()
    looped = [n for loop in ast.walk(fn) if isinstance(loop, (ast.For, ast.While))
              for stmt in loop.body for n in ast.walk(stmt)]
    for node in looped:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and _adds_into(node.value, node.targets[0].id)):
            continue
        value = node.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to":
            if value.args and _low_dtype(value.args[0]):
                out.add(id(value))
            value = value.func.value
    return out


def _summed_cast(arg: ast.AST) -> ast.AST | None:
    """The low-precision dtype node a sum or scan of ``arg`` accumulates in: the dtype of its
    outermost cast (``x.to(tl.float16)``), or, with no outer cast, of any cast within it (a
    product of float16 values is float16); ``None`` when the outer cast is to another dtype."""
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "to" and arg.args:
        return arg.args[0] if _low_dtype(arg.args[0]) else None
    return next((n for n in ast.walk(arg) if _low_dtype(n)), None)


_DTYPE_WORD = {"fp16": "float16", "bf16": "bfloat16"}


def _kernel_evidence(fn: ast.FunctionDef, own: str | None) -> list[tuple[str, int, str]]:
    """``(downgrade, line, why)`` inside one kernel."""
    found: list[tuple[str, int, str]] = []
    accumulated: set[int] = set()
    accumulators = _accumulators(fn)
    rounded = _rounded_sums(fn)
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else ""
        if name in ("zeros", "full") and id(node) in accumulators:  # another block of that dtype is a cast
            # tl.zeros(shape, dtype) / tl.full(shape, value, dtype), by keyword or by position
            position = 1 if name == "zeros" else 2
            given = [k.value for k in node.keywords if k.arg == "dtype"] + node.args[position:position + 1]
            for value in given:
                low = _low_dtype(value)
                if low and low != own:
                    found.append((f"{low}-accumulation", node.lineno, f"tl.{name}(..., dtype="
                                  f"{ast.unparse(value)}): an accumulator in " + _DTYPE_WORD[low]))
                    accumulated.add(id(value))
        elif name in _ACCUMULATING and node.args:
            inner = _summed_cast(node.args[0])
            low = _low_dtype(inner) if inner is not None else None
            wider = any(k.arg == "dtype" and not _low_dtype(k.value) for k in node.keywords)  # tl.sum(..., dtype=fp32)
            if low and low != own and not wider:
                found.append((f"{low}-accumulation", node.lineno, f"tl.{name} over values cast to "
                              + _DTYPE_WORD[low]))
                accumulated.add(id(inner))
        elif name == "to" and id(node) in rounded and _low_dtype(node.args[0]) != own:
            low = _low_dtype(node.args[0])
            found.append((f"{low}-accumulation", node.lineno, f"each running sum rounded through "
                          f"{ast.unparse(node.args[0])}: an accumulator in " + _DTYPE_WORD[low]))
            accumulated.add(id(node.args[0]))
        elif name.startswith("fast_"):
            found.append(("approx-math", node.lineno, f"{name} (an approximate function)"))
        elif name == "inline_asm_elementwise":
            asm = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "asm"), None)
            if isinstance(asm, ast.Constant) and ".approx" in str(asm.value):
                found.append(("approx-math", node.lineno, "inline assembly with .approx"))
    for node in ast.walk(fn):
        low = _low_dtype(node)
        if low and low != own and id(node) not in accumulated and isinstance(node, ast.Attribute):
            found.append((low, node.lineno, f"values cast to {ast.unparse(node)}"))
    return found


def jit_reached(tree: ast.Module, roots: set[str], jit: set[str]) -> set[str]:
    """The ``@triton.jit`` functions (names in ``jit``) that the kernels ``roots`` reach: the
    roots and every jit function their bodies name, transitively."""
    defs = {fn.name: fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) and fn.name in jit}

    def refers(name: str) -> set[str]:
        return {ref for node in ast.walk(defs[name])
                if (ref := node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                    else None) in defs}

    return name_closure((r for r in roots if r in defs), refers)


def precision_hints(tree: ast.Module, kernels: set[str], dtype: str | None) -> dict[str, list[str]]:
    """Evidence of lower-precision arithmetic in a module (see the module docstring), by
    downgrade name, for a problem of ``dtype`` (``float32``, ``float16``...; ``None``: unknown,
    then nothing is reported). ``kernels``: the names of its Triton kernels."""
    if dtype not in ("float32", "float16", "bfloat16"):
        return {}
    own = {"float16": "fp16", "bfloat16": "bf16"}.get(dtype)
    out: dict[str, list[str]] = {}

    def add(name: str, where: str, line: int, why: str) -> None:
        entries = out.setdefault(name, [])
        text = f"{where}, line {line}: {why}"
        if text not in entries:
            entries.append(text)

    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name in kernels:
            inside |= {id(n) for n in ast.walk(fn)}
            if dtype == "float32":
                for line, why in _tf32_calls(fn):
                    add("tf32", f"kernel {fn.name}", line, f"tl.dot in TF32 ({why})")
            for name, line, why in _kernel_evidence(fn, own):
                add(name, f"kernel {fn.name}", line, why)
    if dtype == "float32":
        for line, why in _host_tf32(tree, inside):
            add("tf32", "host code", line, why)
        for node, low in _host_conversions(tree, inside):
            add(low, "host code", getattr(node, "lineno", 0), f"{ast.unparse(node)[:60]}")
    return out


def _torch_low(node: ast.AST, names: dict[str, str]) -> str | None:
    """``fp16``/``bf16`` where ``node`` is ``torch.float16``/``torch.half``/``torch.bfloat16``
    or a name assigned one (``names``)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return _LOW.get(node.attr)
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def _host_conversions(tree: ast.AST, inside: set[int]) -> list[tuple[ast.AST, str]]:
    """``(node, fp16/bf16)`` for each conversion of host code (outside the kernels: ``inside``) to
    a half-precision dtype: ``.half()``/``.bfloat16()``, ``.to(torch.bfloat16)``/``.type(...)``,
    ``dtype=torch.float16`` of an allocation, also through a name assigned the dtype (in either
    branch of a conditional; names are read module-wide, not per function). A dtype
    only named (a key of a torch-to-Triton dtype table, a comparison ``x.dtype ==
    torch.bfloat16``) converts nothing and is no evidence."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if id(node) in inside or not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        # dt = torch.bfloat16, or one branch of dt = torch.bfloat16 if big else torch.float32
        values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
        low = next((x for v in values if (x := _torch_low(v, {}))), None)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if low and isinstance(t, ast.Name):
                names[t.id] = low
    out: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if id(node) in inside or not isinstance(node, ast.Call):
            continue
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        low = {"half": "fp16", "bfloat16": "bf16"}.get(method) if not node.args else None
        if low is None and method in ("to", "type"):
            low = next((x for a in node.args if (x := _torch_low(a, names))), None)
        if low is None:
            low = next((x for k in node.keywords if k.arg == "dtype" and (x := _torch_low(k.value, names))), None)
        if low:
            out.append((node, low))
    return out
