"""The compile targets that ``xeforge ir`` and the IR page offer, one registry.

A target is what Triton's ``GPUTarget(backend, arch, warp_size)`` names: the backend that
lowers the kernel (``cuda`` for NVIDIA, ``hip`` for AMD, ``xpu`` for Intel), its architecture
and its warp (sub-group) size. Triton compiles for a target ahead of time without the device:
the NVIDIA and AMD backends ship in the PyPI ``triton`` wheel; Intel's backend comes with
PyTorch's xpu build (``pytorch-triton-xpu``) and is only offered when it is installed.

Each target lists the IR stages its backend produces, in lowering order, by the keys of
``CompiledKernel.asm``: NVIDIA ``ttir ttgir llir ptx`` (+ binary ``cubin``), AMD ``ttir ttgir
llir amdgcn`` (+ ``hsaco``), Intel ``ttir ttgir llir spv`` (SPIR-V; its text form, where the
backend gives one, is ``spvdis``).

Sources: Triton ``triton/backends/compiler.py`` (``GPUTarget``), the NVIDIA and AMD backends'
``compiler.py`` (stage names), intel-xpu-backend-for-triton ``third_party/intel/backend/
compiler.py`` (``XPUBackend``: ``target.arch`` is a dict of device properties); NVIDIA compute
capabilities from the CUDA C Programming Guide; AMD ``gfx942`` (MI300) from the ROCm docs;
Intel Xe2 sub-group sizes 16 and 32 from Intel's oneAPI GPU optimization guide.
Only the standard library is used: the IR worker imports this module too.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.errors import TargetError
from xeforge_core.worker.backends import triton_backend_for

#: The user's names for the IR stages (CLI ``--stage``) -> ``CompiledKernel.asm`` keys, in the
#: order they are tried (the first present wins).
STAGE_ALIASES: dict[str, tuple[str, ...]] = {
    "ttir": ("ttir",),
    "ttgir": ("ttgir",),
    "llir": ("llir",),
    "ptx": ("ptx",),
    "amdgcn": ("amdgcn",),
    "spirv": ("spvdis", "spv"),
}

#: Display names of the IR stages (``CompiledKernel.asm`` keys).
STAGE_NAMES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX", "amdgcn": "AMDGCN",
               "spvdis": "SPIR-V (text)", "spv": "SPIR-V"}


@dataclass(frozen=True)
class CompileTarget:
    """One compile target. ``arch`` is what ``GPUTarget`` takes: an int compute capability for
    cuda (90 = sm_90), a string for hip (``gfx942``), a dict of device properties for xpu.
    ``stages`` are the text IR stages it produces, in lowering order."""

    id: str
    backend: str
    arch: Any
    warp_size: int
    label: str
    stages: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    notes: str = ""
    profile: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def triton_backend(self) -> str:
        """The ``triton.backends`` package that compiles for it (``nvidia``, ``amd``, ``intel``:
        the device backend's, ``worker.backends.triton_backend_for``)."""
        return triton_backend_for(self.backend)

    @property
    def description(self) -> str:
        """What the IR is for, in one line, e.g. ``"NVIDIA Hopper sm_90 (H100, H200); warp 32"``."""
        return f"{self.label}; {'sub-group' if self.backend == 'xpu' else 'warp'} size {self.warp_size}"

    def to_data(self) -> dict[str, Any]:
        """The JSON form the IR worker reads."""
        return {"id": self.id, "backend": self.backend, "arch": self.arch, "warp_size": self.warp_size,
                "label": self.label, "stages": list(self.stages), "extra": dict(self.extra)}


_NV = ("ttir", "ttgir", "llir", "ptx")
_AMD = ("ttir", "ttgir", "llir", "amdgcn")
_XPU = ("ttir", "ttgir", "llir", "spvdis", "spv")

#: Intel device properties for the xpu targets, as ``XPUBackend.parse_target`` reads them
#: (``target.arch`` is a dict there). Values from Intel's published specifications.
_XE2_ARCH = {"name": "Intel(R) Arc(TM) B-series (Xe2)", "architecture": 0, "sub_group_sizes": [16, 32],
             "max_work_group_size": 1024, "max_num_sub_groups": 64, "has_fp64": False,
             "has_subgroup_matrix_multiply_accumulate": True,
             "has_subgroup_matrix_multiply_accumulate_tensor_float32": False,
             "has_subgroup_2d_block_io": True, "has_2d_block_io": True,
             "has_bfloat16_conversion": True, "__intel_already_queried_extensions__": True}
_PVC_ARCH = {**_XE2_ARCH, "name": "Intel(R) Data Center GPU Max (Xe-HPC)", "has_fp64": True,
             "has_subgroup_matrix_multiply_accumulate_tensor_float32": True}

TARGETS: dict[str, CompileTarget] = {t.id: t for t in (
    CompileTarget("sm90", "cuda", 90, 32, "NVIDIA Hopper sm_90 (H100, H200)", _NV, ("cuda:90", "sm_90", "h100", "h200"),
           profile="nvidia_h200"),
    CompileTarget("sm80", "cuda", 80, 32, "NVIDIA Ampere sm_80 (A100)", _NV, ("cuda:80", "sm_80", "a100")),
    CompileTarget("sm89", "cuda", 89, 32, "NVIDIA Ada sm_89 (L4, L40S, RTX 40xx)", _NV, ("cuda:89", "sm_89", "l40s")),
    CompileTarget("sm100", "cuda", 100, 32, "NVIDIA Blackwell sm_100 (B200)", _NV, ("cuda:100", "sm_100", "b200")),
    CompileTarget("gfx942", "hip", "gfx942", 64, "AMD CDNA3 gfx942 (MI300X)", _AMD, ("hip:gfx942", "mi300", "mi300x")),
    CompileTarget("xe2", "xpu", _XE2_ARCH, 16, "Intel Xe2 (Arc B-series, Arc Pro B70)", _XPU,
           ("xpu", "xpu:xe2", "bmg", "b580", "b70", "arc_b580"), profile="arc_pro_b70",
           extra={"device_arch": "bmg"}),
    CompileTarget("pvc", "xpu", _PVC_ARCH, 16, "Intel Xe-HPC (Data Center GPU Max)", _XPU,
           ("xpu:pvc", "max1550", "max1100"), profile="max_1550", extra={"device_arch": "pvc"}),
)}

#: The target the IR page and ``xeforge ir`` use when none is chosen: an NVIDIA Hopper GPU
#: compiles on any machine with the PyPI triton wheel; on a machine with Intel's backend the
#: Intel Xe2 target is the default instead (``default_target``).
DEFAULT_TARGET = "sm90"


def backend_installed(target: CompileTarget) -> bool:
    """Whether the installed Triton has ``target``'s backend (checked without importing it)."""
    try:
        return importlib.util.find_spec(f"triton.backends.{target.triton_backend}") is not None
    except (ImportError, ValueError):
        return False


def why_unavailable(target: CompileTarget) -> str:
    """``""`` when ``target`` can be compiled here, else one sentence saying why and what to install."""
    try:
        triton_here = importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        triton_here = False
    if not triton_here:
        return "Triton is not installed here (pip install triton, or the torch build for your device)"
    if backend_installed(target):
        return ""
    if target.backend == "xpu":
        return ("Intel's Triton backend (triton.backends.intel) is not installed here, so kernels cannot be "
                f"compiled for {target.label} on this machine. It comes with PyTorch's xpu build "
                "(pytorch-triton-xpu: pip install torch --index-url https://download.pytorch.org/whl/xpu); "
                "the NVIDIA and AMD targets compile here without a GPU")
    return (f"the installed Triton has no {target.triton_backend} backend, so it cannot compile for "
            f"{target.label}")


def get_target(name: str | None) -> CompileTarget:
    """The target called ``name``: an id such as ``sm90``, an alias (``sm_90``, ``cuda:90``,
    ``h200``, ``xpu``...) or the hardware-profile id the optimizer's ``--target`` takes
    (``nvidia_h200``, ``arc_pro_b70``, ``arc_b580``, ``max_1550``); ``None`` gives
    :func:`default_target`. Raises :class:`TargetError` listing the known targets (``iris_xe``
    has no compile target in this registry)."""
    if name is None or not str(name).strip():
        return default_target()
    key = str(name).strip().lower()
    for t in TARGETS.values():
        if key in (t.id, t.profile) or key in t.aliases:
            return t
    known = ", ".join(f"{t.id} ({t.label})" for t in TARGETS.values())
    raise TargetError(f"unknown target {name!r}; known targets: {known}")


def default_target() -> CompileTarget:
    """Intel Xe2 where Intel's backend is installed (the product's target), else NVIDIA sm_90."""
    xe2 = TARGETS["xe2"]
    return xe2 if backend_installed(xe2) else TARGETS[DEFAULT_TARGET]


def resolve_stage(stage: str, available: list[str] | tuple[str, ...]) -> str | None:
    """The ``CompiledKernel.asm`` key for the user's ``stage`` name (``spirv`` -> ``spvdis`` or
    ``spv``) among ``available``, or ``None`` when the target does not produce it."""
    for key in STAGE_ALIASES.get(stage, (stage,)):
        if key in available:
            return key
    return None
