"""Measurements behind the float64-calibrated correctness check (``xeforge_core/precision.py``):
how far correct float32 implementations and precision downgrades land from the bound.

Each case computes an op three ways on the same inputs, as the verifier does: the reference
in the problem's dtype (PyTorch), the truth in float64 (and once more with every input
perturbed by one unit roundoff, for the sensitivity), and a candidate: another correct order
of summation (blocked, sequential, split into partial sums, a blocked scan) or a downgrade
(TF32, float16 or bfloat16 operands, float16 accumulation, a wrong operand worth 0.1% of a
loss). Each candidate is judged by the verifier's own comparison
(``xeforge_core.worker.calibrated.compare_calibrated``) and the script reports, over
``--seeds`` seeds x three input distributions (normal, uniform in [-1, 1], sign * 10^U(-3, 1))
x the sizes listed:

* ``ratio``: the candidate's largest error in units of the reference's own error scale (it
  passes at the problem's precision when at most ``K``: 256 for float32, 16 for float16);
* ``verdict``: how many draws pass as they are, how many the downgrade's own allowance accepts
  (``--allow``), and how many KernelBench's tolerance passes.

Float16 problems (the ops marked ``(float16)``) are judged relative to their own dtype: a
float16 accumulator over a short K, or exponentials kept in bfloat16, can stay inside float16's
own bound, and the table says so. The exit status is 1 when a correct kernel failed or a
float32 downgrade passed.

On ``--device cuda`` the TF32 candidate is a real TF32 product (``allow_tf32``) instead of the
operands rounded to 10 bits on the host. Prints a Markdown report (device, date, versions, one
table) and writes it with the raw numbers to ``OUT_DIR``::

    python benchmarks/bench_precision_rule.py OUT_DIR [--device cpu|cuda] [--seeds 12] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import statistics
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from xeforge_core.precision import K_ACCUMULATED, K_ROUNDED, UNIT_ROUNDOFF  # noqa: E402
from xeforge_core.worker.calibrated import Truth64, compare_calibrated  # noqa: E402
from xeforge_core.worker.truth64 import deviation_and_sensitivity, perturb_  # noqa: E402

DISTRIBUTIONS = ("normal", "uniform", "mixed")


def draw(shape: tuple[int, ...], dist: str, gen: torch.Generator) -> torch.Tensor:
    """Inputs as the verifier draws them (``worker/inputs.py``)."""
    if dist == "uniform":
        return torch.rand(shape, generator=gen) * 2 - 1
    if dist == "mixed":
        mag = 10 ** (torch.rand(shape, generator=gen) * 4 - 3)
        return mag * (torch.randint(0, 2, shape, generator=gen).float() * 2 - 1)
    return torch.randn(shape, generator=gen)


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` rounded to ``bits`` explicit mantissa bits (TF32 operands: 10)."""
    m, e = torch.frexp(x)
    scale = 2.0 ** (bits + 1)
    return torch.ldexp(torch.round(m * scale) / scale, e)


