"""fusion codemod, part 5: materialised attention becomes one online-softmax kernel.

Three consecutive launches of a host function compute ``softmax(scale * Q K^T) V`` through
global memory:

1. a **score kernel** with one ``tl.dot`` whose operands are loaded from two pointer
   parameters (``Q`` then ``K``, both ``[..., S, D]``) stores ``dot`` or ``dot * scale`` (a
   scalar parameter or a literal) into a fresh allocation ``T`` (``[..., Sq, Sk]``);
2. a **row softmax kernel** reads ``T`` and writes the softmax of its rows into ``T`` (in
   place) or into another fresh allocation ``P``: it takes a row maximum, exponentials and a row
   sum, and has no ``tl.dot``, logarithm or random numbers;
3. a **P V kernel** with one ``tl.dot`` whose first operand is loaded from ``T`` (or ``P``) and
   whose second from a pointer parameter ``V`` stores into the output.

``T`` holds ``Sq x Sk`` scores per head: written once, read and written by the softmax, read
again by the P V kernel, a round trip through global memory that grows with the square of the
sequence. The rewrite replaces the three launches with one launch of an online-softmax kernel
(Milakov and Gimelshein, "Online normalizer calculation for softmax", 2018; Dao et al.,
"FlashAttention", 2022; the trajectory's step 1, ``sample_kernels/flash_attention_trajectory``):
each program holds a block of query rows, walks the keys block by block, keeps the running row
maximum and sum in registers and rescales its accumulator when the maximum grows, so the scores
never leave the chip (knowledge rule ``fuse_when_intermediate_disappears``). The dots take the
inputs' dtype with float32 accumulation, and float32 inputs stay IEEE float32 (no TF32). ``T``
(and ``P``) disappear when nothing else reads them.

What it does not follow, and says so: a score kernel that does more than scale the dot (a
causal or padding mask, a bias), a softmax kernel with a logarithm (log-softmax), random
numbers (dropout) or a scalar parameter applied to the scores (a temperature), a score buffer
read after the P V kernel. ``K`` stored transposed
(``[..., D, Sk]``) is refused when the launch runs (a clear ``ValueError``) rather than
guessed; the verifier then refuses the candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from xeforge_core.codemods.common import code_of, dotted_name, is_constexpr_param
from xeforge_core.codemods.fusion_chain import FusionError
from xeforge_core.codemods.host import (
    HostFacts,
    Launch,
    dead_allocations,
    drop_unused_assigns,
    fix_commas,
    host_facts,
    host_functions,
    launch_counts,
)
from xeforge_core.codemods.kernel_edit import (
    TL_LOAD,
    TL_STORE,
    Edits,
    assigned_names,
    call_arg,
    calls_named,
    insert_before_kernels,
    parse_expr,
    pointer_terms,
    read_names,
    walk,
)

TL_DOT = {"tl.dot", "triton.language.dot"}
_EXP = {"tl.exp", "tl.exp2", "tl.math.exp", "tl.math.exp2", "triton.language.exp", "triton.language.exp2"}
_MAX = {"tl.max", "triton.language.max"}
_SUM = {"tl.sum", "triton.language.sum"}
_REFUSED_IN_SOFTMAX = {"tl.log", "tl.log2", "tl.math.log", "tl.math.log2", "tl.rand", "tl.randn",
                       "triton.language.log", "triton.language.rand"}
#: The names the rewrite adds to the module.
KERNEL_NAME = "attention_online_softmax_kernel"
HELPER_NAME = "online_softmax_attention"

#: The fused kernel and its host helper. Tiles per head-dim class follow the H200's sweep of the
#: trajectory's plain loop (docs/measured/h200-fa-sweep-step10: 64 x 128 at head dim 64, 128 x 64
#: over 8 warps at 96 and 128); a head dim up to 256 takes 64 x 32 tiles to keep the accumulator
#: in registers; the autotuning stage may tune them further.
SOURCE = '''
@triton.jit
def attention_online_softmax_kernel(q_ptr, k_ptr, v_ptr, o_ptr, SQ, SK, D, qk_scale,
                                    sqb, sqs, sqd, skb, sks, skd, svb, svs, svd, sob, sos, sod,
                                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                                    IEEE: tl.constexpr):
    # one program: BLOCK_M query rows of one (batch, head); keys walked BLOCK_N at a time with the
    # running row maximum m_i and row sum l_i (online softmax, base 2: qk_scale holds log2(e))
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_ptr + bh * sqb + offs_m[:, None] * sqs + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < SQ) & d_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in range(0, SK, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_ok = offs_n < SK
        k = tl.load(k_ptr + bh * skb + offs_n[:, None] * sks + offs_d[None, :] * skd,
                    mask=n_ok[:, None] & d_ok, other=0.0)
        v = tl.load(v_ptr + bh * svb + offs_n[:, None] * svs + offs_d[None, :] * svd,
                    mask=n_ok[:, None] & d_ok, other=0.0)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(n_ok[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + bh * sob + offs_m[:, None] * sos + offs_d[None, :] * sod, out.to(o_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < SQ) & d_ok)


def online_softmax_attention(q, k, v, out, scale):
    """``out = softmax(scale * q @ k^T) @ v`` in one launch (online softmax): ``q`` and ``out``
    ``[..., Sq, D]``, ``k`` and ``v`` ``[..., Sk, D]`` with the same leading (batch, head) dims,
    float16, bfloat16 or float32; ``out`` is written in place and returned. Raises ValueError
    for shapes that are not those (a ``k`` stored transposed, ``[..., D, Sk]``, among them) or a
    head dim over 256."""
    d = q.shape[-1]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]) for t in (q, k, v))
    o3 = out.view(-1, out.shape[-2], out.shape[-1])
    if k3.shape[2] != d or v3.shape[2] != d or k3.shape[:2] != v3.shape[:2] or q3.shape[0] != k3.shape[0] \\
            or o3.shape != q3.shape:
        raise ValueError(f"online_softmax_attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, "
                         f"out {tuple(out.shape)} are not q/out [..., Sq, D] and k/v [..., Sk, D]")
    if d > 256:
        raise ValueError(f"online_softmax_attention: head dim {d} is over 256")
    bh, sq, _ = q3.shape
    block_d = max(16, triton.next_power_of_2(d))
    block_m, block_n, warps = (64, 128, 4) if block_d <= 64 else (128, 64, 8) if block_d <= 128 else (64, 32, 4)
    grid = (triton.cdiv(sq, block_m), bh)
    attention_online_softmax_kernel[grid](
        q3, k3, v3, o3, sq, k3.shape[1], d, float(scale) * 1.4426950408889634,
        *q3.stride(), *k3.stride(), *v3.stride(), *o3.stride(),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, IEEE=q.dtype == torch.float32, num_warps=warps)
    return out
'''


@dataclass
class _Plan:
    q: str
    k: str
    v: str
    out: str
    scale: str
    temps: list[str]


@dataclass
class _Kernel:
    """What the rewrite reads of one kernel, gathered once: ``values`` maps each name to every
    value ``=`` assigns it (``p += step`` moves a pointer along without changing its base),
    ``defs`` the names assigned exactly once to that value, ``names`` the runtime parameters and
    ``ptrs`` those that are the base of a load's or store's address."""

    fn: cst.FunctionDef
    values: dict[str, list[cst.BaseExpression]]
    defs: dict[str, cst.BaseExpression]
    names: set[str]
    ptrs: set[str]


def _kernel(fn: cst.FunctionDef) -> _Kernel:
    values: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(fn.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            values.setdefault(node.targets[0].target.value, []).append(node.value)
    counts: dict[str, int] = {}
    for n in assigned_names(fn.body):
        counts[n] = counts.get(n, 0) + 1
    defs = {n: vs[0] for n, vs in values.items() if counts.get(n) == 1}
    names = {p.name.value for p in fn.params.params if not is_constexpr_param(p)}
    ptrs: set[str] = set()
    for call in calls_named(fn, TL_LOAD | TL_STORE):
        addr = call_arg(call, 0, "pointer")
        if addr is not None:
            ptrs |= _bases(addr, values, names)
    return _Kernel(fn, values, defs, names, ptrs)


def _bases(addr: cst.BaseExpression, values: dict[str, list[cst.BaseExpression]], among: set[str],
           depth: int = 8) -> set[str]:
    """The parameters of ``among`` that are a term of the address sum ``addr`` (through the
    names' assignments): the pointers it offsets."""
    out: set[str] = set()
    for term in pointer_terms(addr):
        if isinstance(term, cst.Name):
            if term.value in among:
                out.add(term.value)
            elif depth:
                for v in values.get(term.value, []):
                    out |= _bases(v, values, among, depth - 1)
    return out


def _value_params(k: _Kernel) -> set[str]:
    """The runtime scalar parameters of the kernel that reach a value rather than only
    addresses, masks and loop bounds (a temperature or a shift inside a softmax)."""
    sized: set[str] = set()
    for call in calls_named(k.fn, TL_LOAD | TL_STORE):
        for pos, key in ((0, "pointer"), (2, "mask")):
            arg = call_arg(call, pos, key)
            if arg is not None:
                sized |= read_names(arg)
    for node in walk(k.fn.body):
        if isinstance(node, cst.For):
            sized |= read_names(node.iter)
        elif isinstance(node, cst.Comparison):
            sized |= read_names(node)
    changed = True
    while changed:  # names defined from sizes (offsets, row bases) are sizes too
        changed = False
        for name, vals in k.values.items():
            if name in sized:
                new = set().union(*(read_names(v) for v in vals)) - sized
                if new:
                    sized |= new
                    changed = True
    return (k.names - k.ptrs) - sized


def _loaded_from(expr: cst.CSTNode, k: _Kernel, depth: int = 8) -> set[str]:
    """The pointer parameters whose loads feed ``expr`` (through the names' assignments)."""
    out: set[str] = set()
    for call in calls_named(expr, TL_LOAD):
        addr = call_arg(call, 0, "pointer")
        if addr is not None:
            out |= _bases(addr, k.values, k.ptrs)
    if depth:
        for name in read_names(expr):
            for v in k.values.get(name, []):
                out |= _loaded_from(v, k, depth - 1)
    return out


def _one_dot(fn: cst.FunctionDef, role: str) -> cst.Call:
    dots = calls_named(fn, TL_DOT)
    if len(dots) != 1:
        raise FusionError(f"the {role} kernel {fn.name.value} has {len(dots)} tl.dot calls, not one")
    return dots[0]


def _stores(k: _Kernel) -> list[tuple[str, cst.Call]]:
    out = []
    for call in calls_named(k.fn, TL_STORE):
        addr = call_arg(call, 0, "pointer")
        hit = _bases(addr, k.values, k.ptrs) if addr is not None else set()
        if len(hit) != 1:
            raise FusionError(f"kernel {k.fn.name.value}: a store's address offsets {len(hit)} pointer parameters")
        out.append((hit.pop(), call))
    return out


def _strip_to(expr: cst.BaseExpression) -> cst.BaseExpression:
    while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "to"):
        expr = expr.func.value
    return expr


