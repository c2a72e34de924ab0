"""Readable names for TorchInductor's kernels and the model's parameters.

Inductor names a kernel ``triton_<kind>_fused_<op>_<op>..._<n>`` (``triton_per_fused_add_mul_relu_sum_0``);
a first version calls it after what it computes: ``add_mul_relu_sum_kernel`` (at most four op
names, the kind when the ops say nothing, a number only to keep names apart).
"""

from __future__ import annotations

import keyword

from xeforge_core.inductor.kernels import KIND_PREFIXES

#: Words of Inductor's names that say nothing about the computation.
_NOISE = {"triton", "fused", "legit", "functional", "native", "default", "copy", "", "t", "view", "clone",
          "unsafe", "reinterpret", "tensor", "scalar", "convert", "element", "type"}


def kernel_name(inductor_name: str, kind: str, taken: set[str]) -> str:
    """A readable, unused name for the kernel ``inductor_name`` of ``kind``; adds it to ``taken``."""
    words = inductor_name.split("_")
    if words and words[0] == "triton":
        words = words[1:]
    if words and words[0] in KIND_PREFIXES:
        words = words[1:]
    if words and words[-1].isdigit():
        words = words[:-1]
    ops: list[str] = []
    for w in words:
        if w not in _NOISE and not w.isdigit() and w not in ops:
            ops.append(w)
    stem = "_".join(ops[:4]) or kind
    base = f"{stem}_kernel"
    name, n = base, 2
    while name in taken or keyword.iskeyword(name):
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def local_name(expr: str, taken: set[str]) -> str:
    """A local variable name for an attribute path (``self.linear.weight`` -> ``linear_weight``)."""
    path = expr.removeprefix("self.")
    base = "".join(c if c.isalnum() else "_" for c in path).strip("_") or "value"
    if base[0].isdigit():
        base = "p_" + base
    name, n = base, 2
    while name in taken or keyword.iskeyword(name):
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name
