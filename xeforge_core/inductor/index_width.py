"""The index width of a first version's kernels, chosen at each launch instead of at the trace.

Generation makes Inductor index in int64 (:func:`xeforge_core.inductor.generate._index_in_64_bits`),
because a first version keeps no recompile guards and must be right at every size. int64 index
arithmetic is slow on GPUs: Inductor's pointwise kernels split a flat index into coordinates
with ``//`` and ``%`` by runtime sizes, and a 64-bit division is emulated in many instructions.
On an H100 (2026-12-07, KernelBench level 2 p71's ``div_leaky_relu`` kernel over 130M float32
elements) the int64 kernel took 788 µs and the same kernel indexing in int32 379 µs (91% of the
copy bandwidth).

So a kernel whose indices only address memory and mask it takes its index dtype as a
constexpr, ``INDEX_DTYPE``, in place of the ``.to(tl.int64)`` Inductor writes where it forms the
program's offsets and indices (``xoffset``, ``xindex``, ``r0_base`` ...), and each launch passes
:func:`index_dtype` of its arguments: int32 where every offset the kernel can form fits (the
offsets into a tensor stay below its extent; after the rule of Inductor's
``can_use_32bit_indexing`` in ``torch/_inductor/codegen/simd.py``: every buffer's size at most
2**31 - 1), taken per launch; int64 otherwise. Triton compiles one variant per dtype. A kernel
that computes values from its indices (``torch.arange(n) * n``, an argmax's position, a linear
index as a float) keeps int64: Inductor forms those in the index dtype, and a product of two
sizes that each fit can wrap in int32 (Inductor widens them when it picks int32 itself; the
first version cannot know the sizes). Casts elsewhere (a loaded index, an int64 value computed
for an output) are left as they are.
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


#: Inductor's index variables: ``xindex``, ``xoffset``, ``x0``, ``x1``, ``r0_index``, ``r0_1``,
#: ``rindex``, ``r1``, ``yindex``, ``y0`` ... (masks, ``xmask``, ``r0_mask``, are not values).
_INDEX_VARIABLE = re.compile(r"^(?:[xyz]|r\d*_?)(?:index|offset|base|\d+)$")
_MASK_NAME = re.compile(r"mask\w*$")


def _address_and_mask_args(call: ast.Call) -> list[ast.AST]:
    """The arguments of ``tl.load`` / ``tl.store`` that address memory or mask it."""
    name = ast.unparse(call.func)
    if name == "tl.load":
        return call.args[:2] + [k.value for k in call.keywords if k.arg == "mask"]
    if name == "tl.store":
        return call.args[:1] + call.args[2:3] + [k.value for k in call.keywords if k.arg == "mask"]
    return []


def _small(node: ast.AST) -> bool:
    """A name, a constant, or sums and differences of them: nothing that multiplies sizes."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) \
        and _small(node.left) and _small(node.right)


def _bounded_comparison(node: ast.Compare) -> bool:
    """``rbase == RBLOCK - 1``, ``x0 < ks0``: a comparison of an index with sizes that cannot wrap
    in 32 bits (a mask written as a value, as a looped scan's carry is picked)."""
    return all(_small(o) for o in (node.left, *node.comparators))


def _index_as_value(function: ast.FunctionDef) -> str | None:
    """The first statement of ``function`` that uses an index variable as a value (not to address
    memory, not in a mask, not to form another index or mask), or ``None``. Inductor writes such
    values (``torch.arange(n) * n``: ``tmp1 = (ks0 * x0).to(tl.int64)``; an argmax's index) in the
    index dtype; in int32 their products wrap where every size fits, so such a kernel keeps int64."""
    for stmt in ast.walk(function):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and (_INDEX_VARIABLE.match(stmt.targets[0].id) or _MASK_NAME.search(stmt.targets[0].id)):
            continue   # forms another index or a mask
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
            continue
        allowed = {id(n) for c in ast.walk(stmt) if isinstance(c, ast.Call)
                   for arg in _address_and_mask_args(c) for n in ast.walk(arg)}
        allowed |= {id(o) for c in ast.walk(stmt) if isinstance(c, ast.Compare) and _bounded_comparison(c)
                    for o in (c.left, *c.comparators)}
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and _INDEX_VARIABLE.match(node.id) and id(node) not in allowed \
                    and isinstance(node.ctx, ast.Load):
                return ast.unparse(stmt)
    return None


def narrows(function: ast.FunctionDef) -> bool:
    """Whether ``function`` (an Inductor kernel) casts its offsets or indices to int64 and uses
    them only to address memory and to mask (:func:`_index_as_value`): a kernel that computes
    values from them keeps int64."""
    return PARAM not in {a.arg for a in function.args.args} and any(
        _is_int64_cast(c) for a in _index_assignments(function) for c in ast.walk(a.value)) \
        and _index_as_value(function) is None


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
    (after Inductor's can_use_32bit_indexing, taken per launch; the kernel uses its indices only to
    address memory and to mask)."""
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
