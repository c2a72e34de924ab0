"""The device family and the target: the words every layer uses for "which hardware".

A **device family** is one of Triton's GPU backends the product knows, or the cpu interpreter:
:class:`Family`. The *run device* (where verification runs) is of any family; a *target* (the
hardware a session optimizes for) is of a GPU family only (:data:`TARGET_FAMILIES`), and the
product's target when nothing names one is an Intel Xe GPU (:data:`DEFAULT_FAMILY`).

A :class:`Target` is a hardware profile of the knowledge base, by id, plus the family and
architecture its rules, lints, codemods and search spaces are chosen by. Which target a session
has is decided in one place, ``xeforge_core.target.resolve``, which reads the knowledge base;
this module is data only (standard library), so every layer may import it.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any, Protocol


class Family(str, enum.Enum):
    """A device family: ``xpu`` (Intel's Triton backend), ``cuda`` (NVIDIA's, the local stand-in)
    or ``cpu`` (Triton's interpreter: correct, but its times say nothing about a GPU). A member
    equals, hashes and formats as its string, so ``"xpu" == Family.XPU``."""

    XPU = "xpu"
    CUDA = "cuda"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: Every device type, in the order detection prefers them (a GPU first, the interpreter last).
DEVICE_TYPES: tuple[str, ...] = (Family.XPU.value, Family.CUDA.value, Family.CPU.value)

#: The families a target belongs to: which backend's rules, lints, codemods and search spaces
#: apply (``xpu``: Intel's Triton backend; ``cuda``: NVIDIA's, the local stand-in).
TARGET_FAMILIES: tuple[str, ...] = (Family.XPU.value, Family.CUDA.value)

#: The product's target family when neither the user nor the run device names one (the cpu
#: interpreter, an unknown GPU of no family): an Intel Xe GPU.
DEFAULT_FAMILY: str = Family.XPU.value


def gpu_family(device_type: str | None) -> str | None:
    """``device_type`` (``"xpu"``, ``"cuda:1"``) when it names a target family, else ``None``."""
    family = (device_type or "").split(":")[0]
    return family if family in TARGET_FAMILIES else None


class _Profile(Protocol):
    """What :meth:`Target.of` reads of a knowledge-base hardware profile."""

    id: str
    target: str
    arch: str
    name: str


class _ProfileSource(Protocol):
    """What :meth:`Target.hardware` reads of a knowledge base: its profiles by id."""

    profiles: dict[str, Any]


@dataclass(frozen=True)
class Target:
    """One target: ``profile`` (the knowledge-base profile id, e.g. ``arc_pro_b70``), ``family``
    (``xpu``/``cuda``), ``arch`` (``xe2``, ``xe-hpc``, ``xe-lp``, ``hopper``), ``name``
    (``Intel Arc Pro B70``) and ``chosen`` (``True`` when the user picked it, ``False`` when it
    was derived from the run device or the default)."""

    profile: str
    family: str
    arch: str
    name: str
    chosen: bool = False

    @property
    def label(self) -> str:
        """``"Intel Arc Pro B70 (xe2, xpu)"``."""
        return f"{self.name} ({self.arch}, {self.family})"

    def hardware(self, kb: _ProfileSource) -> Any:
        """The ``HardwareProfile`` of this target in the knowledge base ``kb``
        (``load_knowledge()``). Raises ``KeyError`` when ``kb`` has no such profile."""
        return kb.profiles[self.profile]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what a session stores)."""
        return asdict(self)

    @classmethod
    def of(cls, profile: _Profile, *, chosen: bool = False) -> Target:
        """The target of a knowledge-base profile."""
        return cls(profile=profile.id, family=str(profile.target), arch=profile.arch, name=profile.name,
                   chosen=chosen)
