"""The knowledge base: hardware profiles, rules and autotune search spaces, loaded from YAML.

The data lives under ``knowledge/`` at the repository root (see ``knowledge/README.md`` for the
schema in prose); this module is the schema (pydantic) and the loader. Nothing here executes
kernel code.

Public API::

    kb = load_knowledge()                 # cached per root directory
    kb.profiles["arc_b580"]               # HardwareProfile
    kb.profile_for_device("Intel(R) Arc(TM) B580 Graphics")
    kb.rules_for(stage="dtype_fix", target="xpu")
    kb.search_space_for("xpu", arch="xe2").configs("gemm")

Errors: a file that is not valid YAML or does not match the schema raises
``KnowledgeError`` (a ``ValueError`` with ``file`` and ``field`` attributes), whose text names
the YAML file and the dotted field path.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from xeforge_core import lints
from xeforge_core.compile_options import GRF_MODE_VALUES
from xeforge_core.errors import XeForgeError
from xeforge_core.vocab import roofline
from xeforge_core.vocab.stages import ALL_STAGE_IDS, CODEMODS, STAGE_IDS
from xeforge_core.vocab.target import TARGET_FAMILIES

#: The profile a target family stands for when no particular device is named: the Arc Pro B70
#: (the Xe-Forge paper's testbed) for xpu, the H200 (the NVIDIA machine the backend is
#: exercised on) for cuda.
REFERENCE_PROFILE: dict[str, str] = {"xpu": "arc_pro_b70", "cuda": "nvidia_h200"}

KNOWLEDGE_ROOT = Path(__file__).resolve().parents[1] / "knowledge"

#: A target family as the YAML files spell it (``xeforge_core.vocab.target.TARGET_FAMILIES``).
TargetFamily = Literal[TARGET_FAMILIES]  # type: ignore[valid-type]
Severity = Literal["error", "warning", "info"]


class KnowledgeError(XeForgeError, ValueError):
    """A knowledge-base file that cannot be used: ``file`` is the YAML path, ``field`` the
    dotted field path inside it (``None`` for whole-file errors such as bad YAML)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sourced(_Strict):
    """One numeric (or list) fact with where it came from.

    ``value`` may be ``None`` when no trustworthy public number exists (the ``note`` says why);
    ``source`` is a URL, a file path in a named repository, or ``FACTS.md`` for measurements
    made on this project's machines.
    """

    value: float | int | list[int] | None
    source: str = Field(min_length=3)
    note: str = ""


