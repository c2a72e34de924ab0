"""The float64-calibrated check's parts, in process on small tensors: the truth in float64 and
its error scale, the bound (correct orders pass, emulated TF32 / float16 / bfloat16 arithmetic
does not, unless allowed), the first wrong element's coordinates, KernelBench's tolerance
beside it, the lower-precision evidence read from a kernel's source, and the allowance names."""

from __future__ import annotations

import ast
import contextlib

import pytest
import torch

from xeforge_core.precision import (
    DOWNGRADES,
    K_ACCUMULATED,
    K_OPERANDS,
    K_ROUNDED,
    PrecisionError,
    PrecisionPolicy,
    allowance_terms,
    own_factor,
    parse_allowances,
    precision_lines,
)
from xeforge_core.verdict import CorrectnessRun
from xeforge_core.worker.calibrated import Truth64, unravel
from xeforge_core.worker.compare import Tolerance, compare_outputs
from xeforge_core.worker.precision_hints import precision_hints
from xeforge_core.worker.precision_report import advice, summary
from xeforge_core.worker.truth64 import Float64Truth, Unavailable


class _Harness:
    """The two calls ``Float64Truth`` makes of a ``roles.Harness``, on the cpu."""

    def __init__(self, args):
        self.args = args

    def inputs_for(self, combo):
        return [a.clone() for a in self.args]

    def run(self, model, args, *, trace=None, during=""):
        with torch.no_grad(), (trace if trace is not None else contextlib.nullcontext()):
            out = model(*args)
        return list(out) if isinstance(out, tuple) else [out]


