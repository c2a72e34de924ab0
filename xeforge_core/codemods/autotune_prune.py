"""Autotune search spaces pruned before anything is compiled.

Two layers, both from the target's hardware profile (knowledge/hardware: peak TFLOP/s,
bandwidth, shared memory / SLM per work-group, compute units, GRF modes):

* **static** (:func:`prune_static`, when the codemod writes the decorator): a GEMM config is
  dropped when its operand tiles over the pipeline stages (``num_stages * (BM * BK + BK * BN)``
  elements, at the problem's input element size where its spec names it (:func:`operand_bytes`),
  else 4 bytes: fp32 operands, KernelBench's default, the widest a ``tl.dot`` takes; the
  layout Triton's software pipeliner allocates, which is what the compiler's "out of resource:
  shared memory" check counts) exceed the shared memory a block may use, or its fp32 accumulator needs more than ``MAX_ACC_REGS`` registers a thread (it would
  spill); what is left is capped at ``max_configs``, the kernel's own config first;
* **per call** (:func:`pruner_source`, written into the module as Triton's
  ``prune_configs_by={"early_config_prune": ...}``): with the real sizes, at the first launch
  of each autotune key and before any config is compiled, a roofline model ranks the configs
  and only the kernel's own config and the ``keep - 1`` predicted fastest are benchmarked, and
  one of a smaller output tile than the model's first where the ranking has none
  (:func:`hedged`).

The model (per config ``BM x BN x BK``, ``w`` warps, ``s`` stages, on ``units`` compute units):
``tiles = cdiv(M, BM) * cdiv(N, BN)``; ``resident`` programs per unit from the shared memory
they need (at most 2); ``waves = cdiv(tiles, units * resident)``; compute time = padded FLOP
``2 * cdiv(M, BM) * BM * cdiv(N, BN) * BN * K`` at the profile's peak times a tile efficiency
``min(1, BM * BN / 128^2) ** 0.5`` (small tiles leave the matrix engines idle); memory time =
the operand traffic ``2 * (M * K * cdiv(N, BN) + K * N * cdiv(M, BM)) / 8`` bytes (grouped
launch order: about 8 tiles share each operand tile in L2) plus the fp32 output, at the
profile's bandwidth; predicted time = max of the two divided by the wave efficiency
``tiles / (waves * units * resident)``. A ranking, not a prediction of microseconds: the
autotuner still measures the kept configs, and keeping the kernel's own config means the tuned
kernel is never slower than the untuned one by construction.
"""

from __future__ import annotations

from typing import Any

#: An fp32 accumulator above this many registers a thread spills (255 is the hardware limit on
#: NVIDIA; the operand fragments, pointers and masks need the rest). Project heuristic.
MAX_ACC_REGS = 128
KEEP = 3


def _get(profile: Any, name: str, default: Any = None) -> Any:
    if profile is None:
        return default
    v = profile.get(name) if isinstance(profile, dict) else getattr(profile, name, None)
    if isinstance(v, dict) and "value" in v:
        v = v["value"]
    v = getattr(v, "value", v)
    return default if v is None else v


def profile_numbers(profile: Any, target: str) -> dict[str, float]:
    """Peak fp16 TFLOP/s, bandwidth GB/s, shared memory bytes per block, compute units and
    threads per warp from a profile (``HardwareProfile`` or its dict), with the target's
    reference values where the profile has none."""
    peaks = _get(profile, "peak_tflops", {}) or {}
    fp16 = peaks.get("fp16") if isinstance(peaks, dict) else None
    fp16 = getattr(fp16, "value", fp16)
    if isinstance(fp16, dict):
        fp16 = fp16.get("value")
    xpu = target == "xpu"
    bw = _get(profile, "memory_bandwidth_gbps") or _get(profile, "bandwidth_gbps")
    return {"peak_tflops": float(fp16 or (183.5 if xpu else 989.5)),
            "bandwidth_gbps": float(bw or (608 if xpu else 4800)),
            "smem_bytes": float(_get(profile, "slm_bytes_per_workgroup") or (131072 if xpu else 232448)),
            "units": float(_get(profile, "compute_units") or (32 if xpu else 132)),
            "lanes": float((_get(profile, "subgroup_sizes") or [16 if xpu else 32])[0])}


def _acc_regs(cfg: dict[str, Any], lanes: float) -> float:
    kw = cfg["kwargs"]
    return kw.get("BLOCK_M", 64) * kw.get("BLOCK_N", 64) / (float(cfg["num_warps"]) * lanes)


#: Bytes an operand element takes in the static shared-memory estimate (fp32; see module docstring).
STATIC_ELEMENT_BYTES = 4