class HardwareProfile(_Strict):
    """A device profile. Units: bytes for memory sizes, GB/s for bandwidth (10^9 bytes/s),
    TFLOP/s (10^12 operations/s, dense, no sparsity) for peaks, MHz for clocks.

    ``match`` lists case-insensitive substrings of the device name as torch reports it
    (``torch.xpu.get_device_name()`` / ``torch.cuda.get_device_name()``).
    ``supported`` is ``False`` for devices torch.xpu does not support; ``use_instead`` then
    lists what to use instead.
    """

    id: str
    name: str
    vendor: Literal["intel", "nvidia"]
    arch: str
    target: TargetFamily
    match: list[str] = Field(min_length=1)
    supported: bool = True
    use_instead: list[str] = Field(default_factory=list)
    compute_unit_name: str
    compute_units: Sourced
    subgroup_sizes: Sourced
    slm_bytes_per_workgroup: Sourced
    l2_bytes: Sourced
    grf_modes: list[str] = Field(default_factory=list)
    grf_bytes_per_register: Sourced | None = None
    max_warps_per_workgroup: Sourced
    #: most programs a launch grid may have on axis 0, 1 and 2
    max_grid: Sourced | None = None
    peak_tflops: dict[str, Sourced]
    memory_bandwidth_gbps: Sourced
    memory_bytes: Sourced | None = None
    clock_mhz: Sourced | None = None
    has_matrix_engine: bool = True
    dpas_shape: str | None = None
    notes: list[str] = Field(default_factory=list)

    @field_validator("grf_modes")
    @classmethod
    def _grf(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if m not in GRF_MODE_VALUES]
        if bad:
            raise ValueError(f"unknown GRF mode(s) {bad}; allowed: {list(GRF_MODE_VALUES)}")
        return v

    @field_validator("peak_tflops")
    @classmethod
    def _dtypes(cls, v: dict[str, Sourced]) -> dict[str, Sourced]:
        allowed = {"fp64", "fp32", "tf32", "fp16", "bf16", "int8", "fp8"}
        bad = sorted(set(v) - allowed)
        if bad:
            raise ValueError(f"unknown dtype key(s) {bad}; allowed: {sorted(allowed)}")
        if "fp32" not in v:
            raise ValueError("peak_tflops needs at least fp32")
        return v

    @model_validator(mode="after")
    def _unsupported_needs_advice(self) -> HardwareProfile:
        if not self.supported and not self.use_instead:
            raise ValueError("an unsupported device needs use_instead advice")
        return self

    def peak(self, dtype: str) -> float | None:
        """Peak TFLOP/s for a dtype name (``float16``/``fp16``/``torch.float16`` all work);
        falls back to fp32 when the dtype has no entry. ``None`` if unknown."""
        key = _dtype_key(dtype)
        fact = self.peak_tflops.get(key) or self.peak_tflops.get("fp32")
        return float(fact.value) if fact and fact.value is not None else None

    @property
    def bandwidth_gbps(self) -> float | None:
        """Memory bandwidth in GB/s (10^9 bytes/s), or ``None`` when unknown."""
        v = self.memory_bandwidth_gbps.value
        return float(v) if v is not None else None

    def ridge_point(self, dtype: str = "fp32") -> float | None:
        """Arithmetic intensity (FLOP per byte) where the roofline turns from memory-bound
        to compute-bound: peak FLOP/s / bandwidth bytes/s. ``None`` without both numbers."""
        return roofline.ridge_point(self.peak(dtype), self.bandwidth_gbps)

    def summary(self) -> dict[str, Any]:
        """Plain values (no sources) for prompts and tables."""
        return {
            "id": self.id,
            "name": self.name,
            "arch": self.arch,
            "target": self.target,
            "supported": self.supported,
            self.compute_unit_name + "s": self.compute_units.value,
            "subgroup_sizes": self.subgroup_sizes.value,
            "slm_bytes_per_workgroup": self.slm_bytes_per_workgroup.value,
            "l2_bytes": self.l2_bytes.value,
            "grf_modes": list(self.grf_modes),
            "max_warps_per_workgroup": self.max_warps_per_workgroup.value,
            "peak_tflops": {k: f.value for k, f in self.peak_tflops.items()},
            "memory_bandwidth_gbps": self.memory_bandwidth_gbps.value,
            "dpas_shape": self.dpas_shape,
        }