class _Combo:
    vname, seed = "ci", 0

    def describe(self):
        return "variant ci"


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def calibrated(model, args):
    """The truth's outputs, their float64 truths (:class:`Truth64` per output) and the info."""
    outputs = _Harness(args).run(model, [a.clone() for a in args])
    devs, sens, drifts, info = Float64Truth(_Harness(args), torch.device("cpu")).calibrate(model, _Combo(), outputs)
    t64 = [Truth64(d, s, st["ref_rms_error"], st["sigma_rms"], g) if d is not None else None
           for d, s, st, g in zip(devs, sens, info["outputs"], drifts)]
    return outputs, t64, info


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` rounded to ``bits`` explicit mantissa bits (TF32: 10), as the hardware rounds operands."""
    m, e = torch.frexp(x)
    scale = 2.0 ** (bits + 1)
    return torch.ldexp(torch.round(m * scale) / scale, e)


@pytest.fixture(scope="module")
def gemm():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(40, 512, generator=g), torch.randn(512, 48, generator=g)
    outputs, t64, info = calibrated(MatMul(), [a, b])
    return a, b, outputs, t64, info


def judge(candidate, gemm, **kw):
    a, b, outputs, cal, _ = gemm
    ok, comps, _, note = compare_outputs([candidate], outputs, Tolerance(), calibration=cal, **kw)
    return ok, comps[0]


def test_the_truth_in_float64_saves_a_deviation_and_a_sensitivity(gemm):
    a, b, (r,), (t64,), info = gemm
    d, sigma = t64.deviation, t64.sensitivity
    assert d.dtype == sigma.dtype == torch.float32 and d.shape == sigma.shape == r.shape
    t = a.double() @ b.double()
    assert torch.allclose(r.double() + d.double(), t, rtol=0, atol=1e-9)  # t rebuilt from r and d
    # one unit roundoff on every input moves a dot product of 512 terms by about u * ||a_i * b_j||
    expected = 2.0 ** -24 * ((a.double() ** 2) @ (b.double() ** 2)).sqrt() * 2 ** 0.5
    assert 0.3 < t64.sensitivity_rms / float(expected.pow(2).mean().sqrt()) < 3
    assert info["dtype"] == "float32" and 0 < info["outputs"][0]["ref_rel_error"] < 1e-6
    assert t64.ref_rms == pytest.approx(float(d.double().pow(2).mean().sqrt()), rel=1e-6)


def test_other_summation_orders_pass_and_coarser_arithmetic_does_not(gemm):
    a, b, *_ = gemm
    blocked = sum(a[:, k:k + 32] @ b[k:k + 32] for k in range(0, 512, 32))
    sequential = torch.zeros(40, 48)
    for k in range(512):
        sequential += a[:, k:k + 1] * b[k:k + 1]
    for correct in (blocked, sequential):
        ok, comp = judge(correct, gemm)
        assert ok and comp.check == "float64" and comp.error_ratio < K_ACCUMULATED / 4
    tf32 = round_mantissa(a, 10) @ round_mantissa(b, 10)
    ok, comp = judge(tf32, gemm)
    assert not ok and comp.error_ratio > 1000 and comp.needs[:3] == ["tf32", "fp16", "approx-math"]
    assert judge(tf32, gemm, hints=("fp16-accumulation",))[1].needs[0] == "fp16-accumulation"
    ok, comp = judge(tf32, gemm, allowed=("tf32",))
    assert ok and comp.needs[:1] == ["tf32"]  # the user's opt-in accepts it, and the verdict says which
    bf16 = a.bfloat16().float() @ b.bfloat16().float()
    ok, comp = judge(bf16, gemm, allowed=("tf32",))
    assert not ok and comp.needs[0] == "bf16"  # a coarser downgrade than the one allowed
    assert comp.kernelbench_tol == 1e-4 and comp.kernelbench_mismatches > 0


def truncate_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` with its float32 mantissa cut to ``bits`` explicit bits (toward zero), as Hopper's
    wgmma reads TF32 operands from float32 bit patterns."""
    return (x.view(torch.int32) & ~((1 << (23 - bits)) - 1)).view(torch.float32)


def test_tf32_operands_cut_toward_zero_are_tf32_and_a_wrong_operand_still_is_not():
    """On positive inputs (KernelBench's ``torch.rand``) cut TF32 operands move every product the
    same way: 6.5e-4 of the result, 40 times what rounding gives. The drift under a shrink of
    every input measures that scale, so ``--allow tf32`` accepts it and the verdict names it;
    a loss whose products barely move it keeps refusing a 0.1% wrong operand with TF32 allowed."""
    g = torch.Generator().manual_seed(1)
    a, b = torch.rand(40, 512, generator=g), torch.rand(512, 48, generator=g)
    outputs, t64, info = calibrated(MatMul(), [a, b])
    assert info["outputs"][0]["drift_rms"] > 0 and t64[0].drift is not None
    exact = a.double() @ b.double()
    # a GEMM is of degree two in its inputs: shrinking all of them by u moves it by 2u |t|
    assert torch.allclose(t64[0].drift.double(), 2 * 2.0 ** -24 * exact.abs(), rtol=1e-3)
    cut = truncate_mantissa(a, 10) @ truncate_mantissa(b, 10)
    assert 4e-4 < float((cut.double() - exact).norm() / exact.norm()) < 1e-3
    ok, comps, _, _ = compare_outputs([cut], outputs, Tolerance(), calibration=t64)
    assert not ok and comps[0].needs[0] == "tf32"
    assert compare_outputs([cut], outputs, Tolerance(), calibration=t64, allowed=("tf32",))[0]
    no_drift = [Truth64(t.deviation, t.sensitivity, t.ref_rms, t.sensitivity_rms) for t in t64]
    assert not compare_outputs([cut], outputs, Tolerance(), calibration=no_drift, allowed=("tf32",))[0]
    p, t = torch.randn(256, generator=g), torch.randn(256, generator=g)
    loss = type("Loss", (torch.nn.Module,), {"forward": lambda self, p, t: torch.sum(1.0 + 0.001 * p * t)})()
    outputs, t64, _ = calibrated(loss, [p, t])
    wrong = [torch.sum(1.0 + 0.001 * p * p)]
    assert not compare_outputs(wrong, outputs, Tolerance(), calibration=t64, allowed=("tf32",))[0]


def test_a_wrong_element_is_found_by_its_coordinates_and_not_called_a_precision_change(gemm):
    *_, (r,), _, _ = gemm
    wrong = r.clone()
    wrong[3, 7] += 0.5
    ok, comp = judge(wrong, gemm)
    assert not ok and comp.mismatches == 1 and comp.first_mismatch == [3, 7]
    assert comp.first_actual == pytest.approx(float(r[3, 7]) + 0.5, rel=1e-6)
    assert "first at [3, 7]" in comp.note
    run = CorrectnessRun("ci", 0, "normal", "reference", False, 0.0, 0.0, outputs=[comp])
    assert advice(run, {}, PrecisionPolicy()) == ""  # one element: a wrong answer, not precision
    ok, flipped = judge(-r, gemm)  # wrong everywhere, but no coarser arithmetic explains it
    assert not ok and flipped.mismatches > r.numel() / 2
    assert advice(CorrectnessRun("ci", 0, "normal", "reference", False, 0.0, 0.0, outputs=[flipped]), {},
                  PrecisionPolicy()) == ""
    a, b, *_ = gemm
    ok, tf32 = judge(round_mantissa(a, 10) @ round_mantissa(b, 10), gemm)
    said = advice(CorrectnessRun("ci", 0, "normal", "reference", False, 0.0, 0.0, outputs=[tf32]),
                  {"tf32": ["kernel mm, line 9: tl.dot in TF32 (no input_precision (Triton's default))"]},
                  PrecisionPolicy())
    assert "precision change: TF32 dot products (float32 operands multiplied with a 10-bit mantissa) (kernel mm, line 9" in said
    assert said.endswith("pass --allow tf32 (spec: allow: [tf32]; workbench: allowed precision)")
    # a second output of the same run wrong at one element: no allowance passes the run, none offered
    second = type(comp)(**{**comp.__dict__, "index": 1})
    both = CorrectnessRun("ci", 0, "normal", "reference", False, 0.0, 0.0, outputs=[tf32, second])
    assert advice(both, {"tf32": ["kernel mm, line 9: tl.dot in TF32"]}, PrecisionPolicy()) == ""
    ok, comps, _, _ = compare_outputs([wrong], [r], Tolerance(rtol=1e-3, atol=1e-3, explicit=True))
    assert comps[0].check == "tolerance" and comps[0].first_mismatch == [3, 7]
    assert unravel(3 * 48 + 7, [40, 48]) == [3, 7] and unravel(0, []) == [] and unravel(29, [2, 3, 5]) == [1, 2, 4]


def test_explicit_tolerances_decide_and_the_float64_measurements_are_still_reported(gemm):
    a, b, *_ = gemm
    tf32 = round_mantissa(a, 10) @ round_mantissa(b, 10)
    ok, comp = judge(tf32, gemm)
    assert not ok
    a_, b_, outputs, t64, _ = gemm
    ok, comps, _, _ = compare_outputs([tf32], outputs, Tolerance(rtol=0.1, atol=0.1, explicit=True), calibration=t64)
    assert ok and comps[0].check == "tolerance" and comps[0].error_ratio > 1000


def test_nan_and_inf_positions_follow_the_truths_own_output():
    x = torch.tensor([1.0, 0.0, -1.0, 2.0])
    outputs, t64, _ = calibrated(type("Log", (torch.nn.Module,), {"forward": lambda self, v: torch.log(v)})(), [x])
    (r,) = outputs
    assert torch.isnan(r[2]) and torch.isinf(r[1])
    ok, comps, _, _ = compare_outputs([r.clone()], outputs, Tolerance(), calibration=t64)
    assert ok
    moved = r.clone()
    moved[2] = 0.0
    ok, comps, _, _ = compare_outputs([moved], outputs, Tolerance(), calibration=t64)
    assert not ok and comps[0].nan_mismatch == 1 and comps[0].first_mismatch == [2]


def test_a_reference_that_hard_codes_a_half_precision_is_unavailable_and_says_where():
    class Through16(torch.nn.Module):
        def forward(self, a):
            return (a.half() * 2).float()

    with pytest.raises(Unavailable, match="computes in float16 .*aten._to_copy"):
        calibrated(Through16(), [torch.randn(8)])

    class Upcast(torch.nn.Module):  # a float32 named by the reference is a floor: computed in float64
        def forward(self, a):
            return (a.double() * 2).float()

    outputs, t64, _ = calibrated(Upcast(), [torch.randn(8)])
    assert t64[0] is not None

    class Remainder(torch.nn.Module):  # float32's rounding is what it computes: no float64 truth
        def forward(self, a, b):
            p = a.double() * b.double()
            return (p - p.float().double()).float() * 1e7

    with pytest.raises(Unavailable, match="another function: its own output 0 is infinitely far beyond"):
        calibrated(Remainder(), [torch.randn(64), torch.randn(64)])

    class Exponents(torch.nn.Module):  # its bits are another number's in float64
        def forward(self, a):
            return ((a.float().view(torch.int32) >> 23) & 255).float()

    with pytest.raises(Unavailable, match="reads the bits of a floating-point tensor as int32"):
        calibrated(Exponents(), [torch.randn(8)])

    class Twice(torch.nn.Module):
        def forward(self, a):
            return a * 2, torch.arange(4)

    outputs, t64, _ = calibrated(Twice(), [torch.randn(8)])
    assert t64[0] is not None and t64[1] is None  # integer outputs are compared exactly, as before


def test_float16_problems_are_judged_relative_to_their_own_dtype():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(32, 256, generator=g).half(), (torch.randn(256, 24, generator=g) / 16).half()
    outputs, t64, info = calibrated(MatMul(), [a, b])
    assert info["dtype"] == "float16"
    fp32_accumulated = (a.float() @ b.float()).half()
    ok, comps, _, _ = compare_outputs([fp32_accumulated], outputs, Tolerance(), calibration=t64)
    assert ok and comps[0].bound_factor == K_ROUNDED and comps[0].kernelbench_tol == 1e-2


def test_the_factors_and_the_terms_each_downgrade_adds():
    assert own_factor("float32") == K_ACCUMULATED and own_factor("bfloat16") == K_ROUNDED
    assert own_factor("float64") is None and own_factor("int32") is None
    # TF32 keeps a float32 output, and its operands may be cut toward zero: twice its unit roundoff
    assert allowance_terms("float32", ("tf32",)) == [(K_OPERANDS * 2 ** 13, 2.0 ** -24, 2.0 * 2 ** 13)]
    assert allowance_terms("float32", ("fp16",)) == [(K_OPERANDS * 2 ** 13, 2.0 ** -11, 0.0)]
    assert allowance_terms("float32", ("bf16-accumulation",)) == [(K_ACCUMULATED * 2 ** 16, 2.0 ** -8, 0.0)]
    assert allowance_terms("float16", ("fp16-accumulation",)) == [(K_ACCUMULATED, 2.0 ** -11, 0.0)]
    assert allowance_terms("float16", ("tf32", "fp16")) == []  # no coarser than float16 itself
    assert allowance_terms("float64", ("tf32",)) == []


def test_allowing_tf32_does_not_excuse_a_wrong_constant_the_operands_barely_move():
    g = torch.Generator().manual_seed(2)
    p, t = torch.randn(256, generator=g), torch.randn(256, generator=g)
    loss = type("Loss", (torch.nn.Module,), {"forward": lambda self, p, t: torch.sum(1.0 + 0.001 * p * t)})()
    outputs, t64, _ = calibrated(loss, [p, t])
    wrong = [torch.sum(1.0 + 0.001 * p * p)]  # a wrong operand: about 0.1% of the total
    for allowed in ((), ("tf32",), ("approx-math",)):
        ok, comps, _, _ = compare_outputs(wrong, outputs, Tolerance(), calibration=t64, allowed=allowed)
        assert not ok and comps[0].first_mismatch == []


def test_allowance_names_are_checked_with_the_nearest_valid_one():
    assert parse_allowances("fp16, tf32") == ("tf32", "fp16")
    assert parse_allowances(["approx-math", "tf32", "tf32"]) == ("tf32", "approx-math")
    assert parse_allowances("bf16-accumulation,fp16-accumulation,bf16") == ("bf16", "fp16-accumulation",
                                                                            "bf16-accumulation")
    with pytest.raises(PrecisionError, match="did you mean 'fp16-accumulation'") as exc:
        parse_allowances(["tf32", "fp16-accumulate"], where="allow")
    assert exc.value.field == "allow[1]"
    # a name cut short means the one it begins, not the nearest by letters ("fp16")
    with pytest.raises(PrecisionError, match="did you mean 'fp16-accumulation'"):
        parse_allowances("fp16-acc")
    policy = PrecisionPolicy(("tf32",), ("fp16",))
    assert policy.allowed == ("tf32", "fp16")
    assert policy.describe("float32") == "float32, allowing tf32 (--allow), fp16 (spec)"
    assert PrecisionPolicy.from_data(policy.to_data()) == policy
    assert list(DOWNGRADES) == ["tf32", "fp16", "approx-math", "bf16", "fp16-accumulation", "bf16-accumulation"]


def test_precision_lines_say_what_applied_and_what_kernelbench_would_say(gemm):
    a, b, *_ = gemm
    ok, comp = judge(round_mantissa(a, 10) @ round_mantissa(b, 10), gemm)
    run = CorrectnessRun("ci", 0, "normal", "reference", ok, 0.0, 0.0, outputs=[comp], check="float64",
                         kernelbench=False)
    record = summary([run], PrecisionPolicy(), {"dtype": "float32", "fallback": ""})
    lines = precision_lines(record)
    assert lines[0].startswith("precision: float32; judged against the float64 truth (errors up to 512x")
    assert "KernelBench's tolerance (atol = rtol = 0.0001 for float32): would fail on 1 of 1 run(s)" in lines
    fallback = precision_lines(dict(record, fallback="the truth is the Triton baseline"))
    assert fallback[0] == "precision: float32; judged with tolerances: the truth is the Triton baseline"
    assert precision_lines({}) == []
    exact = precision_lines(dict(record, error_ratio=0.0))  # no error beyond the truth's rounding floor
    assert any("every element within rounding of the truth (2u|t|; 0x" in line for line in exact), exact
    # explicit tolerances decide, and the line says so (not "judged against the float64 truth")
    import dataclasses

    explicit = CorrectnessRun("ci", 0, "normal", "reference", True, 0.01, 0.5,
                              outputs=[dataclasses.replace(comp, check="tolerance")], check="tolerance")
    told = precision_lines(summary([explicit], PrecisionPolicy(), {"dtype": "float32", "fallback": ""}))
    assert told[0] == ("precision: float32; judged with the explicit tolerances (rtol 0.01, atol 0.5: --rtol/--atol or "
                       "the spec's rtol/atol), not the float64-calibrated bound, which is measured beside them")


KERNEL = '''
import torch
import triton
import triton.language as tl

@triton.jit
def k(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float16)
    a = tl.load(a_ptr + tl.arange(0, BLOCK))
    s = tl.cumsum(a.to(tl.bfloat16), axis=0)
    acc += tl.dot(a, a)
    e = tl.extra.cuda.libdevice.fast_expf(a)
    h = a.to(tl.float16)
    t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [a], dtype=tl.float32, is_pure=True, pack=1)

def helper(x):
    return x.half()
'''


def test_lower_precision_is_read_from_the_kernel_source_with_module_lines():
    hints = precision_hints(ast.parse(KERNEL), {"k"}, "float32")
    line = {n: int(v[0].split("line ")[1].split(":")[0]) for n, v in hints.items()}
    src = KERNEL.splitlines()
    assert "tl.zeros" in src[line["fp16-accumulation"] - 1]
    assert "cumsum" in src[line["bf16-accumulation"] - 1]
    assert "tl.dot" in src[line["tf32"] - 1] and "Triton's default" in hints["tf32"][0]
    assert "a.to(tl.float16)" in src[line["fp16"] - 1] and hints["fp16"][0].startswith("kernel k, line")
    assert any("fast_expf" in h for h in hints["approx-math"]) and any(".approx" in h for h in hints["approx-math"])
    assert any(h.startswith("host code") and "half" in h for h in hints["fp16"])
    assert "fp16" not in precision_hints(ast.parse(KERNEL), {"k"}, "float16")  # its own dtype
    # a dtype only named in host code converts nothing (trident's torch-to-Triton dtype table, a
    # comparison); an allocation or a .to() through a name assigned the dtype does
    table = KERNEL.replace("    return x.half()", "    return {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16}[x]"
                           " if x != torch.float16 else None")
    assert not {"fp16", "bf16"} & set(n for n, v in precision_hints(ast.parse(table), {"k"}, "float32").items()
                                      if any(h.startswith("host code") for h in v))
    named = KERNEL.replace("    return x.half()", "    low = torch.bfloat16\n    return torch.empty(4, dtype=low), x.to(low)")
    assert sum(h.startswith("host code") for h in precision_hints(ast.parse(named), {"k"}, "float32")["bf16"]) == 2
    either = KERNEL.replace("    return x.half()", "    dt = torch.bfloat16 if x.numel() > 16 else torch.float32\n"
                            "    return x.to(dt)")
    assert any(h.startswith("host code") for h in precision_hints(ast.parse(either), {"k"}, "float32")["bf16"])
    assert precision_hints(ast.parse(KERNEL), {"k"}, None) == {}
    # a block of that dtype nothing adds into is no accumulator (a zero fill of a bfloat16 output)
    fill = KERNEL.replace("    acc += tl.dot(a, a)\n", "    tl.store(c_ptr, acc)\n")
    hints = precision_hints(ast.parse(fill), {"k"}, "float32")
    assert "fp16-accumulation" not in hints and any("line 8:" in h for h in hints["fp16"])
    # an accumulator carried through tl.dot's third operand is one
    chained = KERNEL.replace("acc += tl.dot(a, a)", "acc = tl.dot(a, a, acc.to(tl.float32)).to(tl.float16)")
    assert "fp16-accumulation" in precision_hints(ast.parse(chained), {"k"}, "float32")
    # ... and one a helper carries (acc, m = inner(acc, m)); a running max or a select is not, nor
    # a sum of values cast back to float32
    helper = KERNEL.replace("acc += tl.dot(a, a)", "acc, m = inner(acc, a)")
    assert "fp16-accumulation" in precision_hints(ast.parse(helper), {"k"}, "float32")
    for update in ("acc = tl.maximum(acc, a)", "acc = tl.where(a > 0, a, acc)"):
        assert "fp16-accumulation" not in precision_hints(ast.parse(KERNEL.replace("acc += tl.dot(a, a)", update)),
                                                          {"k"}, "float32")
    back = KERNEL.replace("tl.cumsum(a.to(tl.bfloat16), axis=0)", "tl.cumsum(a.to(tl.bfloat16).to(tl.float32), axis=0)")
    assert "bf16-accumulation" not in precision_hints(ast.parse(back), {"k"}, "float32")


def test_an_allowance_does_not_vouch_for_an_accumulator_it_does_not_allow(gemm):
    """Over two tiles of K a float16 accumulator errs like TF32 products: the TF32 allowance would
    accept it, so where the source keeps an accumulator that is not allowed, an output that needs
    an allowance fails, and what it needs next is named."""
    a, b, *_ = gemm
    fp16_acc = torch.zeros(40, 48, dtype=torch.float16)
    for k in range(0, 512, 256):  # two tiles of 256
        fp16_acc = (fp16_acc.float() + a[:, k:k + 256] @ b[k:k + 256]).half()
    ok, comp = judge(fp16_acc.float(), gemm, allowed=("tf32",))
    assert ok  # what the allowance alone would say
    ok, comp = judge(fp16_acc.float(), gemm, allowed=("tf32",), hints=("tf32", "fp16-accumulation"))
    assert not ok and comp.needs[0] == "fp16-accumulation" and "tf32" not in comp.needs
    assert "inside it only with what --allow tf32 adds" in comp.note and "float16 accumulators" in comp.note
    assert comp.mismatches > 0
    # what it needs next is the accumulator, whatever other downgrade the source shows first
    ok, comp = judge(fp16_acc.float(), gemm, allowed=("tf32",), hints=("tf32", "fp16", "fp16-accumulation"))
    assert not ok and comp.needs == ["fp16-accumulation"]
    # a coarser accumulation allowed covers it
    assert judge(fp16_acc.float(), gemm, allowed=("tf32", "bf16-accumulation"), hints=("tf32", "fp16-accumulation"))[0]
    # allowed too, or within the problem's own bound, it passes
    assert judge(fp16_acc.float(), gemm, allowed=("tf32", "fp16-accumulation"), hints=("tf32", "fp16-accumulation"))[0]
    exact = a @ b
    assert judge(exact, gemm, allowed=("tf32",), hints=("fp16-accumulation",))[0]


def test_the_shrunk_truth_puts_the_float64_weights_back_exactly():
    """The drift's run scales the cached float64 copy's weights in place: afterwards they are
    bit-for-bit the module's own again, so the next run's truth is unchanged."""
    g = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64, generator=g)
    truth = Float64Truth(_Harness([x]), torch.device("cpu"))
    outputs = _Harness([x]).run(lin, [x.clone()])
    first = truth.calibrate(lin, _Combo(), outputs)
    wide, _ = truth.models[(_Combo.vname, _Combo.seed)]
    assert torch.equal(wide.weight, lin.weight.double()) and torch.equal(wide.bias, lin.bias.double())
    again = truth.calibrate(lin, _Combo(), outputs)
    assert all(torch.equal(a, b) for a, b in zip(first[0] + first[2], again[0] + again[2]))
    assert first[2][0] is not None and float(first[2][0].abs().max()) > 0


def test_host_code_that_turns_tf32_on_is_tf32_evidence():
    src = (
        "import torch\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        torch.set_float32_matmul_precision('high')\n"
        "        return a @ b\n")
    hints = precision_hints(ast.parse(src), set(), "float32")
    assert hints["tf32"] == ["host code, line 2: torch.backends.cuda.matmul.allow_tf32 = True",
                             'host code, line 5: set_float32_matmul_precision("high")']
    assert "tf32" not in precision_hints(ast.parse(src.replace("= True", "= False").replace("'high'", "'highest'")),
                                         set(), "float32")


def test_only_launched_kernels_and_their_helpers_are_read_for_lower_precision():
    """A ``@triton.jit`` function defined but never launched computes nothing: its float16
    accumulator is no evidence against the kernel that ran (the accumulator rule would refuse a
    correct TF32 kernel for it); a helper the launched kernel calls is read."""
    from xeforge_core.worker.precision_hints import jit_reached

    src = (
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef unused(p):\n    acc = tl.zeros((16, 16), dtype=tl.float16)\n"
        "    acc += tl.dot(tl.load(p), tl.load(p))\n    tl.store(p, acc)\n\n"
        "@triton.jit\ndef scale(x):\n    return (x * 2).to(tl.bfloat16)\n\n"
        "@triton.jit\ndef k(p):\n    tl.store(p, scale(tl.load(p)))\n")
    tree = ast.parse(src)
    reached = jit_reached(tree, {"k"}, {"unused", "scale", "k"})
    assert reached == {"k", "scale"}
    hints = precision_hints(tree, reached, "float32")
    assert "fp16-accumulation" not in hints and "bf16" in hints
    assert "fp16-accumulation" in precision_hints(tree, {"unused", "scale", "k"}, "float32")


def test_a_float16_accumulator_is_read_however_its_dtype_is_written():
    """A float16 accumulator in a float32 problem is evidence however it is written: by keyword
    or position, in ``tl.full``, or as each running sum rounded through float16 in a loop; a sum
    that accumulates in float32 (``dtype=tl.float32``) is none. In a float16 problem an
    accumulator in float16 is not reported (its reference may round each step in float16 too)."""
    def hints(body: str, dtype: str = "float32") -> dict:
        src = ("import triton.language as tl\n\n@triton.jit\ndef k(x_ptr, y_ptr, n, B: tl.constexpr):\n"
               + body + "    tl.store(y_ptr + tl.arange(0, B), acc)\n")
        return precision_hints(ast.parse(src), {"k"}, dtype)

    loop = "    for i in range(n):\n        acc += tl.load(x_ptr + i * B + tl.arange(0, B))\n"
    for made in ("tl.zeros((B,), dtype=tl.float16)", "tl.zeros((B,), tl.float16)", "tl.full((B,), 0.0, tl.float16)"):
        assert list(hints(f"    acc = {made}\n" + loop)) == ["fp16-accumulation"], made
        assert hints(f"    acc = {made}\n" + loop, "float16") == {}
    rounded = ("    acc = tl.zeros((B,), dtype=tl.float32)\n    for i in range(n):\n"
               "        acc = (acc + tl.load(x_ptr + i * B + tl.arange(0, B))).to(tl.float16).to(tl.float32)\n")
    assert list(hints(rounded)) == ["fp16-accumulation"]
    once = "    acc = tl.zeros((B,), dtype=tl.float32)\n    acc = (acc + 1.0).to(tl.float16).to(tl.float32)\n"
    assert "fp16-accumulation" not in hints(once)
    wide = "    acc = tl.sum(tl.load(x_ptr + tl.arange(0, B)).to(tl.float16), dtype=tl.float32)\n"
    assert "fp16-accumulation" not in hints(wide)
