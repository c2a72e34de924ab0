"""Plain Triton versions of the TorchInductor runtime helpers its kernels call.

Inductor's kernels call ``triton_helpers.<name>`` (``torch._inductor.runtime.triton_helpers``):
NaN-propagating minimum/maximum, reductions built on them, Welford mean/variance, integer floor
division, argmin/argmax with indices, online softmax. A first version must not import
``torch._inductor``, so :func:`helpers_source` writes the ``@triton.jit`` functions a module
needs, written here from the operations' definitions (IEEE-754 NaN propagation as
``torch.maximum`` documents it; Welford's online mean/variance and Chan et al.'s pairwise
combination; Python's floor division and remainder for integers).

Each helper is ``name -> (source, helpers it calls)``; names are Inductor's, so a kernel's call
``triton_helpers.maximum(a, b)`` becomes ``maximum(a, b)``.
"""

from __future__ import annotations

_H: dict[str, tuple[str, tuple[str, ...]]] = {
    "promote_to_tensor": ('''
@triton.jit
def promote_to_tensor(x):
    # adding a boolean zero makes a scalar a tensor and keeps the dtype
    return x + tl.zeros((1,), tl.int1)
''', ()),
    "is_floating": ('''
@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()
''', ("promote_to_tensor",)),
    "maximum": ('''
@triton.jit
def maximum(a, b):
    # the larger value; NaN wins (torch.maximum semantics)
    take_a = a > b
    if is_floating(a):
        take_a |= a != a
    return tl.where(take_a, a, b)
''', ("is_floating",)),
    "minimum": ('''
@triton.jit
def minimum(a, b):
    # the smaller value; NaN wins (torch.minimum semantics)
    take_a = a < b
    if is_floating(a):
        take_a |= a != a
    return tl.where(take_a, a, b)
''', ("is_floating",)),
    "_any_nan": ('''
@triton.jit
def _any_nan(a, dim):
    # whether any lane along dim is NaN (a max of 0/1)
    return tl.max((a != a).to(tl.int8), dim) > 0
''', ()),
    "_extreme": ('''
@triton.jit
def _extreme(a, dim, LARGEST: tl.constexpr):
    # the largest (smallest) value along dim; NaN if any is NaN. tl.max / tl.min plus a NaN
    # check is the same reduction as tl.reduce(a, dim, maximum / minimum) and far quicker in
    # the interpreter
    if LARGEST:
        result = tl.max(a, dim)
    else:
        result = tl.min(a, dim)
    if is_floating(a):
        result = tl.where(_any_nan(a, dim), float("nan"), result)
    return result
''', ("is_floating", "_any_nan")),
    "max2": ('''
@triton.jit
def max2(a, dim):
    return _extreme(a, dim, True)
''', ("_extreme",)),
    "min2": ('''
@triton.jit
def min2(a, dim):
    return _extreme(a, dim, False)
''', ("_extreme",)),
    "_multiply": ('''
@triton.jit
def _multiply(a, b):
    return a * b
''', ()),
    "prod": ('''
@triton.jit
def prod(values, axis):
    return tl.reduce(values, axis, _multiply)
''', ("_multiply",)),
    "any": ('''
@triton.jit
def any(a, dim):
    # whether any lane along dim is set (a max of 0/1, quicker than a custom combine)
    return tl.max((a != 0).to(tl.int8), dim) > 0
''', ()),
    "div_floor_integer": ('''
@triton.jit
def div_floor_integer(a, b):
    # Python's a // b: Triton's integer division truncates toward zero
    quotient = a // b
    remainder = a % b
    return tl.where((remainder != 0) & ((a < 0) != (b < 0)), quotient - 1, quotient)
''', ()),
    "remainder_integer": ('''
@triton.jit
def remainder_integer(a, b):
    # Python's a % b: the remainder takes the sign of the divisor
    remainder = a % b
    return tl.where((remainder != 0) & ((remainder < 0) != (b < 0)), remainder + b, remainder)
''', ()),
    "maximum_with_index": ('''
@triton.jit
def maximum_with_index(a_value, a_index, b_value, b_index):
    # argmax combine: the larger value, NaN first, the lower index on ties
    take_a = a_value > b_value
    tie = a_value == b_value
    if is_floating(a_value):
        a_nan = a_value != a_value
        b_nan = b_value != b_value
        take_a |= a_nan & (~b_nan)
        tie |= a_nan & b_nan
    take_a |= tie & (a_index < b_index)
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)
''', ("is_floating",)),
    "minimum_with_index": ('''
@triton.jit
def minimum_with_index(a_value, a_index, b_value, b_index):
    # argmin combine: the smaller value, NaN first, the lower index on ties
    take_a = a_value < b_value
    tie = a_value == b_value
    if is_floating(a_value):
        a_nan = a_value != a_value
        b_nan = b_value != b_value
        take_a |= a_nan & (~b_nan)
        tie |= a_nan & b_nan
    take_a |= tie & (a_index < b_index)
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)
''', ("is_floating",)),
    "_extreme_with_index": ('''
@triton.jit
def _extreme_with_index(value, index, dim, LARGEST: tl.constexpr):
    # the largest (smallest) value along dim, NaN first, and the lowest index among the lanes
    # holding it: what tl.reduce((value, index), dim, maximum_with_index / minimum_with_index)
    # gives, from built-in reductions, which the interpreter runs far quicker than a custom combine
    best = _extreme(value, dim, LARGEST)
    holds = value == tl.expand_dims(best, dim)
    if is_floating(value):
        nan = value != value
        holds = tl.where(tl.expand_dims(_any_nan(value, dim), dim), nan, holds)
    # lanes not holding it take the largest index, so the smallest of the rest is the answer
    best_index = tl.min(tl.where(holds, index, tl.expand_dims(tl.max(index, dim), dim)), dim)
    return best, best_index
''', ("_extreme", "is_floating", "_any_nan")),
    "max_with_index": ('''
@triton.jit
def max_with_index(value, index, dim):
    return _extreme_with_index(value, index, dim, True)
''', ("_extreme_with_index",)),
    "min_with_index": ('''
@triton.jit
def min_with_index(value, index, dim):
    return _extreme_with_index(value, index, dim, False)
''', ("_extreme_with_index",)),
    "welford_reduce": ('''
@triton.jit
def welford_reduce(value, mean, m2, weight, first_iteration):
    # one Welford step per lane: running mean, sum of squared deviations (m2) and count
    if first_iteration:
        new_weight = tl.full(weight.shape, 1, weight.dtype)
        new_mean = value
        new_m2 = tl.zeros_like(m2)
    else:
        delta = value - mean
        new_weight = weight + 1
        new_mean = mean + delta / new_weight
        new_m2 = m2 + delta * (value - new_mean)
    return new_mean, new_m2, new_weight
''', ()),
    "welford_combine": ('''
@triton.jit
def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    # merge two partial (mean, m2, count) triples (Chan et al.'s pairwise update)
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    share_2 = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return mean_1 + delta * share_2, m2_1 + m2_2 + delta * delta * weight_1 * share_2, new_weight
''', ()),
    "welford": ('''
@triton.jit
def welford(mean, m2, weight, dim):
    # Chan et al.'s combination of all parts at once: the total count, the count-weighted mean,
    # and the parts' m2 plus each part's spread around that mean (sums, not a pairwise tl.reduce)
    new_weight = tl.sum(weight, dim)
    new_mean = tl.sum(mean * weight, dim) / tl.where(new_weight == 0.0, 1.0, new_weight)
    delta = mean - tl.expand_dims(new_mean, dim)
    return new_mean, tl.sum(m2 + delta * delta * weight, dim), new_weight
''', ()),
    "exp": ('''
@triton.jit
def exp(x, use_fast_math: tl.constexpr):
    if use_fast_math:
        return tl.math.exp2(x * 1.4426950408889634)  # log2(e)
    else:
        return tl.exp(x)
''', ()),
    "online_softmax_combine": ('''
@triton.jit
def online_softmax_combine(lhs_max, lhs_sum, rhs_max, use_fast_math: tl.constexpr):
    # running (max, sum of exp(x - max)) after one more value rhs_max
    out_max = maximum(lhs_max, rhs_max)
    lhs_shift = tl.where(out_max == float("-inf"), 0.0, lhs_max - out_max)
    rhs_shift = tl.where(out_max == float("-inf"), 0.0, rhs_max - out_max)
    out_sum = lhs_sum * exp(lhs_shift, use_fast_math) + exp(rhs_shift, use_fast_math)
    return out_max, out_sum
''', ("maximum", "exp")),
    "online_softmax_reduce": ('''
@triton.jit
def online_softmax_reduce(lhs_max, lhs_sum, dim, use_fast_math: tl.constexpr):
    # merge the per-lane (max, sum) pairs along dim
    out_max = max2(lhs_max, dim)
    keep = tl.expand_dims(out_max, dim)
    shift = tl.where(keep == float("-inf"), 0.0, lhs_max - keep)
    out_sum = tl.sum(lhs_sum * exp(shift, use_fast_math), dim)
    return out_max, out_sum
''', ("max2", "exp")),
    "select_one": ('''
@triton.jit
def select_one(x, mask, dim, keep_dims=False):
    # the value of x at the one lane along dim that mask sets (a looped scan's carry: the last
    # lane of a block): every other lane's bits are zero, so summing the bit patterns returns
    # that value exactly, NaN, infinities and -0.0 included
    if x.dtype.primitive_bitwidth == 1:   # bool: summed as 0/1
        flags = x.to(tl.uint8)
        return tl.sum(tl.where(mask, flags, tl.zeros_like(flags)), dim, keep_dims=keep_dims) != 0
    if x.dtype.primitive_bitwidth == 64:
        bits = x.to(tl.uint64, bitcast=True)
    elif x.dtype.primitive_bitwidth == 32:
        bits = x.to(tl.uint32, bitcast=True)
    elif x.dtype.primitive_bitwidth == 16:
        bits = x.to(tl.uint16, bitcast=True)
    else:
        bits = x.to(tl.uint8, bitcast=True)
    picked = tl.sum(tl.where(mask, bits, tl.zeros_like(bits)), dim, keep_dims=keep_dims)
    return picked.to(bits.dtype).to(x.dtype, bitcast=True)
''', ()),
    "device_assert_then": ('''
@triton.jit
def device_assert_then(cond, msg: tl.constexpr, value):
    tl.device_assert(cond, msg)
    return value
''', ()),
}

