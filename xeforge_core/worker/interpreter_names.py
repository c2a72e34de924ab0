"""Triton builtins under other names in Triton's interpreter, as the compiler takes them.

A kernel may call a ``triton.language`` builtin through a module-level name of its own:
``triton_cast = tl.cast`` (unsloth's kernels, for Triton >= 3.0), ``from triton.language import
program_id``, ``tanh = libdevice.tanh``. The compiler accepts any callable marked as a builtin
wherever it is found (``CodeGenerator.visit_Call`` hands it the semantic object). Triton's
interpreter (3.6) gives the semantic object only to the members of a ``triton.language`` module
that the kernel's globals hold (``interpreter._patch_lang``), so the aliased call raises "Did you
forget to add @triton.jit ?" and a kernel that runs on every GPU is reported as not compiling.

``patch_builtin_aliases`` makes the interpreter bind those names too, wherever it binds the
module's members (each kernel launch and device-function call), and puts them back where it puts
its own back (after a launch; after a device-function call it restores nothing, and the names
stay bound to the same builder, as ``tl``'s members do). Worker-side, interpreter only; idempotent.
"""

from __future__ import annotations

from typing import Any

#: Set on the patched function, so that patching twice wraps once.
_MARK = "_xeforge_builtin_aliases"


def patch_builtin_aliases() -> bool:
    """Patch Triton's interpreter so that a kernel's module-level names bound to a Triton
    builtin receive the interpreter's semantic object as ``tl.<name>`` does (module docstring).
    Returns whether it patched (``False`` where it had already, or the interpreter's internals
    are not the ones this was written for: then kernels meet the interpreter as it is)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    patch_lang = getattr(interpreter, "_patch_lang", None)
    semantic_of = getattr(interpreter, "TritonSemantic", None)
    builder = getattr(interpreter, "interpreter_builder", None)
    is_builtin = getattr(tl.core, "is_builtin", None)
    if None in (patch_lang, semantic_of, builder, is_builtin) or getattr(patch_lang, _MARK, False):
        return False

    def builtin(value: Any) -> bool:
        try:  # any global is asked: a lazy module's __getattr__ may raise anything
            return not isinstance(value, type) and bool(is_builtin(value))
        except Exception:  # noqa: BLE001 - not a builtin, whatever went wrong asking
            return False

    def bound(member: Any, semantic: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("_semantic", None)
            return member(*args, _semantic=semantic, **kwargs)

        return call

    def patch_with_aliases(fn: Any) -> Any:
        scope = patch_lang(fn)
        names = fn.__globals__
        aliases = {name: value for name, value in list(names.items()) if builtin(value)}
        if not aliases:
            return scope
        semantic = semantic_of(builder)
        for name, member in aliases.items():
            names[name] = bound(member, semantic)
        restore = scope.restore

        def restore_all() -> None:
            for name, member in aliases.items():
                names[name] = member
            restore()

        scope.restore = restore_all
        return scope

    setattr(patch_with_aliases, _MARK, True)
    interpreter._patch_lang = patch_with_aliases
    return True
