"""The target: the hardware a session optimizes for, decided in one place.

The target is a hardware profile of the knowledge base (``knowledge/hardware/*.yaml``: Arc B580,
Arc Pro B70, Max 1550, Iris Xe, H200) and the user's choice. It decides the plan, the codemods,
the lints and the autotune search spaces. The *run device* (xpu, cuda, or the cpu interpreter)
only decides where verification runs: running in the interpreter while targeting an Xe2 GPU
gives Xe2 codemods and search spaces (GRF mode, warps, sub-group size), verified for
correctness on the cpu.

:func:`resolve` is the one place a target is decided; the UI, the CLI, the loop and the session
all call it, so they agree. A session stores its :class:`Target` (``Target.to_dict()``; the dataclass itself is vocabulary,
``xeforge_core/vocab/target.py``).
"""

from __future__ import annotations

from typing import Any

from xeforge_core.errors import TargetError, nearest_name_hint
from xeforge_core.knowledge import REFERENCE_PROFILE, HardwareProfile, KnowledgeBase, load_knowledge
from xeforge_core.vocab.target import DEFAULT_FAMILY, TARGET_FAMILIES, Target

#: The families a target may name (kept under this name for the callers of ``resolve``).
FAMILIES = TARGET_FAMILIES

__all__ = ["DEFAULT_FAMILY", "FAMILIES", "Target", "TargetError", "hardware_of", "resolve", "targets"]


def hardware_of(target: Target, kb: KnowledgeBase | None = None) -> HardwareProfile:
    """The knowledge-base :class:`~xeforge_core.knowledge.HardwareProfile` of ``target``
    (``kb``: the loaded knowledge base, default ``load_knowledge()``)."""
    return target.hardware(kb or load_knowledge())


def targets(kb: KnowledgeBase | None = None) -> list[Target]:
    """Every target the user can choose (one per hardware profile): the reference profiles of
    each family first, then the others by name."""
    kb = kb or load_knowledge()
    first = [REFERENCE_PROFILE[f] for f in FAMILIES]
    rest = sorted((p for p in kb.profiles if p not in first), key=lambda p: kb.profiles[p].name)
    return [Target.of(kb.profiles[p], chosen=True) for p in first + rest if p in kb.profiles]


def _profile_named(choice: str, kb: KnowledgeBase) -> HardwareProfile | None:
    text = choice.strip()
    low = text.lower()
    if low in FAMILIES:
        return kb.profiles.get(REFERENCE_PROFILE[low])
    for p in kb.profiles.values():
        if low in (p.id.lower(), p.name.lower()):
            return p
    return None


def _device_type(device: Any) -> str | None:
    if device is None:
        return None
    if isinstance(device, str):
        return device.split(":")[0] or None
    if isinstance(device, dict):
        return device.get("type")
    return getattr(device, "type", None)


def _device_profile(device: Any, kb: KnowledgeBase) -> HardwareProfile | None:
    """The knowledge-base profile of the run device: the one detection recorded (a
    ``DeviceInfo``'s ``profile``, a fingerprint's ``profile_id``), else the one its name matches."""
    if device is None or isinstance(device, str):
        return None
    get = device.get if isinstance(device, dict) else lambda k, d=None: getattr(device, k, d)
    summary = get("profile")
    pid = summary.get("id") if isinstance(summary, dict) else get("profile_id")
    if pid in kb.profiles:
        return kb.profiles[pid]
    return kb.profile_for_device(get("name"))


def resolve(run_device: Any = None,
            choice: str | Target | dict[str, Any] | None = None, *,
            kb: KnowledgeBase | None = None) -> Target:
    """The target of a session: the user's ``choice`` when given, else the run device's.

    ``choice`` is a :class:`Target` (or its ``to_dict()``), a profile id (``arc_b580``), a profile
    name (``Intel Arc B580``, case-insensitive) or a family (``xpu``, ``cuda``: that family's
    reference profile). Without a choice: the profile of ``run_device`` (a ``DeviceInfo``, a
    fingerprint dict or a device string) when the knowledge base has one for it; else the
    reference profile of its family (an unknown NVIDIA GPU targets the H200's); else, on the cpu
    interpreter or with no device, the product's target, the Arc Pro B70. The strings older
    sessions stored (``cpu``, a device type) resolve the same way.

    Raises :class:`TargetError` naming the known profiles when ``choice`` names none.
    """
    kb = kb or load_knowledge()
    if isinstance(choice, Target):
        return choice
    if isinstance(choice, dict):
        profile = kb.profiles.get(str(choice.get("profile")))
        if profile is None:
            raise TargetError(f"unknown hardware profile {choice.get('profile')!r}; known: "
                              f"{', '.join(kb.profiles)}", field="target")
        return Target.of(profile, chosen=bool(choice.get("chosen", True)))
    if choice is not None and str(choice).strip() and str(choice).strip().lower() not in ("cpu", "auto"):
        profile = _profile_named(str(choice), kb)
        if profile is None:
            raise TargetError(f"unknown target {choice!r}; choose a hardware profile ("
                              f"{', '.join(kb.profiles)}) or a family ({', '.join(FAMILIES)})"
                              + nearest_name_hint(str(choice), [*kb.profiles, *FAMILIES]), field="target")
        return Target.of(profile, chosen=True)
    profile = _device_profile(run_device, kb)
    if profile is None:
        family = _device_type(run_device)
        family = family if family in FAMILIES else DEFAULT_FAMILY
        profile = kb.profiles[REFERENCE_PROFILE[family]]
    return Target.of(profile, chosen=False)
