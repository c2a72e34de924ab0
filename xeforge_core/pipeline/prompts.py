"""The stage prompts: each stage's Jinja2 Markdown template filled into a prompt a person can
read and copy into any chat LLM (the llm engine sends the same text).

``render_prompt`` fills ``xeforge_core/prompts/<stage>.md`` (extending ``_base.md``) with the
code, the stage's issues, the target's hardware profile, the problem's shape/roofline facts
(``problem_context``), the knowledge-base rules and the last verdict's feedback. The stages
themselves are data in :mod:`xeforge_core.vocab.stages`.

Public API::

    problem_context(problem, variant=None, profile=None) -> dict
    render_prompt(stage_id, *, original_code, current_code, issues, profile, problem_context,
                  rules, examples, feedback=None, position=None) -> str
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from xeforge_core.knowledge import (
    HardwareProfile,
    Rule,
    SearchSpace,
    installed_triton_pointer_api,
    load_knowledge,
)
from xeforge_core.vocab import roofline
from xeforge_core.vocab.stages import Stage, get_stage

if TYPE_CHECKING:
    from xeforge_core.problem import Problem, Variant

#: The prompt templates (package data): one Markdown/Jinja2 file per stage, plus ``_base.md``.
PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"

#: Always-on constraints, shared by every stage.
COMMON_CONSTRAINTS: tuple[str, ...] = (
    "the module's interface: class Model (same __init__ arguments), forward() inputs and outputs, "
    "get_inputs() and get_init_inputs()",
    "the output shape, dtype and values (within the spec's tolerances), including NaN/Inf placement",
    "the hot computation stays in Triton kernels: no replacement by torch ops, no cached outputs "
    "across calls, no writes to the inputs",
)


# --------------------------------------------------------------------------------------
# problem context
# --------------------------------------------------------------------------------------


def problem_context(problem: Problem | None = None, variant: Variant | str | None = None,
                    profile: HardwareProfile | None = None
                    ) -> dict[str, Any]:
    """Shape and roofline facts of one variant of a problem, for prompts and reports.

    ``problem`` is an ``xeforge_core.problem.Problem`` (or ``None``); ``variant`` a ``Variant``,
    a variant name, or ``None`` for the problem's default variant; ``profile`` the hardware
    profile to compare against. Returns a dict with ``name``, ``variant``, ``dims``,
    ``inputs`` ({name: {"shape", "dtype"}}), ``dtype``, ``flop``, ``bytes`` (input tensors
    only: a lower bound, see ``bytes_note``), ``arithmetic_intensity`` (FLOP/byte, an upper
    bound for the same reason), ``ridge_point`` (the profile's peak/bandwidth in FLOP/byte for
    that dtype), ``bound`` (``compute``, ``memory`` or ``unknown``), ``peak_tflops``,
    ``bandwidth_gbps`` and ``roofline_floor_us`` (the time no kernel can beat at the profile's
    peak, in µs), and ``eager_baseline`` (the current version is the problem's plain-PyTorch
    reference, so the answer is its first Triton version). Missing facts are ``None``; never
    raises for a problem without a spec.
    """
    ctx: dict[str, Any] = {
        "name": getattr(problem, "name", None), "variant": None, "dims": {}, "inputs": {}, "dtype": None,
        "flop": None, "bytes": None, "arithmetic_intensity": None, "ridge_point": None, "bound": "unknown",
        "peak_tflops": None, "bandwidth_gbps": None, "roofline_floor_us": None,
        "bytes_note": "bytes counts the input tensors only (weights held by the Model and outputs are not "
                      "known statically), so it is a lower bound and the intensity an upper bound",
        "profile": profile.name if profile is not None else None,
        "eager_baseline": bool(getattr(problem, "eager_baseline", False)),
    }
    v = None
    if problem is not None:
        try:
            if variant is None:
                v = problem.variant(problem.default_variant_name())
            elif isinstance(variant, str):
                v = problem.variant(variant)
            else:
                v = variant
        except Exception:  # noqa: BLE001 - a bad variant name leaves the context partial
            v = None
    elif variant is not None and not isinstance(variant, str):
        v = variant
    if v is not None:
        shapes = getattr(v, "shapes", {}) or {}
        dtypes = getattr(v, "input_dtypes", {}) or {}
        ctx.update(variant=v.name, dims=dict(v.dims), flop=v.flop, bytes=v.bytes,
                   inputs={n: {"shape": list(s), "dtype": dtypes.get(n, v.dtype)} for n, s in shapes.items()})
        ctx["dtype"] = v.dtype or next(iter(dtypes.values()), None)
    if ctx["flop"] and ctx["bytes"]:
        ctx["arithmetic_intensity"] = ctx["flop"] / ctx["bytes"]
    if profile is not None:
        dtype = ctx["dtype"] or "fp32"
        ctx["peak_tflops"] = profile.peak(dtype)
        ctx["bandwidth_gbps"] = profile.bandwidth_gbps
        ctx["ridge_point"] = profile.ridge_point(dtype)
        ctx["bound"] = roofline.bound(ctx["arithmetic_intensity"], ctx["ridge_point"])
        floors = []
        if ctx["flop"] and ctx["peak_tflops"]:
            floors.append(ctx["flop"] / (ctx["peak_tflops"] * 1e12))
        if ctx["bytes"] and ctx["bandwidth_gbps"]:
            floors.append(ctx["bytes"] / (ctx["bandwidth_gbps"] * 1e9))
        if floors:
            ctx["roofline_floor_us"] = max(floors) * 1e6
    return ctx


# --------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    """The template environment, built once (templates are compiled once per process)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)), autoescape=False, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["num"] = _num
    env.filters["fence"] = _fence
    return env