def _dtype_key(dtype: str) -> str:
    d = str(dtype).lower().replace("torch.", "").replace("tl.", "")
    return {
        "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
        "float64": "fp64", "double": "fp64", "int8": "int8", "tfloat32": "tf32",
        "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    }.get(d, d)


class Example(_Strict):
    """A before/after pair: inline code, or ``path`` to a file under ``knowledge/examples/``."""

    before: str | None = None
    after: str | None = None
    before_path: str | None = None
    after_path: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Example:
        if not (self.before or self.before_path) or not (self.after or self.after_path):
            raise ValueError("an example needs before (or before_path) and after (or after_path)")
        return self


class Rule(_Strict):
    """One rule: what to do, why, a before/after example, where it applies, where it came from.

    ``stage`` is a stage id of ``vocab.stages``; ``targets`` the targets it applies to;
    ``triton`` a version specifier such as ``">=3.0"`` or ``">=3.0,<3.9"`` (``"*"`` for all);
    ``lint`` names a function in ``xeforge_core.lints`` (checked by the loader);
    ``codemod`` names the rules-engine codemod that implements ``fix`` (one the registry's
    stages name). ``decided_by_running``: the fault the rule describes shows when the kernel runs
    under the verifier (which runs every autotune config on NaN-filled fresh memory), so a
    verdict does not refuse a candidate on the lint alone; the correctness check decides and the
    finding stays a warning that names the rule. A lint is a static guess about a pattern; a
    kernel that breaks the pattern harmlessly (a fixed grid that over-covers every config's
    tiles, an output zeroed by another launch) must not be called wrong for it.
    """

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    title: str
    stage: str
    severity: Severity
    why: str
    example: Example
    targets: list[TargetFamily] = Field(min_length=1)
    triton: str = "*"
    sources: list[str] = Field(min_length=1)
    lint: str | None = None
    fix: str | None = None
    codemod: str | None = None
    decided_by_running: bool = False
    tags: list[str] = Field(default_factory=list)

    @field_validator("stage")
    @classmethod
    def _stage(cls, v: str) -> str:
        if v not in ALL_STAGE_IDS:
            raise ValueError(f"unknown stage {v!r}; one of {list(ALL_STAGE_IDS)}")
        return v

    @field_validator("codemod")
    @classmethod
    def _codemod(cls, v: str | None) -> str | None:
        if v is not None and v not in CODEMODS:
            raise ValueError(f"unknown codemod {v!r}; one of {list(CODEMODS)}")
        return v

    @field_validator("triton")
    @classmethod
    def _spec(cls, v: str) -> str:
        if v.strip() != "*":
            for part in v.split(","):
                if not re.fullmatch(r"\s*(>=|<=|==|<|>)\s*\d+(\.\d+){0,2}\s*", part):
                    raise ValueError(f"bad version specifier {part!r} (use e.g. '>=3.0,<3.9')")
        return v

    def applies_to_triton(self, version: str) -> bool:
        """Whether this rule applies to a Triton version string like ``3.6.0``."""
        return version_matches(version, self.triton)

    def to_dict(self, root: Path | None = None) -> dict[str, Any]:
        """Plain data for tables and pages, with the example code read in (``before``/``after``)."""
        before, after = self.example_code(root)
        data = self.model_dump(exclude={"example"})
        data.update(before=before, after=after)
        return data

    def example_code(self, root: Path | None = None) -> tuple[str, str]:
        """The (before, after) code text, reading ``*_path`` files relative to the KB root."""
        base = root or KNOWLEDGE_ROOT
        before = self.example.before or (base / str(self.example.before_path)).read_text()
        after = self.example.after or (base / str(self.example.after_path)).read_text()
        return before, after


def _vtuple(v: str) -> tuple[int, ...]:
    nums = re.findall(r"\d+", v)[:3]
    return tuple(int(n) for n in nums) + (0,) * (3 - len(nums))


def version_matches(version: str, spec: str) -> bool:
    """True when ``version`` (e.g. ``3.6.0``, ``3.9.0+git``) satisfies ``spec`` (e.g.
    ``>=3.0,<3.9``; ``*`` matches everything)."""
    if spec.strip() == "*":
        return True
    have = _vtuple(version)
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(>=|<=|==|<|>)\s*([\d.]+)\s*", part)
        if not m:
            return False
        op, want = m.group(1), _vtuple(m.group(2))
        ok = {">=": have >= want, "<=": have <= want, "==": have == want,
              "<": have < want, ">": have > want}[op]
        if not ok:
            return False
    return True


class AutotuneConfig(_Strict):
    """One autotune config: ``kwargs`` are the meta-parameters (BLOCK_*, GROUP_SIZE_M, ...);
    ``options`` are backend compile options passed through ``triton.Config`` kwargs
    (``grf_mode``, and ``warp_size`` for the sub-group size on xpu). ``loop_stages``: the
    pipeline depth of a non-GEMM kernel's streaming loops (``tl.range(..., num_stages=)``), which
    the kernel's ``num_stages`` does not give them: it "only pipelines loads that feed into dot
    operations" (Triton's ``tl.range`` documentation); ``None`` leaves the loops as written."""

    kwargs: dict[str, int]
    num_warps: int
    num_stages: int
    options: dict[str, str | int] = Field(default_factory=dict)
    loop_stages: int | None = Field(default=None, ge=1)

    @field_validator("num_warps")
    @classmethod
    def _pow2(cls, v: int) -> int:
        if v <= 0 or v & (v - 1):
            raise ValueError(f"num_warps={v} is not a power of two")
        return v

    @model_validator(mode="after")
    def _check(self) -> AutotuneConfig:
        for k, v in self.kwargs.items():
            if k.startswith("BLOCK") and (v <= 0 or v & (v - 1)):
                raise ValueError(f"{k}={v} is not a power of two")
        grf = self.options.get("grf_mode")
        if grf is not None:
            if str(grf) not in GRF_MODE_VALUES:
                raise ValueError(f"grf_mode {grf!r} not in {list(GRF_MODE_VALUES)}")
            if str(grf) in ("256", "512") and self.num_warps > 32:
                raise ValueError("grf_mode 256/512 cannot be combined with num_warps > 32")
        return self

    def all_kwargs(self) -> dict[str, Any]:
        """What goes into ``triton.Config(kwargs, ...)``: meta-parameters plus options."""
        return {**self.kwargs, **self.options}


class SearchSpace(_Strict):
    """Autotune search space for one target (and architecture family).

    ``kinds`` maps a kernel kind (``gemm``, ``reduction``) to its configs; ``keys`` the
    suggested ``@triton.autotune(key=...)`` names per kind; ``grf_mode_placement`` records
    where the GRF mode goes (see knowledge/contradictions.md, section 1).
    """

    id: str
    target: TargetFamily
    archs: list[str] = Field(min_length=1)
    grf_mode_placement: str
    sources: list[str] = Field(min_length=1)
    keys: dict[str, list[str]] = Field(default_factory=dict)
    kinds: dict[str, list[AutotuneConfig]]

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: dict[str, list[AutotuneConfig]]) -> dict[str, list[AutotuneConfig]]:
        for needed in ("gemm", "reduction"):
            if not v.get(needed):
                raise ValueError(f"needs a non-empty {needed!r} config list")
        return v

    def configs(self, kind: str = "gemm") -> list[AutotuneConfig]:
        """Configs for ``kind``; raises ``KeyError`` naming the known kinds."""
        if kind not in self.kinds:
            raise KeyError(f"no {kind!r} configs in search space {self.id} (have {sorted(self.kinds)})")
        return list(self.kinds[kind])


