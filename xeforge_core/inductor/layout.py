"""The memory layout a first version's kernels were generated for, restored at each call.

Inductor's code asserts each input's sizes and strides (``assert_size_stride(arg, sizes,
strides)``) and its kernels index the input with those strides: a tensor of another layout (a
transposed view, a channels-last tensor where a contiguous one was traced) would be read as if
it had the traced one, and the answer would be silently wrong. The first version keeps no
assertion; it copies such an input into the layout its kernels index instead (:data:`HELPER`),
which costs nothing for an input already in that layout. Only strides of dimensions longer than
one are compared (a dimension of one element has no stride that matters).
"""

from __future__ import annotations

#: The host helper a first version calls for each input Inductor asserted the layout of.
HELPER = "as_layout"

HELPER_SOURCE = f'''
def {HELPER}(t, size, stride):
    """``t`` in the layout the kernels were generated for (``size``, ``stride``): ``t`` itself where
    its strides already are those (dimensions of one element aside), else a copy in that layout."""
    if all(n <= 1 or s == want for n, s, want in zip(t.shape, t.stride(), stride)):
        return t
    return torch.empty_strided(tuple(size), tuple(stride), dtype=t.dtype, device=t.device).copy_(t)
'''