def _scale_of(k: _Kernel, dot: cst.Call, stored: cst.BaseExpression, launch: Launch) -> str:
    """The host expression of the factor the score kernel multiplies its dot by (``1.0`` for
    none); raises :class:`FusionError` when the stored value is anything else."""
    fn, defs = k.fn, k.defs
    value = _strip_to(stored)
    for _ in range(8):
        if isinstance(value, cst.Name) and value.value in defs:
            value = _strip_to(defs[value.value])
        else:
            break

    def is_dot(e: cst.BaseExpression) -> bool:
        e = _strip_to(e)
        if e is dot or (isinstance(e, cst.Call) and dotted_name(e.func) in TL_DOT):
            return True
        if isinstance(e, cst.Name):  # an accumulator: every assignment to it adds the dot or zeroes it
            if e.value in defs:
                return is_dot(defs[e.value])
            return any(dot in calls_named(n, TL_DOT) for n in walk(fn.body)
                       if isinstance(n, (cst.AugAssign, cst.Assign)) and e.value in assigned_names(n))
        return False

    if is_dot(value):
        return "1.0"
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        for a, b in ((value.left, value.right), (value.right, value.left)):
            if not is_dot(a):
                continue
            if isinstance(b, (cst.Float, cst.Integer)):
                return b.value
            if isinstance(b, cst.Name) and b.value in launch.bound:
                arg = launch.bound[b.value].value
                return code_of(arg) if isinstance(arg, (cst.Name, cst.Attribute, cst.Float)) else f"({code_of(arg)})"
    raise FusionError(f"the score kernel {fn.name.value} stores `{code_of(stored)}`, not its tl.dot times a scale "
                      "(a mask, bias or other epilogue is not followed)")


