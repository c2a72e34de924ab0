"""The sample problems shipped in ``sample_kernels/`` and the Flash Attention teaching trajectory.

Each sample is a KernelBench-style kernel module ``NN_name.py`` (``Model``, ``get_inputs``,
``get_init_inputs``, Triton kernels launched on the inputs' own device) with its Xe-Forge spec
``NN_name.yaml`` and its PyTorch reference ``NN_name_ref.py``. The module docstring is one line,
``"<title>. Slow: <what the optimization stages should find>"``.

The trajectory (``sample_kernels/flash_attention_trajectory/manifest.yaml``) lists the naive
attention sample rewritten one stage at a time; each step carries its stage, the knowledge-base
rule it teaches and an annotation. The first steps serve every target; the target family (the
manifest's ``targets``: ``xpu`` for Intel Xe, ``cuda`` for NVIDIA Hopper) decides the rest, since
tile sizes, register-file modes and the hardware's copy and warp-scheduling features differ.
Steps are complete modules meant to be verified live (the UI replays them as candidates);
nothing here records or returns timings.

Everything is read statically (files, YAML, ``ast``): no kernel code runs in this process.

Public API::

    SAMPLES_DIR
    list_samples() -> list[SampleInfo]
    load_sample(name) -> Problem
    flash_attention_trajectory(target=None) -> list[TrajectoryStep]
    check_variants(problem) -> list[str]
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from xeforge_core.problem import Problem, ProblemError, load_problem
from xeforge_core.vocab.target import DEFAULT_FAMILY, TARGET_FAMILIES
from xeforge_core.worker.astutil import parse as parse_python

__all__ = [
    "SAMPLES_DIR",
    "TRAJECTORY_DIR",
    "SampleInfo",
    "TrajectoryStep",
    "list_samples",
    "load_sample",
    "check_variants",
    "flash_attention_trajectory",
    "trajectory_family",
]

#: The repository's ``sample_kernels/`` (override with ``XEFORGE_SAMPLES_DIR``).
SAMPLES_DIR = Path(os.environ.get("XEFORGE_SAMPLES_DIR")
                   or Path(__file__).resolve().parents[1] / "sample_kernels")
TRAJECTORY_DIR = SAMPLES_DIR / "flash_attention_trajectory"

_SAMPLE_RE = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.py$")


@dataclass(frozen=True)
class SampleInfo:
    """One sample problem: ``name`` is the file stem (``"07_gemm_fp32_upcast"``); ``title`` and
    ``slow`` come from the module's one-line docstring; paths are absolute."""

    name: str
    title: str
    slow: str
    kernel_path: Path
    spec_path: Path
    reference_path: Path

    @property
    def short_name(self) -> str:
        """The name without its ordering prefix (``"gemm_fp32_upcast"``)."""
        return self.name.split("_", 1)[1] if _SAMPLE_RE.match(self.name + ".py") else self.name


@dataclass
class TrajectoryStep:
    """One step of the Flash Attention trajectory.

    ``index`` 0 is the naive baseline; ``stage`` is a stage id (``"baseline"`` for step 0);
    ``rule_id`` the knowledge-base rule the step teaches for the trajectory's target family
    (``None`` where the knowledge base has no rule for it); ``code`` the step's full module source; ``problem`` the problem it is
    verified as (its ``kernel`` is this step, with the spec and reference the step is checked
    against: the causal step has its own); ``causal`` marks a step that computes another function
    than the baseline, whose speedup over the baseline is therefore not a like-for-like ratio.
    ``previous`` is the problem to verify this step against to see what the step itself gained:
    the previous step's problem (same spec and reference, previous code as the baseline); for
    step 0 and for a causal step, the step's own problem (nothing before it computes the same).
    ``target`` is the target family the step was written for (``xpu``, ``cuda``), ``None`` for a
    step every target shares.
    """

    index: int
    title: str
    stage: str
    rule_id: str | None
    annotation: str
    code: str
    problem: Problem
    path: Path
    spec_path: Path
    reference_path: Path
    causal: bool = False
    previous: Problem | None = None
    target: str | None = None


