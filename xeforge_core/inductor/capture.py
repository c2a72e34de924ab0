"""Capture TorchInductor's output code for a plain-PyTorch problem, in a sandboxed worker.

:func:`capture` runs :mod:`xeforge_core.inductor.generate` in its own process through the
project's runner (``xeforge_core.runner.run_worker``: own process group, wall-clock timeout,
rlimits, secrets removed, the bubblewrap sandbox where the machine has one), because it imports
and traces the problem module. The result is a :class:`Capture`, which can also be saved as
JSON (:meth:`Capture.save`) on a GPU machine and converted anywhere later (:func:`load_capture`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.errors import XeForgeError, missing_path_hint

#: The saved-capture format id (``Capture.save`` writes it; ``load_capture`` checks it).
FORMAT = "xeforge-inductor-capture/1"

#: Default seconds the generation job may take (tracing and code generation of one problem;
#: KernelBench level-2 problems take 5-20 s on a two-core CPU).
DEFAULT_TIMEOUT_S = 240.0

#: Address-space limit of the generation job on cpu (bytes): torch and Inductor reserve several
#: GiB of virtual memory at import.
DEFAULT_MEMORY_BYTES = 24 * 2**30


class GenerationError(XeForgeError, RuntimeError):
    """TorchInductor could not generate code for the problem (the model does not trace in one
    graph, an input is neither a parameter nor a forward input, the job timed out, ...); the
    message says which step failed and why. ``stage`` is ``load``, ``inputs``, ``trace``,
    ``generate`` or ``process``."""

    def __init__(self, message: str, *, stage: str = "") -> None:
        super().__init__(message)
        self.stage = stage


@dataclass
class Capture:
    """Inductor's output code for one problem and what its ``call(args)`` arguments are.

    ``graph_inputs``: one dict per argument of ``call``, in order: ``kind`` (``parameter``,
    ``buffer``, ``input``, ``size``), ``expr`` (a Python expression in ``ModelNew.forward``:
    ``self.linear.weight``, ``x``, ``x.size(0)``), ``shape`` and ``dtype`` as traced.
    ``outputs``: ``{"structure": "tensor" | "tuple" | "list", "count": n}``. ``device`` the
    device it was traced on; ``generated_for`` the Triton target the code was generated for.
    ``source_sha256``: the SHA-256 of the problem module it was traced from (``""`` in captures
    written before it was recorded). ``specialised``: sizes code generation fixed to their traced value (``{"x.size(1)": 8}``;
    empty when every size of the problem is a symbol of the code). ``size_hints``: the published
    sizes Inductor's heuristics were given as the hints of the traced ones (``{"input 0 dim 1":
    32768}``; empty when traced at the published size or when they could not be had, and then
    ``size_hints_note`` says why). ``constants``: the model's attributes the trace read as
    constants of the code (``{"self.divisor": 2.0}``: Dynamo's constant guards; a float the
    constructor takes is written into the kernels).
    """

    problem: str
    output_code: str
    graph_inputs: list[dict[str, Any]]
    outputs: dict[str, Any]
    forward_params: list[str]
    device: str = "cpu"
    generated_for: str = ""
    torch: str = ""
    triton: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)
    specialised: dict[str, int] = field(default_factory=dict)
    source_sha256: str = ""
    size_hints: dict[str, int] = field(default_factory=dict)
    size_hints_note: str = ""
    constants: dict[str, float | int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        """Write the capture as JSON to ``path`` and return it."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return p


def source_digest(source: str) -> str:
    """The SHA-256 (hex) of a problem module's text, as :attr:`Capture.source_sha256` records it:
    line endings and trailing spaces do not count (a paste or an editor may change them)."""
    import hashlib

    text = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_capture_fits(cap: Capture, problem_source: str, *, where: str = "capture") -> None:
    """Refuse a capture traced from another problem module than ``problem_source`` (its
    arguments would be bound to the wrong parameters). Raises ``GenerationError`` naming both."""
    if cap.source_sha256 and cap.source_sha256 != source_digest(problem_source):
        raise GenerationError(f"{where}: traced from another problem module ({cap.problem!r}, source "
                              f"sha256 {cap.source_sha256[:12]}, this one {source_digest(problem_source)[:12]}); "
                              "capture this problem again with `xeforge inductor capture PROBLEM`", stage="load")


def capture_from_dict(data: dict[str, Any], *, where: str = "capture") -> Capture:
    """A :class:`Capture` from its JSON form. Raises ``GenerationError`` naming the missing field."""
    if data.get("format") != FORMAT:
        raise GenerationError(f"{where}: not a saved TorchInductor capture (format {data.get('format')!r}, "
                              f"expected {FORMAT!r}); write one with `xeforge inductor capture PROBLEM`",
                              stage="load")
    known = Capture.__dataclass_fields__
    missing = [k for k in ("problem", "output_code", "graph_inputs", "outputs", "forward_params") if k not in data]
    if missing:
        raise GenerationError(f"{where}: field(s) {', '.join(missing)} missing", stage="load")
    return Capture(**{k: v for k, v in data.items() if k in known})


