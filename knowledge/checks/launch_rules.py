"""Check, on a real GPU, the launch-time behaviours some knowledge-base rules rely on.

Run on a machine with a GPU (cuda or xpu): ``python knowledge/checks/launch_rules.py``.
Each line prints the case and either ``OK <value>`` or ``RAISES <error>``; the output recorded
on this project's lent machine is kept next to this file (``launch_rules.<device>.txt``) and
quoted in knowledge/contradictions.md.

Cases: a default on an autotuned constexpr (rule autotune_keys_no_defaults), a tuned name
passed at the launch, grf_mode as a launch keyword and inside triton.Config (rules
grf_mode_placement / contradictions.md section 1), num_warps that is not a power of two, and a
tl.arange length that is not a power of two (rules pow2_num_warps, pow2_tile_sizes).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def add_block_default(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 128):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) + BLOCK, mask=o < n)


@triton.jit
def add_block(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) + BLOCK, mask=o < n)


def _device() -> torch.device:
    acc = torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else None
    if acc is None:
        raise SystemExit("no GPU: these checks need a real backend (the interpreter ignores launch options)")
    return acc


def case(name: str, fn) -> None:
    try:
        value = fn()
        torch.accelerator.synchronize()
        print(f"{name}: OK {value}")
    except Exception as e:  # noqa: BLE001 - the error is the result being recorded
        print(f"{name}: RAISES {type(e).__name__}: {str(e).splitlines()[0][:160]}")


def main() -> None:
    dev = _device()
    name = torch.xpu.get_device_name() if dev.type == "xpu" else torch.cuda.get_device_name()
    print(f"device: {name}; torch {torch.__version__}; triton {triton.__version__}")
    n = 256
    x = torch.arange(n, device=dev, dtype=torch.float32)

    def grid(meta):
        return (triton.cdiv(n, meta["BLOCK"]),)

    for count in (1, 2):
        configs = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 32}, num_warps=4)][:count]
        tuned_default = triton.autotune(configs=configs, key=["n"])(add_block_default)
        y = torch.zeros_like(x)
        case(f"{count} config(s), tuned BLOCK also defaults to 128 in the signature; BLOCK used",
             lambda t=tuned_default, y=y: (t[grid](x, y, n), int((y - x)[0].item()))[1])
        tuned = triton.autotune(configs=configs, key=["n"])(add_block)
        y = torch.zeros_like(x)
        case(f"{count} config(s), tuned BLOCK passed at the launch",
             lambda t=tuned, y=y: t[grid](x, y, n, BLOCK=64) and None)
    y = torch.zeros_like(x)
    case("grf_mode='256' as a launch keyword", lambda: add_block[(4,)](x, y, n, BLOCK=64, grf_mode="256") and None)
    with_grf = triton.autotune(configs=[triton.Config({"BLOCK": 64, "grf_mode": "256"}),
                                        triton.Config({"BLOCK": 32, "grf_mode": "128"})], key=["n"])(add_block)
    case("grf_mode inside triton.Config kwargs", lambda: with_grf[grid](x, y, n) and None)
    case("num_warps=6", lambda: add_block[(4,)](x, y, n, BLOCK=64, num_warps=6) and None)
    case("tl.arange(0, 96)", lambda: add_block[(3,)](x, y, n, BLOCK=96) and None)


if __name__ == "__main__":
    main()