def _bound_name(launch: Launch, param: str, facts: HostFacts) -> str | None:
    a = launch.bound.get(param)
    if a is not None and isinstance(a.value, cst.Name):
        return facts.root(a.value.value)
    return None


def _plan(facts: HostFacts, a: Launch, b: Launch, c: Launch, kernels: dict[str, cst.FunctionDef]) -> _Plan:
    ka, kb, kc = kernels[a.kernel], kernels[b.kernel], kernels[c.kernel]
    # 1. the score kernel: one dot of two loaded pointer params, stored into a fresh allocation
    dot = _one_dot(ka, "score")
    fa, fb, fc = _kernel(ka), _kernel(kb), _kernel(kc)
    ops = [call_arg(dot, 0, "input"), call_arg(dot, 1, "other")]
    if any(o is None for o in ops):
        raise FusionError(f"the score kernel {ka.name.value}'s tl.dot does not name both operands")
    src = [_loaded_from(o, fa) for o in ops]  # type: ignore[arg-type]
    if any(len(s) != 1 for s in src) or src[0] == src[1]:
        raise FusionError(f"the score kernel {ka.name.value}'s tl.dot operands are not loads of two pointer parameters")
    q_param, k_param = src[0].pop(), src[1].pop()
    stores = _stores(fa)
    if len(stores) != 1:
        raise FusionError(f"the score kernel {ka.name.value} has {len(stores)} stores, not one")
    t_param, t_store = stores[0]
    scores = _bound_name(a, t_param, facts)
    if scores is None or scores not in facts.allocs:
        raise FusionError(f"the score kernel {ka.name.value} does not store into a fresh allocation")
    value = call_arg(t_store, 1, "value")
    scale = _scale_of(fa, dot, value, a)  # type: ignore[arg-type]
    # 2. the row softmax: reads the scores, writes them (or P) back
    found = {dotted_name(c_.func) for c_ in calls_named(kb, _EXP | _MAX | _SUM | _REFUSED_IN_SOFTMAX | TL_DOT)}
    if not (found & _EXP and found & _MAX and found & _SUM):
        raise FusionError(f"kernel {kb.name.value} is not a row softmax (no row maximum, exponential and row sum)")
    if found & (_REFUSED_IN_SOFTMAX | TL_DOT):
        raise FusionError(f"kernel {kb.name.value} has {', '.join(sorted(found & (_REFUSED_IN_SOFTMAX | TL_DOT)))}: "
                          "not a plain softmax")
    extra = _value_params(fb)
    if extra:
        raise FusionError(f"kernel {kb.name.value} applies {', '.join(sorted(extra))} to the scores, not a plain softmax")
    read_b = {_bound_name(b, p, facts) for p in fb.ptrs} - {None}
    stores_b = {_bound_name(b, p, facts) for p, _ in _stores(fb)}
    if scores not in read_b or len(stores_b) != 1 or None in stores_b:
        raise FusionError(f"kernel {kb.name.value} does not read {scores} and write one buffer")
    probs = stores_b.pop()
    if probs not in facts.allocs or not read_b <= {scores, probs}:
        raise FusionError(f"kernel {kb.name.value} reads or writes more than the score buffer")
    # 3. P V: one dot of the probabilities and a loaded V, stored into the output
    dot_c = _one_dot(kc, "P V")
    ops_c = [call_arg(dot_c, 0, "input"), call_arg(dot_c, 1, "other")]
    src_c = [_loaded_from(o, fc) if o is not None else set() for o in ops_c]
    if len(src_c[0]) != 1 or len(src_c[1]) != 1 or _bound_name(c, next(iter(src_c[0])), facts) != probs:
        raise FusionError(f"kernel {kc.name.value}'s tl.dot is not the probabilities times a loaded V")
    v_param = src_c[1].pop()
    stores_c = _stores(fc)
    if len(stores_c) != 1:
        raise FusionError(f"the P V kernel {kc.name.value} has {len(stores_c)} stores, not one")
    out_param = stores_c[0][0]
    temps = sorted({scores, probs})
    skip = {a.index, b.index, c.index}
    for t in temps:
        if facts.reads_outside(t, skip, data_only=True):
            raise FusionError(f"{t} is read outside the three launches; it has to stay in global memory")
    exprs = {"q": a.arg_text(q_param), "k": a.arg_text(k_param), "v": c.arg_text(v_param), "out": c.arg_text(out_param)}
    if any(e is None for e in exprs.values()):
        raise FusionError("a launch passes its tensors by keyword the rewrite cannot bind")
    reads = set().union(*(read_names(parse_expr(e)) for e in (exprs["q"], exprs["k"], scale)))  # type: ignore[arg-type]
    between = [s for s in facts.body[a.index + 1:c.index]]
    moved = reads & {n for s in between for n in assigned_names(s)}
    if moved:
        raise FusionError(f"{', '.join(sorted(moved))} is assigned between the score and the P V launch")
    return _Plan(q=exprs["q"], k=exprs["k"], v=exprs["v"], out=exprs["out"], scale=scale, temps=temps)  # type: ignore[arg-type]


