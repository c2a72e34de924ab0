"""Stack integrity: which torch, Triton, driver and runtime libraries a device process really uses.

A child process initialises the device and reports versions and every shared library mapped
into it (``/proc/self/maps``). Here we name the runtime pieces that matter (Level Zero loader,
Intel compute runtime, Unified Runtime adapters, SYCL and oneAPI runtime libraries on Intel;
the CUDA driver and runtime libraries on NVIDIA) and flag two problems that produce
"works on one machine" failures:

* two versions of one library loaded into the same process (e.g. ``libsycl.so.7`` and
  ``libsycl.so.8``, or one soname from two directories);
* a library taken from a directory on ``LD_LIBRARY_PATH`` while the torch wheel ships its own
  copy of it (the system copy shadows the one torch was built and tested with).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.doctor.isolate import run_task
from xeforge_core.worker import backends

_SO_RE = re.compile(r"^(?P<stem>lib[\w+-]+?)(?:-[0-9a-f]{8})?\.so(?:\.(?P<version>[\d.]+))?$")


@dataclass
class Library:
    """One shared library mapped into the device process: ``stem`` (``libsycl``), the version
    from its file name (``8.0.0``) or resolved link, and where it was loaded from."""

    stem: str
    version: str
    path: str


@dataclass
class StackReport:
    """Versions and loaded runtime libraries of the device stack, with the problems found."""

    device: str
    versions: dict[str, Any] = field(default_factory=dict)
    runtime_libraries: list[Library] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""


def parse_library(path: str) -> Library | None:
    """``/usr/lib/x86_64-linux-gnu/libze_loader.so.1.17.6`` -> Library("libze_loader", "1.17.6").
    The version comes from the resolved file name when the mapped name is a symlink."""
    name = os.path.basename(path)
    match = _SO_RE.match(name)
    if not match:
        return None
    version = match.group("version") or ""
    try:
        real = os.path.basename(os.path.realpath(path))
        real_match = _SO_RE.match(real)
        if real_match and real_match.group("version") and len(real_match.group("version")) > len(version):
            version = real_match.group("version")
    except OSError:
        pass
    return Library(match.group("stem"), version, path)


def find_problems(libraries: list[str], *, ld_library_path: str, torch_lib_dir: str) -> list[str]:
    """Duplicate versions and LD_LIBRARY_PATH shadowing among ``libraries`` (mapped paths).

    Returns human sentences; empty when the stack is consistent.
    """
    problems: list[str] = []
    by_stem: dict[str, list[Library]] = {}
    for path in libraries:
        lib = parse_library(path)
        if lib:
            by_stem.setdefault(lib.stem, []).append(lib)
    for stem, libs in sorted(by_stem.items()):
        majors = {lib.version.split(".")[0] for lib in libs if lib.version}
        dirs = {os.path.dirname(os.path.realpath(lib.path)) for lib in libs}
        if len(majors) > 1:
            problems.append(f"two versions of {stem} are loaded in one process: "
                            + ", ".join(sorted(lib.path for lib in libs)))
        elif len(dirs) > 1:
            problems.append(f"{stem} is loaded from {len(dirs)} directories: "
                            + ", ".join(sorted(dirs)))
    search_dirs = [d for d in ld_library_path.split(os.pathsep) if d]
    wheel_dirs = [torch_lib_dir] if torch_lib_dir else []
    site = str(Path(torch_lib_dir).parents[1]) if torch_lib_dir else ""
    for path in libraries:
        directory = os.path.dirname(path)
        if not any(os.path.realpath(directory) == os.path.realpath(d) for d in search_dirs):
            continue
        name = os.path.basename(path)
        shipped = [os.path.join(d, name) for d in wheel_dirs if os.path.exists(os.path.join(d, name))]
        if not shipped and site:
            shipped = [str(p) for p in Path(site).glob(f"*/lib*/{name}")][:1]
        if shipped:
            problems.append(f"{path} comes from LD_LIBRARY_PATH ({directory}) and shadows "
                            f"{shipped[0]}, which the torch wheel ships")
    return problems


def inspect_stack(device: str, *, timeout_s: float = 90.0) -> StackReport:
    """Initialise ``device`` in a child process and report its stack (see module docstring)."""
    kind = device.split(":")[0]
    report = StackReport(device=device)
    out = run_task({"task": "stack", "device": device}, timeout_s=timeout_s)
    if out.status != "ok":
        report.error = f"{out.status}: {out.error_text}"
        if out.stack:
            report.notes.append("stack of the hung process:\n" + out.stack)
        return report
    info = dict(out.result)
    libraries = info.pop("libraries", [])
    report.versions = {k: v for k, v in info.items() if k not in ("status",)}
    backend = backends.get_backend(kind)  # library stems worth naming: the backend's and the host's
    report.versions.update(backend.doctor_versions())
    host = [b for b in backends.BACKENDS if b.interpreter]
    wanted = backend.runtime_libraries + tuple(lib for b in host if b is not backend for lib in b.runtime_libraries)
    for path in libraries:
        lib = parse_library(path)
        if lib and any(lib.stem == w or lib.stem.startswith(w + "_") or lib.stem == w.rstrip("_")
                       for w in wanted):
            report.runtime_libraries.append(lib)
    report.problems = find_problems(libraries, ld_library_path=os.environ.get("LD_LIBRARY_PATH", ""),
                                    torch_lib_dir=str(info.get("torch_lib_dir", "")))
    report.problems += backend.doctor_problems([lib.stem for lib in report.runtime_libraries])
    if info.get("device_init_error"):
        report.problems.append(f"the device failed to initialise: {info['device_init_error']}")
    return report
