"""The records a session hands out (versions, kept candidates, diffs) and the commit-message
format they are read from: a subject, a body (the rationale) and ``Key: value`` trailers.

Standard library and the verdict model only, so reports and pages can use them without git.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.verdict import StepStatus, Verdict

CANDIDATE_REF_PREFIX = "refs/candidates/"



@dataclass
class Version:
    """One commit on the session branch.

    ``index`` is its position (0 = baseline); ``kind`` is ``baseline``, ``engine`` (an approved
    engine candidate), ``manual``, ``portability`` or ``restore``; ``speedup`` is the verified
    speedup over its parent version (``None``: not measured), ``cumulative_speedup`` the product
    back to the baseline (``None`` as soon as one link was not measured); ``time`` is unix
    seconds.
    """

    sha: str
    index: int
    kind: str
    summary: str
    message: str
    time: float
    stage: str | None = None
    engine: str | None = None
    model: str | None = None
    verdict: str | None = None
    speedup: float | None = None
    cumulative_speedup: float | None = None
    device: str | None = None
    iteration: int | None = None
    candidate: str | None = None
    restores: str | None = None
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.sha[:10]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["short"] = self.short
        return data


@dataclass
class CandidateRecord:
    """One candidate kept under ``refs/candidates/<stage>/<n>``.

    ``id`` is ``"<stage>/<n>"``; ``parent`` the version it was proposed (and verified) against;
    ``status`` one of ``pending``, ``approved``, ``rejected``, ``superseded``; ``verdict`` the
    stored verdict (``None`` until one is recorded); ``approved_as`` the branch commit it became.
    """

    id: str
    stage: str
    number: int
    sha: str
    parent: str
    engine: str
    model: str | None
    iteration: int | None
    rationale: str
    status: str
    reason: str
    time: float
    verdict: Verdict | None = None
    based_on: str | None = None
    approved_as: str | None = None

    @property
    def ref(self) -> str:
        return CANDIDATE_REF_PREFIX + self.id

    @property
    def speedup(self) -> float | None:
        return self.verdict.speedup if self.verdict else None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "verdict"}
        data["ref"] = self.ref
        data["verdict"] = self.verdict.to_dict() if self.verdict else None
        data["verdict_kind"] = self.verdict.kind.value if self.verdict else None
        data["speedup"] = self.speedup
        return data


@dataclass
class FileDiff:
    """The unified diff of one file between two versions (``status``: ``modified``, ``added``,
    ``deleted``)."""

    path: str
    status: str
    diff: str
    old: str
    new: str


@dataclass
class SessionDiff:
    """The difference between two versions: ``text`` is the whole unified diff, ``files`` one
    entry per changed file (unchanged files are left out)."""

    old: str
    new: str
    files: list[FileDiff]

    @property
    def text(self) -> str:
        return "".join(f.diff for f in self.files)

    @property
    def empty(self) -> bool:
        return not self.files


# --------------------------------------------------------------------------------------------
# commit messages and labels


def device_label(fingerprint: dict[str, Any] | None) -> str:
    """A short human name of a device fingerprint dict (``"cuda:0 NVIDIA H200"``, ``"cpu
    (Triton interpreter)"``); ``"unknown"`` for an empty one."""
    if not fingerprint:
        return "unknown"
    if isinstance(fingerprint.get("label"), str):
        return fingerprint["label"]
    kind = str(fingerprint.get("type") or fingerprint.get("device_type") or fingerprint.get("device") or "")
    index = fingerprint.get("index")
    name = fingerprint.get("name") or fingerprint.get("device_name") or ""
    where = f"{kind}:{index}" if kind and index is not None and kind != "cpu" else kind
    if kind == "cpu" and not name:
        name = "(Triton interpreter)" if fingerprint.get("interpreter", True) else ""
    label = " ".join(p for p in (where, str(name)) if p).strip()
    return label or "unknown"


def format_speedup(value: float | None) -> str:
    """``"1.23x"`` or ``"not measured"``."""
    return f"{value:.3f}x" if value is not None else "not measured"


def parse_speedup(text: str | None) -> float | None:
    """The number of a ``Speedup`` trailer (``"1.234x"`` -> 1.234); ``None`` for ``not measured``."""
    if not text:
        return None
    m = re.match(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*x?\s*$", text)
    return float(m.group(1)) if m else None


def speed_measured(verdict: Verdict | None) -> bool:
    """True when the verdict holds a real timing (a GPU measurement), False on cpu/interpreter
    or when the performance step did not run."""
    if verdict is None or verdict.speedup is None:
        return False
    step = verdict.step("performance")
    return step is None or step.status is StepStatus.PASSED


def parse_trailers(message: str) -> dict[str, str]:
    """The ``Key: value`` trailers of the last paragraph of a commit message."""
    paragraphs = [p for p in re.split(r"\n\s*\n", message.strip()) if p.strip()]
    if not paragraphs:
        return {}
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines():
        m = re.match(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$", line)
        if not m:
            return {}
        out[m.group(1)] = m.group(2).strip()
    return out


def trailer_block(trailers: dict[str, Any]) -> str:
    """``Key: value`` lines of the non-empty ``trailers`` (values on one line)."""
    lines = []
    for key, value in trailers.items():
        if value is None or value == "":
            continue
        text = " ".join(str(value).split())
        lines.append(f"{key}: {text}")
    return "\n".join(lines)


def commit_message(subject: str, body: str, trailers: dict[str, Any]) -> str:
    """A commit message: the subject (one line, at most 120 characters), the body (quoted when
    it would otherwise read as trailers) and the trailer block."""
    subject = " ".join(subject.split())[:120] or "update"
    parts = [subject]
    body = body.strip()
    if body:
        # keep a body paragraph from being read as trailers
        if parse_trailers(body):
            body = "> " + body.replace("\n", "\n> ")
        parts.append(body)
    block = trailer_block(trailers)
    if block:
        parts.append(block)
    return "\n\n".join(parts) + "\n"