def attention_step(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> tuple[cst.Module, list[str]] | str:
    """One materialised-attention fusion (module docstring) in ``module``, or the reasons none
    applies."""
    reasons: list[str] = []
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        ls = facts.launches
        for a, b, c in zip(ls, ls[1:], ls[2:]):
            if not (calls_named(kernels[a.kernel], TL_DOT) and calls_named(kernels[c.kernel], TL_DOT)):
                continue
            names = f"{a.kernel} -> {b.kernel} -> {c.kernel}"
            try:
                plan = _plan(facts, a, b, c, kernels)
            except FusionError as exc:
                reasons.append(f"{names}: {exc}")
                continue
            call = parse_expr(f"{HELPER_NAME}({plan.q}, {plan.k}, {plan.v}, {plan.out}, {plan.scale})")
            edits = {id(a.stmt): cst.RemoveFromParent(), id(b.stmt): cst.RemoveFromParent(),
                     id(c.stmt): c.stmt.with_changes(body=[cst.Expr(call)])}
            edits.update(dead_allocations(facts, plan.temps, {id(a.stmt), id(b.stmt), id(c.stmt)}))
            counts = launch_counts(module, kernels)
            drop = {lc.kernel for lc in (a, b, c) if counts.get(lc.kernel, 0) <= 1}
            body = [s for s in module.body if not (isinstance(s, cst.FunctionDef) and s.name.value in drop)]
            module = module.with_changes(body=body).visit(Edits(statements=edits))
            launch_reads = set().union(*(read_names(lc.stmt) for lc in (a, b, c)))
            module = drop_unused_assigns(fix_commas(module), launch_reads)
            module = insert_before_kernels(module, SOURCE, KERNEL_NAME)
            note = (f"fused {names} into {KERNEL_NAME} (online softmax): the {', '.join(plan.temps)} score buffer "
                    f"no longer goes through global memory; scale {plan.scale}")
            return module, [note]
    return "; ".join(reasons) or "no score, softmax and P V launches in a row"