def load_capture(path: str | Path) -> Capture:
    """Read a capture saved by :meth:`Capture.save`. Raises ``GenerationError`` for a missing
    file, bad JSON or another format."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GenerationError(f"{p}: file not found{missing_path_hint(p)}", stage="load") from None
    except (OSError, ValueError) as exc:
        raise GenerationError(f"{p}: cannot read it as JSON: {exc}", stage="load") from None
    return capture_from_dict(data, where=str(p))


def stopped_without_result(outcome: Any, source: str, *, name: str) -> GenerationError:
    """The error for a generation job that wrote no result (``outcome``: its
    :class:`~xeforge_core.worker_outcome.WorkerOutcome`): where it stopped in the problem's own
    code (``name``.py and the line, from the worker's stack dump), else the step it was in (the
    last step line it wrote to stderr, :func:`~xeforge_core.inductor.generate.last_step`); a
    timeout there is the job's limit (``outcome.timeout_s``, seconds), with the command that gives
    it more time."""
    from xeforge_core.inductor.generate import STEP_MARK, STEPS, last_step
    from xeforge_core.verdict import VerdictKind
    from xeforge_core.worker.lifted import names_in, user_text
    from xeforge_core.worker_outcome import classify, innermost_line

    kind, reason = classify(outcome)
    stderr = outcome.stderr or ""
    step = last_step(stderr)
    line = innermost_line(stderr, f"{name}.py")
    lines = source.splitlines()
    if line and 0 < line <= len(lines):  # a hang or a crash in the problem's own code: say where
        return GenerationError(f"the TorchInductor job ended without a result ({kind.value}: {reason}) while "
                               f"running the problem's code, at {name}.py:{line}: "
                               f"{user_text(lines[line - 1].strip(), names_in(source))}", stage=step or "process")
    if kind is VerdictKind.TIMEOUT and step is not None:
        # the limit, not a fault: say which step took so long and how to give it more time
        return GenerationError(f"the TorchInductor job reached its {outcome.timeout_s:.0f} s limit while {STEPS[step]}; "
                               f"a large problem may need more: `xeforge inductor capture {name}.py --timeout SECONDS` "
                               "saves its code and `xeforge inductor convert` writes the first version from it",
                               stage=step)
    tail = [ln for ln in stderr.strip().splitlines() if not ln.startswith(STEP_MARK)][-3:]
    during = f" while {STEPS[step]}" if step else ""
    return GenerationError(f"the TorchInductor job ended without a result ({kind.value}: {reason}){during}"
                           + (": " + " | ".join(tail) if tail else ""), stage=step or "process")


def capture(source: str, *, name: str = "problem", device: str = "cpu", overrides: dict[str, Any] | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S, seed: int = 0) -> Capture:
    """Run TorchInductor on the problem module ``source`` in a sandboxed worker and return its
    output code with the meaning of each argument.

    ``device``: ``cpu`` (code generated for the stand-in driver's GPU target, see
    :mod:`xeforge_core.inductor.driver`), ``cuda`` or ``xpu`` (the real driver); a device index
    (``cuda:1``) selects that device. ``overrides``: module-level size constants to trace at.

    Raises ``GenerationError`` with the failing step and Inductor's message."""
    from xeforge_core.inductor.generate import STEPS
    from xeforge_core.runner import run_worker

    device_type, _, index = device.partition(":")
    job = {"source": source, "filename": f"{name}.py", "device": device_type, "overrides": dict(overrides or {}),
           "seed": seed, "role": "inductor"}
    outcome = run_worker(job, timeout_s=timeout_s, module="xeforge_core.inductor.generate",
                         memory_bytes=DEFAULT_MEMORY_BYTES if device_type == "cpu" else None,
                         device_index=int(index) if index.isdigit() else None, use_pool=False)
    result = outcome.result
    if result is None:
        raise stopped_without_result(outcome, source, name=name)
    if not result.get("ok"):
        stage = str(result.get("stage") or "generate")
        what = STEPS.get(stage, stage)
        raise GenerationError(f"{what} failed: {result.get('error', 'no reason given')}", stage=stage)
    return Capture(problem=name, output_code=result["output_code"], graph_inputs=result["graph_inputs"],
                   outputs=result["outputs"], forward_params=result["forward_params"],
                   device=result.get("device", device_type), generated_for=result.get("generated_for", ""),
                   torch=result.get("torch", ""), triton=result.get("triton", ""), overrides=dict(overrides or {}),
                   specialised=dict(result.get("specialised") or {}), source_sha256=source_digest(source),
                   size_hints=dict(result.get("size_hints") or {}),
                   size_hints_note=str(result.get("size_hints_note") or ""),
                   constants=dict(result.get("constants") or {}))