def smem_bytes(cfg: dict[str, Any], elem: int = STATIC_ELEMENT_BYTES) -> float:
    """Shared memory a GEMM config's pipelined operand tiles take: ``num_stages * (BLOCK_M *
    BLOCK_K + BLOCK_K * BLOCK_N) * elem`` bytes (``elem``: bytes an operand element takes)."""
    kw = cfg["kwargs"]
    bm, bn, bk = kw.get("BLOCK_M", 64), kw.get("BLOCK_N", 64), kw.get("BLOCK_K", 32)
    return (bm * bk + bk * bn) * elem * max(int(cfg.get("num_stages") or 1), 1)


_smem = smem_bytes


def operand_bytes(problem: Any) -> int:
    """Bytes a GEMM operand element takes in ``problem`` (a ``Problem``): the widest
    floating-point input of its default variant, where the spec or the variant names the
    inputs' dtypes; :data:`STATIC_ELEMENT_BYTES` (fp32) otherwise. Triton's software pipeliner
    stages the tiles a loop loads in the dtype they are loaded in (an upcast happens in
    registers after the load), so a float16 problem's tiles take 2 bytes an element."""
    from xeforge_core.problem.dtypes import dtype_size

    try:
        variant = problem.variant(problem.default_variant_name())
        sizes = [dtype_size(d) for d in variant.input_dtypes.values() if "float" in d]
    except Exception:  # no problem, no spec, an unknown dtype: the conservative width
        return STATIC_ELEMENT_BYTES
    return max(sizes) if sizes else STATIC_ELEMENT_BYTES