def sequential_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum along ``dim`` adding one element at a time in float32 (numpy's ``add.accumulate``)."""
    acc = np.add.accumulate(x.detach().cpu().numpy(), axis=dim, dtype=np.float32)
    return torch.from_numpy(np.asarray(np.take(acc, -1, axis=dim))).to(x.device)


def lanes(x: torch.Tensor, width: int) -> torch.Tensor:
    """Rows of ``x`` as ``[rows, steps, width]`` (zero-padded): lane ``j`` holds every
    ``width``-th element, as a Triton loop over blocks of ``width`` accumulates them."""
    pad = (-x.shape[1]) % width
    return torch.nn.functional.pad(x, (0, pad)).reshape(x.shape[0], -1, width)


def blocked_sum(x: torch.Tensor, block: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Row sums: a tree per block of ``block`` elements, the blocks added in order in ``dtype``."""
    acc = torch.zeros(x.shape[0], dtype=dtype, device=x.device)
    for k in range(0, x.shape[1], block):
        acc = (acc.float() + x[:, k:k + block].to(dtype).float().sum(1)).to(dtype)
    return acc.float()


def blocked_scan(x: torch.Tensor, block: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Row scans: each block scanned, chained through a carry kept in ``dtype``."""
    parts, carry = [], torch.zeros(x.shape[0], 1, dtype=dtype, device=x.device)
    for k in range(0, x.shape[1], block):
        s = x[:, k:k + block].to(dtype).cumsum(1) + carry
        parts.append(s)
        carry = s[:, -1:]
    return torch.cat(parts, 1).float()


def blocked_mm(a: torch.Tensor, b: torch.Tensor, block: int, acc_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``a @ b`` accumulated over K tiles of ``block`` in ``acc_dtype`` (a Triton GEMM's loop)."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=acc_dtype, device=a.device)
    for k in range(0, a.shape[1], block):
        acc = (acc.float() + a[:, k:k + block] @ b[k:k + block]).to(acc_dtype)
    return acc.float()


def tf32_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A TF32 product: the real one on a GPU, the operands rounded to 10 bits elsewhere."""
    if a.is_cuda:
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return a @ b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    return round_mantissa(a, 10) @ round_mantissa(b, 10)


#: (op, sizes, reference, candidates {name: (kind, allowance, fn)}); ``kind`` is ``correct`` or
#: ``downgrade``/``fault``; each fn takes the inputs and returns the candidate's output. An op
#: whose name ends in ``(float16)`` is a float16 problem: its inputs are float16.
Case = tuple[str, list[tuple[int, ...]], Callable[..., torch.Tensor], dict[str, tuple[str, str, Callable]]]


def chain_sum(x: torch.Tensor) -> torch.Tensor:
    """A residual chain: the rows of ``x`` added one PyTorch op at a time, each sum rounded to
    ``x``'s dtype (the reference of a float16 problem that itself accumulates in float16)."""
    out = x[0]
    for i in range(1, x.shape[0]):
        out = out + x[i]
    return out


def softmax_fp16_subtract(x: torch.Tensor) -> torch.Tensor:
    """Softmax of a float16 row with the max subtracted in float16, the rest in float32."""
    z = (x - x.max(1, keepdim=True).values).float()
    e = torch.exp(z)
    return (e / e.sum(1, keepdim=True)).to(x.dtype)


def softmax_bf16_exp(x: torch.Tensor) -> torch.Tensor:
    """Softmax with its exponentials kept in bfloat16 (a downgrade in a float16 problem)."""
    z = (x.float() - x.float().max(1, keepdim=True).values)
    e = torch.exp(z).bfloat16().float()
    return (e / e.sum(1, keepdim=True)).to(x.dtype)


def cases(quick: bool) -> list[Case]:
    k_sizes = [(32, 24, 72), (32, 24, 512)] if quick else [(32, 24, 72), (32, 24, 512), (32, 24, 4096)]
    row_sizes = [(8, 300), (8, 3000)] if quick else [(8, 300), (8, 3000), (8, 20000)]
    return [
        ("gemm", k_sizes, lambda a, b: a @ b, {
            "blocked K tiles of 32": ("correct", "", lambda a, b: blocked_mm(a, b, 32)),
            "sequential over K": ("correct", "", lambda a, b: blocked_mm(a, b, 1)),
            "TF32": ("downgrade", "tf32", tf32_mm),
            "float16 operands": ("downgrade", "fp16", lambda a, b: a.half().float() @ b.half().float()),
            "bfloat16 operands": ("downgrade", "bf16", lambda a, b: a.bfloat16().float() @ b.bfloat16().float()),
            "float16 accumulator": ("downgrade", "fp16-accumulation", lambda a, b: blocked_mm(a, b, 32, torch.float16)),
        }),
        ("row sum", row_sizes, lambda x: x.sum(1), {
            "tree per 1024, blocks in order": ("correct", "", lambda x: blocked_sum(x, 1024)),
            "32 sequential lanes": ("correct", "", lambda x: sequential_sum(lanes(x, 32), 1).sum(1)),
            "one element at a time": ("correct", "", lambda x: sequential_sum(x, 1)),
            "float16 accumulator": ("downgrade", "fp16-accumulation", lambda x: blocked_sum(x, 32, torch.float16)),
        }),
        ("scan", row_sizes, lambda x: x.cumsum(1), {
            "blocks of 256, float32 carry": ("correct", "", lambda x: blocked_scan(x, 256)),
            "float16 scan and carry": ("downgrade", "fp16-accumulation", lambda x: blocked_scan(x, 256, torch.float16)),
        }),
        ("256-term loss", [(256,)], lambda p, t: torch.sum(1.0 + 0.001 * p * t).reshape(1), {
            "one element at a time": ("correct", "", lambda p, t: sequential_sum(1.0 + 0.001 * p * t, 0).reshape(1)),
            "wrong operand (0.1%)": ("fault", "", lambda p, t: torch.sum(1.0 + 0.001 * p * p).reshape(1)),
        }),
        ("single sum", [(4096,), (262144,)] if not quick else [(4096,)], lambda x: x.sum().reshape(1), {
            "tree per 256, blocks in order": ("correct", "", lambda x: blocked_sum(x.reshape(1, -1), 256)),
            "one element at a time": ("correct", "", lambda x: sequential_sum(x, 0).reshape(1)),
        }),
        ("gemm (float16)", [(32, 24, 72), (32, 24, 300)] + k_sizes[1:], lambda a, b: a @ b, {
            "float32 accumulator, rounded once": ("correct", "", lambda a, b: blocked_mm(a.float(), b.float(), 32).half()),
            "float32, sequential over K, rounded once": ("correct", "",
                                                         lambda a, b: blocked_mm(a.float(), b.float(), 1).half()),
            "float32, split K in four, rounded once": ("correct", "", lambda a, b: sum(
                a.float()[:, i::4] @ b.float()[i::4] for i in range(4)).half()),
            "float16 accumulator": ("downgrade", "fp16-accumulation",
                                    lambda a, b: blocked_mm(a.float(), b.float(), 32, torch.float16).half()),
            "float16 accumulator, K tiles of 128": ("downgrade", "fp16-accumulation",
                                                    lambda a, b: blocked_mm(a.float(), b.float(), 128,
                                                                            torch.float16).half()),
        }),
        ("row sum (float16)", [(8, 300), (8, 1000)] + row_sizes[1:], lambda x: x.sum(1), {
            "float32, tree per 1024, rounded once": ("correct", "", lambda x: blocked_sum(x.float(), 1024).half()),
            "float32, one element at a time, rounded once": ("correct", "",
                                                             lambda x: sequential_sum(x.float(), 1).half()),
            "float16 accumulator": ("downgrade", "fp16-accumulation",
                                    lambda x: blocked_sum(x.float(), 32, torch.float16).half()),
        }),
        ("scan (float16)", [(8, 300), (8, 1000)], lambda x: x.cumsum(1), {
            "float32 carry, rounded once": ("correct", "", lambda x: blocked_scan(x.float(), 256).half()),
            "float16 scan and carry": ("downgrade", "fp16-accumulation",
                                       lambda x: blocked_scan(x.float(), 256, torch.float16).half()),
        }),
        ("gemm (bfloat16)", [(32, 24, 72), (32, 24, 300)] + k_sizes[1:], lambda a, b: a @ b, {
            "float32 accumulator, rounded once": ("correct", "",
                                                  lambda a, b: blocked_mm(a.float(), b.float(), 32).bfloat16()),
            "float32, sequential over K, rounded once": ("correct", "",
                                                         lambda a, b: blocked_mm(a.float(), b.float(), 1).bfloat16()),
            "bfloat16 accumulator": ("downgrade", "bf16-accumulation",
                                     lambda a, b: blocked_mm(a.float(), b.float(), 32, torch.bfloat16).bfloat16()),
        }),
        ("residual chain (float16)", [(16, 2000), (64, 500)], chain_sum, {
            "float16 accumulator, last step first": ("correct", "", lambda x: chain_sum(x.flip(0))),
            "float32 accumulator, rounded once": ("correct", "", lambda x: x.float().sum(0).to(x.dtype)),
        }),
        ("softmax (float16)", [(8, 1000)], lambda x: torch.softmax(x, 1), {
            "float32 inside, rounded once": ("correct", "", lambda x: torch.softmax(x.float(), 1).half()),
            "max subtracted in float16": ("correct", "", softmax_fp16_subtract),
            "exponentials in bfloat16": ("downgrade", "bf16", softmax_bf16_exp),
        }),
    ]


def inputs_for(op: str, size: tuple[int, ...], dist: str, gen: torch.Generator, device: str) -> list[torch.Tensor]:
    dtype = torch.float16 if op.endswith("(float16)") else torch.bfloat16 if op.endswith("(bfloat16)") else torch.float32
    if op.startswith("gemm"):
        m, n, k = size
        a, b = draw((m, k), dist, gen), draw((k, n), dist, gen)
        if dtype != torch.float32:  # scaled so that a float16 sum of K products stays in range
            a, b = a.clamp(-8, 8), b.clamp(-8, 8) / k ** 0.5
        return [a.to(device, dtype), b.to(device, dtype)]
    if op == "256-term loss":
        return [draw(size, dist, gen).to(device), draw(size, dist, gen).to(device)]
    return [draw(size, dist, gen).to(device, dtype)]


def measure(reference: Callable, candidate: Callable, args: list[torch.Tensor], allowance: str) -> dict[str, Any]:
    """The verifier's comparison of one candidate on one input set."""
    r = reference(*args)
    t = reference(*[a.double() for a in args])
    gen = torch.Generator(device=args[0].device).manual_seed(0x64)
    u = UNIT_ROUNDOFF[str(r.dtype).replace("torch.", "")]
    p = reference(*[perturb_(a.double().clone(), u, gen) for a in args])
    d, sigma, stats = deviation_and_sensitivity(r, t, p)
    t64 = Truth64(d, sigma, stats["ref_rms_error"], stats["sigma_rms"])
    c = candidate(*args).to(r.dtype)
    res = compare_calibrated(c, r, t64)
    allowed = compare_calibrated(c, r, t64, (allowance,)) if allowance else res
    # where the reference's own error exceeds one rounding of its result (it rounds intermediate
    # results in its dtype): what a rule holding half-precision accumulators to one rounding misses
    ref_once = bool(((r.double() - t).abs() <= u * t.abs() + torch.finfo(r.dtype).tiny).all())
    return {"ratio": res.ratio, "pass": res.mismatches == 0, "allowed": allowed.mismatches == 0,
            "ref_rounds_once": ref_once, "kernelbench": res.kernelbench_mismatches == 0, "rel_error": res.rel_error}


def run(seeds: int, device: str, quick: bool) -> list[dict[str, Any]]:
    rows = []
    for op, sizes, reference, candidates in cases(quick):
        for name, (kind, allowance, fn) in candidates.items():
            draws = []
            for size in sizes:
                for dist in DISTRIBUTIONS:
                    for seed in range(seeds):
                        gen = torch.Generator().manual_seed(zlib.crc32(repr((op, size, dist, seed)).encode()))
                        draws.append(measure(reference, fn, inputs_for(op, size, dist, gen, device), allowance))
            ratios = [d["ratio"] for d in draws]
            rows.append({"op": op, "sizes": [list(s) for s in sizes], "candidate": name, "kind": kind,
                         "allowance": allowance, "draws": len(draws), "ratio_min": min(ratios),
                         "ratio_median": statistics.median(ratios), "ratio_max": max(ratios),
                         "pass": sum(d["pass"] for d in draws), "allowed": sum(d["allowed"] for d in draws),
                         "ref_rounds_once": sum(d["ref_rounds_once"] for d in draws),
                         "kernelbench": sum(d["kernelbench"] for d in draws)})
    return rows


def report(rows: list[dict[str, Any]], device: str, seeds: int) -> str:
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    lines = [f"# The float64-calibrated check: correct orders and downgrades ({device})", "",
             f"{when}; device {device} ({name}); torch {torch.__version__}; {seeds} seed(s) x "
             f"{len(DISTRIBUTIONS)} distributions x sizes. K = {K_ACCUMULATED} (float32), {K_ROUNDED} (float16).",
             "`ratio`: the candidate's largest error in units of the reference's own error scale (passes when "
             "<= K); `pass`: draws ok at the problem's precision; `allowed`: draws ok with the named allowance; "
             "`KernelBench`: draws its tolerance passes (atol = rtol = 1e-4 for float32, 1e-2 for float16); "
             "`reference within one rounding`: draws where the reference errs within one rounding of every "
             "result (u |t| plus the dtype's smallest normal).", "",
             "| op | sizes | candidate | kind | ratio min / median / max | pass | reference within one rounding | "
             "--allow | allowed | KernelBench |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sizes = ", ".join("x".join(map(str, s)) for s in r["sizes"])
        lines.append(f"| {r['op']} | {sizes} | {r['candidate']} | {r['kind']} | {r['ratio_min']:.3g} / "
                     f"{r['ratio_median']:.3g} / {r['ratio_max']:.3g} | {r['pass']}/{r['draws']} | "
                     + f"{r['ref_rounds_once']}/{r['draws']} | "
                     + f"{r['allowance'] or '-'} | {r['allowed']}/{r['draws'] if r['allowance'] else '-'} | "
                     f"{r['kernelbench']}/{r['draws']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a minute on a CPU)")
    args = parser.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = run(args.seeds, args.device, args.quick)
    text = report(rows, args.device, args.seeds)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "report.md").write_text(text, encoding="utf-8")
    (args.out_dir / "results.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(text)
    # exit 1 when a correct kernel failed, or a float32 downgrade or fault passed (in float16
    # problems a coarser intermediate can stay inside float16's own bound: reported, not a failure)
    wrong = [r for r in rows if (r["kind"] == "correct" and r["pass"] < r["draws"]) or
             (r["kind"] != "correct" and r["pass"] > 0 and not r["op"].endswith(("(float16)", "(bfloat16)")))]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