#: ``libdevice.<name>`` functions written here (Triton's interpreter has no libdevice): the
#: standard identities, with the cancellation-free forms for small arguments (tanh through
#: exp(-2|x|); log1p and expm1 by Goldberg's and Kahan's corrections).
_LIBDEVICE: dict[str, tuple[str, tuple[str, ...]]] = {
    "libdevice_tanh": ('''
@triton.jit
def libdevice_tanh(x):
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0, -y, y)
''', ()),
    "libdevice_pow": ('''
@triton.jit
def libdevice_pow(x, y):
    # |x| ** y, negated for a negative base and an odd integer exponent; x ** 0 == 1
    magnitude = tl.exp2(y * tl.log2(tl.abs(x)))
    odd = (tl.floor(y) == y) & (tl.abs(y % 2.0) == 1.0)
    result = tl.where((x < 0) & odd, -magnitude, magnitude)
    return tl.where(y == 0, 1.0, result)
''', ()),
    "libdevice_isnan": ('''
@triton.jit
def libdevice_isnan(x):
    return x != x
''', ()),
    "libdevice_isinf": ('''
@triton.jit
def libdevice_isinf(x):
    return tl.abs(x) == float("inf")
''', ()),
    "libdevice_log1p": ('''
@triton.jit
def libdevice_log1p(x):
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * (x / (u - 1.0)))
''', ()),
    "libdevice_expm1": ('''
@triton.jit
def libdevice_expm1(x):
    u = tl.exp(x)
    return tl.where(u == 1.0, x, tl.where(u - 1.0 == -1.0, -1.0, (u - 1.0) * (x / tl.log(u))))
''', ()),
    "libdevice_trunc": ('''
@triton.jit
def libdevice_trunc(x):
    return tl.where(x >= 0, tl.floor(x), tl.ceil(x))
''', ()),
}
_H.update(_LIBDEVICE)

