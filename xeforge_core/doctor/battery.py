"""The preflight battery: small checks of the operations a kernel session relies on.

Each check runs alone in its own process (``isolate.run_task``) with a timeout and compares
the device's answer with the CPU's. The op classes are the ones unsupported Intel iGPUs were
seen to fail (FACTS.md: reductions and indexing+cast with Level Zero error 45, hangs in
synchronisation), plus the basics: matmul, host/device copies, and one Triton kernel.

A check is data: ``Check(name, op_class, code)`` where ``code`` defines
``run(device) -> (got, expected) | None``; so a user (or a test) can add checks, including
planted faults, without touching the machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xeforge_core.doctor.isolate import run_task


@dataclass(frozen=True)
class Check:
    """One battery check. ``code`` is Python source defining ``run(device)``; it may return
    ``(got, expected)`` (compared on the CPU with ``rtol``/``atol``) or ``None``."""

    name: str
    op_class: str
    code: str
    rtol: float = 1e-3
    atol: float = 1e-3


@dataclass
class CheckResult:
    """The outcome of one check: ``status`` is ``ok``, ``wrong``, ``error``, ``driver_error``,
    ``crash`` or ``hang``; ``seconds`` the process wall time (s); ``stack`` the Python stacks
    dumped before a hang was killed; ``env`` the runtime settings it ran under (experiments);
    ``output`` the child's captured stderr (truncated; runtime traces land there)."""

    name: str
    op_class: str
    status: str
    seconds: float = 0.0
    detail: str = ""
    stack: str = ""
    env: dict[str, str] = field(default_factory=dict)
    output: str = ""

    @property
    def failed(self) -> bool:
        return self.status != "ok"

    @property
    def below_python(self) -> bool:
        return self.status in ("driver_error", "crash")


_REDUCTION = '''
def run(device):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(8, 16, 32, generator=g)
    got, expected = [], []
    for layout, t in (("contiguous", base), ("strided", base.transpose(0, 2)[::2])):
        for dim in range(t.dim()):
            got.append({op}(t.to(device), dim=dim){attr}.cpu())
            expected.append({op}(t, dim=dim){attr})
    return got, expected
'''


def _reduction(op: str, attr: str = "") -> str:
    """A reduction check over every dim of a contiguous and a strided tensor; ``attr`` picks
    the compared field of the result (``.values`` for ``torch.max``)."""
    return _REDUCTION.format(op=op, attr=attr)


DEFAULT_CHECKS: tuple[Check, ...] = (
    Check("matmul", "matmul", '''
def run(device):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 96, generator=g), torch.randn(96, 64, generator=g)
    return (a.to(device) @ b.to(device)).cpu(), a @ b
''', rtol=1e-2, atol=1e-2),
    Check("sum along each dim", "reduction", _reduction("torch.sum")),
    Check("mean along each dim", "reduction", _reduction("torch.mean")),
    Check("max along each dim", "reduction", _reduction("torch.max", ".values")),
    Check("argmax along each dim", "reduction", _reduction("torch.argmax")),
    Check("index new axis + cast", "indexing+cast", '''
def run(device):
    g = torch.Generator().manual_seed(0)
    t = torch.randn(4, 8, generator=g).half()
    idx = torch.tensor([3, 0, 2])
    d = t.to(device)
    got = [d[:, None, :].float().cpu(), d[idx.to(device)].to(torch.float32).cpu()]
    return got, [t[:, None, :].float(), t[idx].to(torch.float32)]
'''),
    Check("host-device copy", "copy", '''
def run(device):
    t = torch.arange(4096, dtype=torch.float32)
    back = t.to(device).cpu()
    return back, t
'''),
    Check("synchronise", "synchronisation", '''
def run(device):
    kind = device.split(":")[0]
    x = torch.ones(1 << 16, device=device)
    for _ in range(8):
        x = x * 1.0001
    mod = getattr(torch, kind, None) if kind in ("cuda", "xpu") else None
    if mod is not None:
        mod.synchronize(torch.device(device))
    return x.cpu(), torch.ones(1 << 16) * (1.0001 ** 8)
'''),
    Check("Triton vector add", "triton", '''
import triton
import triton.language as tl

@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

def run(device):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    dx, dy = x.to(device), y.to(device)
    out = torch.empty_like(dx)
    _add[(triton.cdiv(1000, 256),)](dx, dy, out, 1000, BLOCK=256)
    return out.cpu(), x + y
'''),
)

def run_check(check: Check, device: str, *, timeout_s: float = 60.0,
              env: dict[str, str] | None = None) -> CheckResult:
    """Run one check on ``device`` (``cpu``, ``cuda``, ``cuda:1``, ``xpu``) in its own process."""
    job = {"task": "check", "device": device, "name": check.name, "code": check.code,
           "rtol": check.rtol, "atol": check.atol}
    out = run_task(job, timeout_s=timeout_s, env=env)
    return CheckResult(check.name, check.op_class, out.status, out.seconds,
                       out.error_text, out.stack, dict(env or {}), out.stderr)


def run_battery(device: str, checks: Sequence[Check] | None = None, *, timeout_s: float = 60.0,
                on_progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Run every check (default ``DEFAULT_CHECKS``) on ``device``, one process each."""
    results = []
    for check in checks or DEFAULT_CHECKS:
        if on_progress:
            on_progress(f"battery: {check.name}")
        results.append(run_check(check, device, timeout_s=timeout_s))
    return results