def _fence(code: str) -> str:
    """A backtick fence longer than any backtick run inside ``code`` (at least three)."""
    longest = max((len(m) for m in re.findall(r"`+", code or "")), default=0)
    return "`" * max(3, longest + 1)


def _num(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e6 or abs(v) < 1e-3:
            return f"{v:.3e}"
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _issue_rows(issues: Iterable[Any]) -> list[dict[str, Any]]:
    """Issues grouped by rule (first-seen order): {rule, severity, fix, places: [{line, message}]}."""
    groups: dict[str, dict[str, Any]] = {}
    for i in issues or []:
        rule = _get(i, "rule_id") or _get(i, "rule") or "issue"
        g = groups.setdefault(rule, {"rule": rule, "severity": _get(i, "severity") or "info",
                                     "fix": _get(i, "fix"), "places": []})
        sev = _get(i, "severity") or "info"
        if _SEV.get(sev, 3) < _SEV.get(g["severity"], 3):
            g["severity"] = sev
        g["places"].append({"line": _get(i, "line"), "message": _get(i, "message") or str(i)})
    return list(groups.values())


_SEV = {"error": 0, "warning": 1, "info": 2}


def _profile_view(profile: Any) -> dict[str, Any] | None:
    if profile is None:
        return None
    if isinstance(profile, HardwareProfile):
        view = profile.summary()
        view["compute_unit_name"] = profile.compute_unit_name
        view["compute_units"] = profile.compute_units.value
        view["use_instead"] = list(profile.use_instead)
        view["notes"] = list(profile.notes)
        return view
    view = dict(profile)
    view.setdefault("notes", [])
    view.setdefault("use_instead", [])
    return view


def _rule_rows(rules: Iterable[Any]) -> list[dict[str, Any]]:
    rows = []
    for r in rules or []:
        if isinstance(r, Rule):
            before, after = r.example_code()
            rows.append({"id": r.id, "title": r.title, "severity": r.severity, "why": " ".join(r.why.split()),
                         "fix": r.fix, "before": before.rstrip(), "after": after.rstrip()})
        else:
            rows.append({"id": _get(r, "id", ""), "title": _get(r, "title", ""), "severity": _get(r, "severity", ""),
                         "why": " ".join(str(_get(r, "why", "")).split()), "fix": _get(r, "fix"),
                         "before": (_get(r, "before") or "").rstrip(), "after": (_get(r, "after") or "").rstrip()})
    return rows


def _example_rows(examples: Iterable[Any]) -> list[dict[str, str]]:
    rows = []
    for e in examples or []:
        if isinstance(e, Rule):
            before, after = e.example_code()
            rows.append({"title": e.title, "before": before.rstrip(), "after": after.rstrip()})
        elif isinstance(e, (tuple, list)) and len(e) == 3:
            rows.append({"title": str(e[0]), "before": str(e[1]).rstrip(), "after": str(e[2]).rstrip()})
        else:
            rows.append({"title": str(_get(e, "title", "example")), "before": str(_get(e, "before", "")).rstrip(),
                         "after": str(_get(e, "after", "")).rstrip()})
    return rows


#: Stages whose prompt shows the target's autotune search space.
SEARCH_SPACE_STAGES = ("xpu_specific", "autotuning")


def _space_view(stage: Stage, profile: Any, space: SearchSpace | None) -> dict[str, str] | None:
    """The search space as Python source (``triton.Config`` lists and suggested keys)."""
    if stage.id not in SEARCH_SPACE_STAGES:
        return None
    if space is None and isinstance(profile, HardwareProfile):
        space = load_knowledge().search_space_for(profile.target, profile.arch)
    if space is None:
        return None
    lines = []
    for kind, configs in space.kinds.items():
        lines.append(f"{kind.upper()}_CONFIGS = [")
        for c in configs:
            kw = ", ".join(f"{k!r}: {v!r}".replace("'", '"') for k, v in c.all_kwargs().items())
            lines.append(f"    triton.Config({{{kw}}}, num_warps={c.num_warps}, num_stages={c.num_stages}),")
        lines.append("]")
        if kind in space.keys:
            lines.append(f"# suggested autotune key for {kind} kernels: {space.keys[kind]!r}".replace("'", '"'))
        lines.append("")
    placement = " ".join(space.grf_mode_placement.split())
    return {"id": space.id, "code": "\n".join(lines).rstrip(), "placement": f"GRF mode: {placement}"}


def _feedback_text(feedback: Any) -> str | None:
    if feedback is None:
        return None
    if hasattr(feedback, "feedback") and callable(feedback.feedback):
        return str(feedback.feedback())
    text = str(feedback).strip()
    return text or None


def render_prompt(stage_id: str, *, original_code: str, current_code: str, issues: Iterable[Any] = (),
                  profile: Any = None, problem_context: Mapping[str, Any] | None = None,
                  rules: Iterable[Any] = (), examples: Iterable[Any] = (), feedback: Any = None,
                  triton_api: Mapping[str, Any] | None = None, search_space: SearchSpace | None = None,
                  position: tuple[int, int] | None = None) -> str:
    """The prompt for one stage, as Markdown text a person can read and copy.

    ``issues``: the stage's ``analysis.Issue`` objects (or dicts with rule_id/severity/line/
    message/fix). ``profile``: a ``HardwareProfile`` (or a dict like ``profile.summary()``), or
    ``None``. ``problem_context``: the dict from ``problem_context()``. ``rules``: ``Rule``
    objects (or dicts with id/title/why/fix/before/after). ``examples``: extra before/after
    examples (``Rule``, ``(title, before, after)`` or dicts). ``feedback``: the last verdict (a
    ``Verdict``, whose ``feedback()`` text is used, or a string). ``triton_api``: which block-I/O
    APIs the Triton that will compile the code offers (``knowledge.installed_triton_pointer_api()``
    shape; default: the Triton installed here). ``search_space``: the autotune configs shown in
    the ``xpu_specific`` and ``autotuning`` prompts (default: the knowledge base's space for the
    profile's target and architecture). ``position``: ``(n, total)``, the stage's 1-based place
    in the session's plan, for the heading ("Stage 2 of 4"); without it the heading names the
    stage only. Raises ``KeyError`` for an unknown stage id.
    """
    stage = get_stage(stage_id)
    tmpl = _env().get_template(stage.template_name)
    same = original_code.strip() == current_code.strip()
    text = tmpl.render(
        stage=stage, common_constraints=COMMON_CONSTRAINTS, original_code=original_code.rstrip(),
        current_code=current_code.rstrip(), same_code=same, issues=_issue_rows(issues),
        profile=_profile_view(profile), ctx=dict(problem_context or {}), rules=_rule_rows(rules),
        examples=_example_rows(examples), feedback=_feedback_text(feedback),
        triton=dict(triton_api) if triton_api is not None else installed_triton_pointer_api(),
        search_space=_space_view(stage, profile, search_space), position=position)
    return _tidy(text)


def _tidy(text: str) -> str:
    """Collapse runs of blank lines outside fenced code blocks; code inside fences is kept
    byte for byte."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
        elif fence is not None and stripped == fence:
            fence = None
        elif fence is None and not stripped and out and not out[-1].strip():
            continue
        out.append(line)
    return "\n".join(out).strip() + "\n"