class KnowledgeBase(BaseModel):
    """Everything under ``knowledge/``, validated. ``root`` is the directory it came from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    root: Path
    profiles: dict[str, HardwareProfile]
    rules: dict[str, Rule]
    search_spaces: dict[str, SearchSpace]

    def profile_for_device(self, name: str | None) -> HardwareProfile | None:
        """The profile whose ``match`` substrings occur in ``name`` (case-insensitive); the
        longest matching substring wins. ``None`` if nothing matches or ``name`` is empty."""
        if not name:
            return None
        low = name.lower()
        best: tuple[int, HardwareProfile] | None = None
        for p in self.profiles.values():
            for m in p.match:
                if m.lower() in low and (best is None or len(m) > best[0]):
                    best = (len(m), p)
        return best[1] if best else None

    def default_profile(self, target: str) -> HardwareProfile | None:
        """The reference profile of a target family (:data:`REFERENCE_PROFILE`), or ``None``."""
        return self.profiles.get(REFERENCE_PROFILE.get(target, ""))

    def rules_for(self, *, stage: str | None = None, target: str | None = None,
                  triton_version: str | None = None) -> list[Rule]:
        """Rules filtered by stage, target and Triton version, in id order."""
        out = []
        for r in sorted(self.rules.values(), key=lambda r: (ALL_STAGE_IDS.index(r.stage), r.id)):
            if stage and r.stage != stage:
                continue
            if target and target not in r.targets:
                continue
            if triton_version and not r.applies_to_triton(triton_version):
                continue
            out.append(r)
        return out

    def rules_by_stage(self, target: str | None = None) -> dict[str, list[Rule]]:
        """Rules grouped by stage id, every stage present (canonical order), filtered by target."""
        return {s: self.rules_for(stage=s, target=target) for s in STAGE_IDS}

    def profiles_table(self, ids: list[str] | None = None) -> list[dict[str, Any]]:
        """Profiles side by side: one row per fact (``{"fact": label, <profile id>: value}``),
        in the order of ``ids`` (default: all profiles). Unknown ids raise ``KeyError``."""
        chosen = [self.profiles[i] for i in (ids or list(self.profiles))]
        facts: list[tuple[str, Any]] = [
            ("name", lambda p: p.name), ("architecture", lambda p: p.arch), ("target", lambda p: p.target),
            ("supported", lambda p: p.supported),
            ("compute units", lambda p: f"{p.compute_units.value} {p.compute_unit_name}s"),
            ("sub-group sizes", lambda p: p.subgroup_sizes.value),
            ("max warps per work-group", lambda p: p.max_warps_per_workgroup.value),
            ("SLM per work-group (bytes)", lambda p: p.slm_bytes_per_workgroup.value),
            ("L2 (bytes)", lambda p: p.l2_bytes.value),
            ("GRF modes", lambda p: ", ".join(p.grf_modes) or "-"),
            ("memory bandwidth (GB/s)", lambda p: p.memory_bandwidth_gbps.value),
        ]
        for dt in ("fp64", "fp32", "tf32", "fp16", "bf16", "int8", "fp8"):
            facts.append((f"peak {dt} (TFLOP/s)",
                          lambda p, dt=dt: p.peak_tflops[dt].value if dt in p.peak_tflops else None))
        facts.append(("ridge point fp16 (FLOP/byte)",
                      lambda p: round(p.ridge_point("fp16"), 1) if p.ridge_point("fp16") else None))
        return [{"fact": label, **{p.id: get(p) for p in chosen}} for label, get in facts]

    def search_space_for(self, target: str, arch: str | None = None) -> SearchSpace | None:
        """The search space for a target; with ``arch`` (e.g. ``xe2``, ``xe-hpc``), the one
        listing it, else the first for the target."""
        cands = [s for s in self.search_spaces.values() if s.target == target]
        if arch:
            for s in cands:
                if arch in s.archs:
                    return s
        return cands[0] if cands else None


def _loc(err: dict[str, Any], prefix: str = "") -> str:
    parts = [str(p) for p in err.get("loc", ())]
    out = prefix
    for p in parts:
        if p.isdigit():
            out += f"[{p}]"
        else:
            out += ("." if out else "") + p
    return out


def _read_yaml(path: Path) -> Any:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise KnowledgeError(f"not valid YAML{line}: {getattr(e, 'problem', e)}", file=path) from e
    except OSError as e:
        raise KnowledgeError(f"cannot read: {e}", file=path) from e
    return data


def _validate(model: type[BaseModel], data: Any, path: Path, prefix: str = "") -> Any:
    if not isinstance(data, dict):
        raise KnowledgeError(f"expected a mapping, got {type(data).__name__}", file=path, field=prefix or None)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        raise KnowledgeError(first["msg"], file=path, field=_loc(first, prefix) or None) from e


def _load(root: Path) -> KnowledgeBase:
    if not root.is_dir():
        raise KnowledgeError("knowledge directory not found", file=root)
    profiles: dict[str, HardwareProfile] = {}
    for path in sorted((root / "hardware").glob("*.yaml")):
        p = _validate(HardwareProfile, _read_yaml(path), path)
        if p.id in profiles:
            raise KnowledgeError(f"duplicate profile id {p.id!r}", file=path, field="id")
        profiles[p.id] = p
    rules: dict[str, Rule] = {}
    lint_names = set(lints.LINTS)
    for path in sorted((root / "rules").glob("*.yaml")):
        data = _read_yaml(path)
        items = data.get("rules") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise KnowledgeError("expected a top-level 'rules:' list", file=path, field="rules")
        for i, item in enumerate(items):
            r = _validate(Rule, item, path, prefix=f"rules[{i}]")
            if r.id in rules:
                raise KnowledgeError(f"duplicate rule id {r.id!r}", file=path, field=f"rules[{i}].id")
            if r.lint and r.lint not in lint_names:
                raise KnowledgeError(f"lint {r.lint!r} is not a function in xeforge_core.lints",
                                     file=path, field=f"rules[{i}].lint")
            for attr in ("before_path", "after_path"):
                rel = getattr(r.example, attr)
                if rel and not (root / rel).is_file():
                    raise KnowledgeError(f"example file {rel!r} not found under {root}",
                                         file=path, field=f"rules[{i}].example.{attr}")
            rules[r.id] = r
    spaces: dict[str, SearchSpace] = {}
    for path in sorted((root / "search_spaces").glob("*.yaml")):
        s = _validate(SearchSpace, _read_yaml(path), path)
        spaces[s.id] = s
    for what, got in (("hardware", profiles), ("rules", rules), ("search_spaces", spaces)):
        if not got:
            raise KnowledgeError(f"no {what} YAML files found", file=root / what)
    return KnowledgeBase(root=root, profiles=profiles, rules=rules, search_spaces=spaces)


@functools.lru_cache(maxsize=8)
def _cached(root: str) -> KnowledgeBase:
    return _load(Path(root))


def load_knowledge(root: str | Path | None = None) -> KnowledgeBase:
    """Load and validate the knowledge base under ``root`` (default: the repository's
    ``knowledge/``). Cached per resolved root; call ``load_knowledge.cache_clear()`` after
    editing the files. Raises ``KnowledgeError`` naming the file and field on bad data."""
    return _cached(str(Path(root).resolve() if root else KNOWLEDGE_ROOT))


load_knowledge.cache_clear = _cached.cache_clear  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1)
def _probe_triton() -> tuple[str | None, bool, bool]:
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - triton may be absent or broken on this machine
        return None, False, False
    return getattr(triton, "__version__", None), hasattr(tl, "make_block_ptr"), hasattr(tl, "make_tensor_descriptor")


def installed_triton_pointer_api() -> dict[str, Any]:
    """Which block-I/O APIs the installed Triton offers, probed by attribute lookup on
    ``triton.language`` (no kernel is compiled or run).

    Returns ``{"version": str | None, "block_ptr": bool, "tensor_descriptor": bool,
    "preferred": "tensor_descriptor" | "block_ptr" | None}``. FACTS.md: Triton 3.9 removed
    block pointers (``make_block_ptr`` raises); 3.6 has both.
    """
    version, has_bp, desc = _probe_triton()
    if version is None and not has_bp and not desc:
        return {"version": None, "block_ptr": False, "tensor_descriptor": False, "preferred": None}
    block_ptr = has_bp and (version is None or version_matches(version, "<3.9"))
    preferred = "tensor_descriptor" if desc else ("block_ptr" if block_ptr else None)
    return {"version": version, "block_ptr": block_ptr, "tensor_descriptor": desc, "preferred": preferred}