def _docstring_parts(path: Path) -> tuple[str, str]:
    """(title, what is slow) from the module docstring ``"<title>. Slow: <text>"``."""
    try:
        doc = ast.get_docstring(parse_python(path.read_text(encoding="utf-8"))) or ""
    except SyntaxError as exc:  # a broken sample is a bug worth naming precisely
        raise ProblemError(f"sample does not parse: {exc.msg}", file=path, line=exc.lineno) from exc
    doc = " ".join(doc.split())
    title, sep, slow = doc.partition(" Slow: ")
    if not sep:
        return doc.rstrip("."), ""
    return title.rstrip("."), slow.strip()


def list_samples(root: str | Path | None = None) -> list[SampleInfo]:
    """Every ``NN_name.py`` under ``root`` (default ``SAMPLES_DIR``) that has both a spec and a
    reference beside it, in file-name order."""
    base = Path(root) if root is not None else SAMPLES_DIR
    out: list[SampleInfo] = []
    for path in sorted(base.glob("*.py")):
        if not _SAMPLE_RE.match(path.name) or path.stem.endswith("_ref"):
            continue
        spec = path.with_suffix(".yaml")
        ref = path.with_name(f"{path.stem}_ref.py")
        if not (spec.is_file() and ref.is_file()):
            continue
        title, slow = _docstring_parts(path)
        out.append(SampleInfo(name=path.stem, title=title, slow=slow, kernel_path=path.resolve(),
                              spec_path=spec.resolve(), reference_path=ref.resolve()))
    return out


def _find_sample(name: str, root: str | Path | None = None) -> SampleInfo:
    samples = list_samples(root)
    for s in samples:
        if name in (s.name, s.short_name, s.kernel_path.name):
            return s
    known = ", ".join(s.name for s in samples) or "none"
    raise ProblemError(f"no sample named {name!r} (known: {known})")


def load_sample(name: str, root: str | Path | None = None) -> Problem:
    """The sample ``name`` (file stem, with or without its ``NN_`` prefix) as a Problem with its
    spec and reference. Raises ``ProblemError`` listing the known samples if there is none."""
    s = _find_sample(name, root)
    return load_problem(s.kernel_path, s.spec_path, s.reference_path)


def _manifest(root: Path) -> dict[str, Any]:
    path = root / "manifest.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ProblemError("trajectory manifest not found", file=path) from exc
    except yaml.YAMLError as exc:
        raise ProblemError(f"trajectory manifest is not valid YAML: {exc}", file=path) from exc
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise ProblemError("the manifest needs a non-empty 'steps' list", file=path, field="steps")
    return data


def check_variants(problem: Problem) -> list[str]:
    """The variants of a trajectory step's spec to verify it at: its ``ci`` entry and its
    ``check`` shapes (every spec variant that is not a ``bench-*`` shape), spec order."""
    names = list(problem.spec.variants) if problem.spec is not None else []
    return [n for n in names if not n.startswith("bench")]


def trajectory_family(target: Any = None) -> str:
    """The target family whose trajectory steps to take: ``target`` is a family (``"xpu"``,
    ``"cuda"``), a ``Target`` (its ``family``), a device string (``"cuda:1"``) or ``None`` (the
    product's target family, ``xpu``). Anything else (``"cpu"``, an unknown vendor) gives ``xpu``:
    the interpreter verifies the product's target's steps."""
    family = getattr(target, "family", None) or (str(target).split(":")[0].strip().lower() if target else "")
    return family if family in TARGET_FAMILIES else DEFAULT_FAMILY


