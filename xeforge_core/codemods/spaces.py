"""The target's search-space entries and hardware profile as the codemods use them.

``knowledge/search_spaces/*.yaml`` holds one space per target family; each kind (``gemm``,
``elementwise``, ``row``, ``lifted``, ``lifted_2d``, ``attention``, ...) is a list of configs
whose first entry is the default a codemod writes and whose whole list is what the autotuning
codemod may sweep. This module turns them into plain dicts (``{"kwargs": {...}, "num_warps":
int, "num_stages": int, "options": {...}}``, and ``"loop_stages": int`` where the space gives the
pipeline depth of a kernel's streaming loops) and keeps the Intel-only options (``grf_mode``,
``warp_size``) away from other targets.
"""

from __future__ import annotations

from typing import Any

from xeforge_core.errors import XeForgeError

XPU_ONLY_OPTIONS = ("grf_mode", "warp_size")


class SpaceError(XeForgeError, LookupError):
    """The knowledge base has no entry of this kind for the target (message names both)."""


def space_configs(target: str, arch: str | None, kind: str) -> tuple[list[dict[str, Any]], str]:
    """``(configs, space id)`` of ``kind`` for ``target`` (``xpu``/``cuda``; ``cpu`` means the
    interpreter and takes cuda's) and ``arch``. Raises :class:`SpaceError` when the knowledge
    base cannot be loaded or has no such kind."""
    target = "cuda" if target == "cpu" else target
    try:
        from xeforge_core.knowledge import load_knowledge

        kb = load_knowledge()
    except Exception as exc:  # data, not code: say what is wrong
        raise SpaceError(f"the knowledge base could not be loaded ({type(exc).__name__}: {exc})") from exc
    space = kb.search_space_for(target, arch)
    if space is None:
        raise SpaceError(f"the knowledge base has no search space for target {target!r}")
    if kind not in space.kinds:
        raise SpaceError(f"search space {space.id} has no {kind!r} configs (it has {', '.join(sorted(space.kinds))})")
    out = []
    for c in space.kinds[kind]:
        options = {k: v for k, v in c.options.items() if target == "xpu" or k not in XPU_ONLY_OPTIONS}
        out.append({"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages,
                    "options": options, **({"loop_stages": c.loop_stages} if c.loop_stages else {})})
    return out, space.id


def default_config(target: str, arch: str | None, kind: str) -> tuple[dict[str, Any], str]:
    """The first config of ``kind`` (the codemods' default) and the space id."""
    configs, sid = space_configs(target, arch, kind)
    return configs[0], sid


def launch_options(config: dict[str, Any]) -> dict[str, Any]:
    """Launch keywords of a config besides its meta-parameters: ``num_warps`` and its options."""
    return {"num_warps": config["num_warps"], **config.get("options", {})}


def profile_value(profile: Any, name: str) -> Any:
    """Fact ``name`` of a hardware profile given as a ``HardwareProfile`` or a dict (a device
    summary), unwrapped from its ``{"value": ...}`` form; ``None`` when absent."""
    if profile is None:
        return None
    if isinstance(profile, dict):
        v = profile.get(name)
    else:
        v = getattr(profile, name, None)
    if isinstance(v, dict) and "value" in v:
        return v["value"]
    return getattr(v, "value", v)


def _load_profile(target: str, arch: str | None) -> Any:
    """The knowledge base's profile of ``target`` and ``arch`` (else the target's default)."""
    try:
        from xeforge_core.knowledge import load_knowledge

        kb = load_knowledge()
    except Exception:
        return None
    if arch:
        for p in kb.profiles.values():
            if p.target == target and p.arch == arch:
                return p
    return kb.default_profile(target)


def resolve_profile(profile: Any, target: str, arch: str | None) -> Any:
    """A profile with GRF modes and warp limits: the one given when it has them, else the
    knowledge base's profile of the same id (a device summary dict carries only some fields),
    else the target's reference profile."""
    if profile is not None and profile_value(profile, "max_warps_per_workgroup") is not None:
        return profile
    pid = profile_value(profile, "id") if profile is not None else None
    arch = arch or (profile_value(profile, "arch") if profile is not None else None)
    if pid:
        try:
            from xeforge_core.knowledge import load_knowledge

            found = load_knowledge().profiles.get(str(pid))
            if found is not None:
                return found
        except Exception:
            pass
    return _load_profile(target, arch)
