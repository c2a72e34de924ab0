"""Load the module under test from a file in the job directory.

The source is written to ``JOB_DIR/src/<label>/<filename>`` and imported from there, so
tracebacks and Triton's error messages carry the module's own file name and line numbers
(``@triton.jit`` also needs the file to read the kernel's source).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.verdict import VerdictKind
from xeforge_core.worker.errors import Failure, WorkerError, classify, hardcoded_device_note
from xeforge_core.worker.formats import format_for_entry


@dataclass
class LoadedModule:
    """A module of the problem (baseline, candidate or reference) imported in the worker.

    ``path`` is the file it was imported from; ``tree`` its AST; ``jit_functions`` the Triton
    ``JITFunction``/``InterpretedFunction`` objects defined at module level (for mapping compiler
    errors to lines).
    """

    label: str
    path: Path
    source: str
    class_name: str
    module: types.ModuleType
    tree: ast.Module
    jit_functions: list[Any] = field(default_factory=list)
    #: ``class`` (instantiate ``class_name``) or ``function`` (call it: KernelAgent's convention)
    entry: str = "class"

    def adapter(self) -> Any:
        """For a ``function`` entry, its format's ``adapt(fn, reference_model, forward_params)``
        that makes it a model; ``None`` for a class entry. Raises ``WorkerError``
        (runtime_error) for a function entry no registered format enters by."""
        if self.entry != "function":
            return None
        fmt = format_for_entry(self.entry, self.class_name)
        if fmt is None or fmt.adapt is None:
            raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                      f"no problem format enters a module by a function {self.class_name}()"))
        return fmt.adapt

    def entry_function(self) -> Any:
        """The module-level function a ``function`` entry calls. Raises ``WorkerError``
        (runtime_error) when it is missing or not callable."""

        fn = getattr(self.module, self.class_name, None)
        if callable(fn):
            return fn
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                  f"the {self.label} module defines no callable {self.class_name}()"))

    @property
    def file(self) -> str:
        """The module's file path as a string (as tracebacks spell it)."""
        return str(self.path)

    def model_class(self) -> type:
        """The class the harness instantiates. Raises ``WorkerError`` (runtime_error) naming
        the classes that do exist when it is missing or not a class."""

        obj = getattr(self.module, self.class_name, None)
        if isinstance(obj, type):
            return obj
        classes = sorted(n for n, v in vars(self.module).items()
                         if isinstance(v, type) and getattr(v, "__module__", None) == self.module.__name__)
        found = ", ".join(classes) if classes else "none"
        what = "is not a class" if obj is not None else "is missing"
        raise WorkerError(Failure(
            VerdictKind.RUNTIME_ERROR,
            f"the {self.label} module's {self.class_name} {what} at run time "
            f"({self.path.name} defines classes: {found})"))


def _safe_name(name: str) -> str:
    base = Path(name).name or "module.py"
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", base)
    if not base.endswith(".py"):
        base += ".py"
    return base


def write_source(job_dir: Path, source: dict[str, Any]) -> Path:
    """Write ``source["source"]`` to ``job_dir/src/<label>/<filename>`` and return the path."""
    label = re.sub(r"[^A-Za-z0-9_-]", "_", source.get("label") or "module")
    path = job_dir / "src" / label / _safe_name(source.get("filename") or f"{label}.py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source.get("source", ""), encoding="utf-8")
    return path


def load_module(job_dir: Path, source: dict[str, Any], device: str | None = None) -> LoadedModule:
    """Write and import the module. Raises ``WorkerError`` with a ``compile_error`` failure
    (line mapped into the module's file) when it does not parse or import; when ``device`` is
    given and the module hard-codes another device, the reason says so."""
    path = write_source(job_dir, source)
    label = source.get("label") or "module"
    text = source.get("source", "")
    mod_name = f"xeforge_{re.sub(r'[^A-Za-z0-9_]', '_', label)}_{path.stem}"
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        exc.filename = str(path)
        raise WorkerError(classify(exc, str(path), during="importing")) from exc
    spec = importlib.util.spec_from_file_location(mod_name, str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # anything the module raises at import, SystemExit included
        sys.modules.pop(mod_name, None)
        failure = classify(exc, str(path), during=f"importing the {label} module")
        if failure.kind.value == "runtime_error":
            failure.kind = VerdictKind.COMPILE_ERROR
        if device:
            note = hardcoded_device_note(text, failure.reason + failure.error_text, device)
            if note:
                failure.reason = f"the {label} {note}. {failure.reason}"
        raise WorkerError(failure) from exc
    jit = [v for v in vars(module).values() if _is_triton_fn(v)]
    return LoadedModule(label=label, path=path, source=text,
                        class_name=source.get("class_name") or "Model", module=module, tree=tree,
                        jit_functions=[_base_jit(v) for v in jit], entry=source.get("entry") or "class")


def _is_triton_fn(value: Any) -> bool:
    cls = type(value).__name__
    return cls in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics")


def _base_jit(value: Any) -> Any:
    seen = 0
    while type(value).__name__ in ("Autotuner", "Heuristics") and seen < 8:
        value = value.fn
        seen += 1
    return value