def _manifest_steps(data: dict[str, Any], family: str, mpath: Path) -> list[tuple[dict[str, Any], str, str | None]]:
    """``(entry, where, target)`` of every step for ``family``: the shared ``steps`` first, then
    ``targets[family]``. Raises ``ProblemError`` for a ``targets`` section that is not a mapping
    of lists, or one without ``family``."""
    out: list[tuple[dict[str, Any], str, str | None]] = [(e, f"steps[{i}]", None) for i, e in enumerate(data["steps"])]
    targets = data.get("targets")
    if targets is None:
        return out
    if not isinstance(targets, dict) or not all(isinstance(v, list) for v in targets.values()):
        raise ProblemError("'targets' must map a target family to a list of steps", file=mpath, field="targets")
    if family not in targets:
        raise ProblemError(f"no steps for target family {family!r} (known: {', '.join(targets)})", file=mpath,
                           field="targets")
    return out + [(e, f"targets.{family}[{i}]", family) for i, e in enumerate(targets[family])]


def flash_attention_trajectory(target: Any = None, root: str | Path | None = None) -> list[TrajectoryStep]:
    """The Flash Attention teaching trajectory for ``target``'s family, baseline first (index 0).

    ``target``: see :func:`trajectory_family` (``None``: the product's target, Intel Xe).
    ``root``: the trajectory folder (default :data:`TRAJECTORY_DIR`). Each step's ``problem``
    pairs the step's code with the spec and reference named for it in the manifest (the
    manifest's top-level ``spec``/``reference`` unless the step gives its own), so
    ``verify(step.problem, step.code)`` checks the step against its reference.

    Raises ``ProblemError`` naming the manifest field for a malformed manifest.
    """
    base = Path(root) if root is not None else TRAJECTORY_DIR
    data = _manifest(base)
    mpath = base / "manifest.yaml"
    family = trajectory_family(target)
    steps: list[TrajectoryStep] = []
    for i, (entry, where, step_target) in enumerate(_manifest_steps(data, family, mpath)):
        if not isinstance(entry, dict):
            raise ProblemError("each step must be a mapping", file=mpath, field=where)
        for key in ("file", "title", "stage", "annotation"):
            if not entry.get(key):
                raise ProblemError(f"step is missing {key!r}", file=mpath, field=f"{where}.{key}")
        spec_rel = entry.get("spec") or data.get("spec")
        ref_rel = entry.get("reference") or data.get("reference")
        if not spec_rel or not ref_rel:
            raise ProblemError("no spec/reference for this step", file=mpath, field=where)
        path = (base / entry["file"]).resolve()
        spec_path = (base / spec_rel).resolve()
        ref_path = (base / ref_rel).resolve()
        problem = load_problem(path, spec_path, ref_path)
        rule = entry.get("rule_id")
        if isinstance(rule, dict):  # one rule per target family
            rule = rule.get(family)
        steps.append(TrajectoryStep(
            index=i,
            title=str(entry["title"]),
            stage=str(entry["stage"]),
            rule_id=str(rule) if rule else None,
            annotation=" ".join(str(entry["annotation"]).split()),
            code=problem.kernel.source,
            problem=problem,
            path=path,
            spec_path=spec_path,
            reference_path=ref_path,
            causal=bool(data.get("spec")) and spec_path != (base / str(data["spec"])).resolve(),
            target=step_target,
        ))
    for i, step in enumerate(steps):
        step.previous = steps[i - 1].problem if i > 0 and not step.causal else step.problem
    return steps


def sample_hint(path: str | Path) -> str:
    """``"; it is a sample: sample_kernels/03_row_softmax.py"`` when ``path`` does not exist but
    names a sample of :data:`SAMPLES_DIR` (by file name, with or without ``.py``), else ``""``:
    what a user who typed a sample's name meant."""
    p = Path(path)
    if p.exists():
        return ""
    for name in (p.name, p.name + ".py"):
        found = SAMPLES_DIR / name
        if found.is_file():
            try:
                shown = found.relative_to(Path.cwd())
            except ValueError:
                shown = found
            return f"; it is a sample: {shown}"
    return ""