#: ``libdevice.<name>`` that ``triton.language`` has itself (lowered to the same libdevice call
#: on a GPU, and run by the interpreter).
LIBDEVICE_IN_TL: frozenset[str] = frozenset({
    "rsqrt", "sqrt", "exp", "exp2", "log", "log2", "sin", "cos", "erf", "floor", "ceil", "abs", "fma",
})

#: ``libdevice.<name>`` -> the helper above that replaces it.
LIBDEVICE_SHIMS: dict[str, str] = {n.removeprefix("libdevice_"): n for n in _LIBDEVICE}

#: Helper names a first version can define.
KNOWN: frozenset[str] = frozenset(_H)


def closure(names: set[str]) -> list[str]:
    """``names`` plus every helper they call, callees first (a definition order that works).
    Raises ``KeyError`` naming the first unknown helper."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name not in _H:
            raise KeyError(name)
        for dep in _H[name][1]:
            visit(dep)
        order.append(name)

    for n in sorted(names):
        visit(n)
    return order


def helpers_source(names: set[str]) -> str:
    """The ``@triton.jit`` definitions of ``names`` and their callees, in definition order.
    Raises ``KeyError`` naming an unknown helper."""
    return "\n".join(_H[n][0].strip() + "\n\n" for n in closure(names)).rstrip() + "\n"
