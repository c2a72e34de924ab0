"""The index width of a first version's kernels, chosen at each launch instead of at the trace.

Generation makes Inductor index in int64 (:func:`xeforge_core.inductor.generate._index_in_64_bits`),
because a first version keeps no recompile guards and must be right at every size. int64 index
arithmetic is slow on GPUs: Inductor's pointwise kernels split a flat index into coordinates
with ``//`` and ``%`` by runtime sizes, and a 64-bit division is emulated in many instructions.
On an H100 (2026-12-07, KernelBench level 2 p71's ``div_leaky_relu`` kernel over 130M float32
elements) the int64 kernel took 788 µs and the same kernel indexing in int32 379 µs (91% of the
copy bandwidth).

So each kernel takes its index dtype as a constexpr, ``INDEX_DTYPE``, in place of the
``.to(tl.int64)`` Inductor writes where it forms the program's offsets and indices (``xoffset``,
``xindex``, ``r0_base`` ...), and each launch passes :func:`index_dtype` of its arguments: int32
where every offset the kernel can form fits, which is Inductor's own rule
(``torch/_inductor/codegen/simd.py``, ``can_use_32bit_indexing``: the numel and every buffer's
size at most 2**31 - 1) taken per launch; int64 otherwise. Triton compiles one variant per
dtype. Casts elsewhere (a loaded index, an int64 value computed for an output) are left as they
are.
"""

from __future__ import annotations

import ast
import re

#: The constexpr parameter each narrowed kernel takes.
PARAM = "INDEX_DTYPE"
#: The host helper that picks it at a launch.
HELPER = "index_dtype"
#: int32 offsets stop at 2**31 - 1; a block's tail (up to 2**20 elements past the last one)
#: must fit too.
INT32_LIMIT = 2**31 - 1 - 2**20

#: The names Inductor gives a program's offsets and indices: ``xoffset``, ``xindex``,
#: ``yoffset``, ``r0_base``, ``r0_offset``, ``r0_index``, ``rbase``, ``roffset``, ``rindex``.
_INDEX_NAME = re.compile(r"^(?:[xyz](?:offset|index|base)|r\d*_?(?:offset|index|base))$")


def _is_int64_cast(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
            and len(node.args) == 1 and not node.keywords and ast.unparse(node.args[0]) == "tl.int64")


class _Narrow(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _is_int64_cast(node):
            self.count += 1
            node.args = [ast.copy_location(ast.Name(id=PARAM, ctx=ast.Load()), node.args[0])]
        return node


def _index_assignments(function: ast.FunctionDef) -> list[ast.Assign]:
    return [n for n in ast.walk(function) if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and _INDEX_NAME.match(n.targets[0].id)]


def narrows(function: ast.FunctionDef) -> bool:
    """Whether ``function`` (an Inductor kernel) casts its offsets or indices to int64."""
    return PARAM not in {a.arg for a in function.args.args} and any(
        _is_int64_cast(c) for a in _index_assignments(function) for c in ast.walk(a.value))


def narrow(function: ast.FunctionDef) -> bool:
    """Rewrite ``function`` in place: ``.to(tl.int64)`` in its offset and index assignments
    becomes ``.to(INDEX_DTYPE)``, and ``INDEX_DTYPE: tl.constexpr`` is added as its last
    parameter. Returns whether anything was rewritten."""
    if not narrows(function):
        return False
    rewrite = _Narrow()
    for assign in _index_assignments(function):
        assign.value = rewrite.visit(assign.value)
    annotation = ast.parse("tl.constexpr", mode="eval").body
    function.args.args.append(ast.arg(arg=PARAM, annotation=annotation))
    return rewrite.count > 0


HELPER_SOURCE = f'''
def {HELPER}(*args):
    """The index dtype of one launch: ``tl.int32`` where every offset the kernel can form fits
    32 bits (each tensor argument's extent, from its storage offset, sizes and strides, and each
    integer argument at most {INT32_LIMIT}, 2**31 - 1 less a block's tail), else ``tl.int64``
    (Inductor's can_use_32bit_indexing, taken per launch)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            extent = (a.storage_offset() + 1 + sum((s - 1) * abs(st) for s, st in zip(a.shape, a.stride()))
                      if a.numel() else 0)
        elif isinstance(a, int):
            extent = abs(a)
        else:
            continue
        if extent > {INT32_LIMIT}:
            return tl.int64
    return tl.int32
'''