def prune_static(configs: list[dict[str, Any]], profile: Any, target: str, max_configs: int = 6,
                 elem: int = STATIC_ELEMENT_BYTES) -> tuple[list[dict[str, Any]], list[str]]:
    """GEMM configs that fit the profile (module docstring), at most ``max_configs``, in the
    given order; and one sentence per dropped config. The first config is always kept.
    ``elem``: bytes an operand element takes (:func:`operand_bytes` of the problem; fp32's 4
    where it is not known)."""
    nums = profile_numbers(profile, target)
    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    for i, cfg in enumerate(configs):
        kw = cfg.get("kwargs", {})
        grf = str((cfg.get("options") or {}).get("grf_mode", ""))
        reg_limit = MAX_ACC_REGS * (2 if grf == "256" else 1)
        label = "x".join(str(kw.get(k, "?")) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")) + \
            f"/w{cfg.get('num_warps')}/s{cfg.get('num_stages')}"
        if i > 0 and _smem(cfg, elem) > nums["smem_bytes"]:
            dropped.append(f"{label}: {int(_smem(cfg, elem))} B of operand tiles over its stages > {int(nums['smem_bytes'])} B "
                           "of shared memory a block may use")
            continue
        if i > 0 and _acc_regs(cfg, nums["lanes"]) > reg_limit:
            dropped.append(f"{label}: {_acc_regs(cfg, nums['lanes']):.0f} fp32 accumulator registers a thread > "
                           f"{reg_limit} (it would spill)")
            continue
        kept.append(cfg)
    if len(kept) > max_configs:
        dropped.append(f"{len(kept) - max_configs} more config(s) beyond the first {max_configs}")
        kept = kept[:max_configs]
    return kept, dropped


def predicted_seconds(m: int, n: int, k: int, cfg: dict[str, Any], nums: dict[str, float],
                      elem: int = STATIC_ELEMENT_BYTES) -> float:
    """The model's time for one GEMM call with ``cfg`` (module docstring); ``inf`` when the
    config's tiles of ``elem``-byte operands do not fit the shared memory."""
    kw = cfg["kwargs"]
    bm, bn = kw.get("BLOCK_M", 64), kw.get("BLOCK_N", 64)
    smem = _smem(cfg, elem)
    if smem > nums["smem_bytes"]:
        return float("inf")
    resident = max(1, min(2, int(nums["smem_bytes"] // max(smem, 1))))
    tm, tn = -(-m // bm), -(-n // bn)
    tiles = tm * tn
    slots = nums["units"] * resident
    waves = -(-tiles // slots)
    eff_wave = tiles / (waves * slots)
    eff_tile = min(1.0, (bm * bn) / (128.0 * 128.0)) ** 0.5
    compute = 2.0 * tm * bm * tn * bn * k / (nums["peak_tflops"] * 1e12 * eff_tile)
    traffic = 2.0 * (m * k * tn + k * n * tm) / 8.0 + 4.0 * m * n
    memory = traffic / (nums["bandwidth_gbps"] * 1e9)
    return max(compute, memory) / eff_wave


def rank(m: int, n: int, k: int, configs: list[dict[str, Any]], nums: dict[str, float], keep: int = KEEP
         ) -> list[int]:
    """Indices of the configs to benchmark: the first (the kernel's own) and the ``keep - 1``
    the model predicts fastest for an ``m x n x k`` GEMM, hedged with a smaller output tile
    (:func:`hedged`)."""
    order = sorted(range(1, len(configs)), key=lambda i: predicted_seconds(m, n, k, configs[i], nums))
    order = [i for i in order if predicted_seconds(m, n, k, configs[i], nums) != float("inf")]
    return [0, *hedged(order, lambda i: _area(configs[i]), max(keep - 1, 0))]


def _area(cfg: dict[str, Any]) -> int:
    kw = cfg["kwargs"]
    return int(kw.get("BLOCK_M", 64)) * int(kw.get("BLOCK_N", 64))


def hedged(order: list[Any], area: Any, count: int) -> list[Any]:
    """The first ``count`` of ``order`` (ranked fastest first) and, when none of them has a
    smaller output tile than the first, also the best-ranked config that has: the model does not
    see occupancy or a short K loop (a batched GEMM with K = 128 ran 16% slower on the H200 with
    only large tiles benchmarked), so the autotuner measures one smaller tile class as well. It
    is added, not put in the last pick's place: giving up that pick cost 10% on a large GEMM
    with an epilogue and 15% on the batched GEMM on the H200 (docs/measured/h200-rules-changes,
    third run)."""
    picks = list(order[:count])
    if count < 2 or len(order) <= count or any(area(x) < area(picks[0]) for x in picks[1:]):
        return picks
    smaller = next((x for x in order[count:] if area(x) < area(picks[0])), None)
    return picks + ([smaller] if smaller is not None else [])


def pruner_source(name: str, dims: dict[str, str], nums: dict[str, float], profile_id: str,
                  keep: int = KEEP) -> str:
    """Source of the module-level early-prune function for one autotuned GEMM kernel; ``dims``
    maps ``M``/``N``/``K`` to the kernel's size parameters. Self-contained (the module must not
    import this package): the same model as :func:`predicted_seconds`."""
    m, n, k = dims["M"], dims["N"], dims["K"]
    return f'''

def {name}(configs, named_args, **kwargs):
    """Autotune configs worth compiling for these sizes: the kernel's own (first) and the
    {keep - 1} a roofline model predicts fastest ({profile_id}: {nums['peak_tflops']:g} TFLOP/s fp16,
    {nums['bandwidth_gbps']:g} GB/s, {int(nums['smem_bytes'])} B shared memory a block, compute
    units and shared memory a block may opt into queried from the device; operand bytes from the
    tensors). Configs whose pipelined tiles do not fit are never compiled. Ranks only; the
    autotuner measures what is kept."""
    m, n, k = int(named_args["{m}"]), int(named_args["{n}"]), int(named_args["{k}"])
    units, limit = {int(nums['units'])}, {int(nums['smem_bytes'])}
    sizes = [v.element_size() for v in named_args.values() if hasattr(v, "element_size")]
    elem = max(sizes) if sizes else {STATIC_ELEMENT_BYTES}
    for value in named_args.values():
        device = getattr(value, "device", None)
        if device is not None and device.type != "cpu":
            props = getattr(torch, device.type).get_device_properties(device)
            units = getattr(props, "multi_processor_count", None) or getattr(props, "gpu_subslice_count", None) or units
            limit = getattr(props, "shared_memory_per_block_optin", None) or limit
            break

    def seconds(cfg):
        bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs.get("BLOCK_K", 32)
        smem = (bm * bk + bk * bn) * elem * max(cfg.num_stages or 1, 1)
        if smem > limit:
            return float("inf")
        resident = max(1, min(2, limit // max(smem, 1)))
        tm, tn = -(-m // bm), -(-n // bn)
        slots = units * resident
        waves = -(-(tm * tn) // slots)
        efficiency = (tm * tn) / (waves * slots)
        compute = 2.0 * tm * bm * tn * bn * k / ({nums['peak_tflops']:g}e12 * min(1.0, bm * bn / 16384.0) ** 0.5)
        memory = (2.0 * (m * k * tn + k * n * tm) / 8.0 + 4.0 * m * n) / {nums['bandwidth_gbps']:g}e9
        return max(compute, memory) / efficiency

    ranked = [c for c in sorted(configs[1:], key=seconds) if seconds(c) != float("inf")]
    area = lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"]  # noqa: E731
    picks = ranked[:{keep - 1}]
    if len(picks) > 1 and len(ranked) > len(picks) and not any(area(c) < area(picks[0]) for c in picks[1:]):
        # the model sees neither occupancy nor a short K loop: one smaller tile class is measured too
        smaller = [c for c in ranked[len(picks):] if area(c) < area(picks[0])]
        picks += smaller[:1]
    return [configs[0], *picks]
'''
