"""Every third-party module the product imports is declared in ``pyproject.toml``, and the
verification worker imports nothing beyond torch, triton, numpy and the standard library.

A fresh ``pip install -e ".[test]"`` installs exactly what ``pyproject.toml`` declares, so an
import that maps to no declared distribution fails on a new machine even where it works on one
that had the package installed by hand. The imports are read with ``ast`` (no module is
executed) and mapped to distributions with ``importlib.metadata.packages_distributions()``.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Where the product's own code lives (the trees a user's install runs).
PRODUCT_TREES = ("xeforge_core", "app.py", "pages", "benchmarks")

#: What the worker may import besides the standard library and ``xeforge_core`` itself: it runs
#: on GPU machines where only the device's stack is installed (DESIGN.md, "Boundaries").
WORKER_ALLOWED = {"torch", "triton", "numpy"}


def _canonical(name: str) -> str:
    """A distribution name normalised as PEP 503 does (``GitPython`` -> ``gitpython``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _canonical(re.split(r"[\s\[<>=!~;(]", req.strip(), maxsplit=1)[0])


def declared_distributions(pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    """Distributions named in ``pyproject.toml``'s dependencies and every optional extra
    (canonical names), plus the project itself."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the installed metadata says the same
        reqs = requires("xeforge-studio") or []
        return {_requirement_name(r) for r in reqs} | {"xeforge-studio"}
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project = data["project"]
    names = {_requirement_name(r) for r in project.get("dependencies", [])}
    for extra in project.get("optional-dependencies", {}).values():
        names |= {_requirement_name(r) for r in extra}
    names.add(_canonical(project["name"]))
    return names


def python_files(trees: tuple[str, ...], root: Path = ROOT) -> list[Path]:
    """The ``.py`` files of ``trees`` (files or directories relative to ``root``)."""
    out: list[Path] = []
    for tree in trees:
        path = root / tree
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """``(module, line)`` of every absolute import in ``path``, at any depth (an import inside a
    function runs as soon as that function does)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
    return found


def _local_package(name: str) -> bool:
    """A top-level package of this repository itself (``tools``), which no distribution provides."""
    return (ROOT / name / "__init__.py").is_file()


def undeclared_imports(files: list[Path], declared: set[str]) -> list[str]:
    """One line per import of a third-party module that maps to no declared distribution:
    ``file:line: import X (distribution D is not declared)`` or ``(... no installed
    distribution provides it)``."""
    dists = packages_distributions()
    problems = []
    for path in files:
        for module, line in imported_modules(path):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__" or _local_package(top) \
                    or (path.parent / f"{top}.py").is_file():  # a sibling script (benchmarks/bench_pipeline.py)
                continue
            providers = {_canonical(d) for d in dists.get(top, [])}
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"
            if not providers:
                problems.append(f"{where}: import {module} (no installed distribution provides {top!r}, "
                                "so pyproject.toml cannot be declaring it)")
            elif not providers & declared:
                problems.append(f"{where}: import {module} (distribution {', '.join(sorted(providers))} "
                                "is not declared in pyproject.toml)")
    return problems


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _in_package_imports(path: Path) -> list[str]:
    """Module names of ``xeforge_core`` that ``path`` imports (``from pkg import mod`` may name a
    submodule, so ``pkg.mod`` is listed too; names that are not modules are dropped later)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # a module-level ``__getattr__`` (PEP 562) imports only when that attribute is asked for
    lazy = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]
    for fn in lazy:
        tree.body.remove(fn)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return [n for n in names if n.split(".")[0] == "xeforge_core"]


def worker_closure(entry: str) -> set[Path]:
    """The files of ``xeforge_core`` that running ``entry`` (a module name) can import: the
    module, the ``__init__`` of every package above it, and every in-package module they import,
    transitively, at any depth (an import inside a function counts: it runs when called)."""
    todo = [entry]
    seen: set[Path] = set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages' __init__
        path = _module_file(name)
        if path is None or path in seen:
            continue
        seen.add(path)
        todo += _in_package_imports(path)
    return seen


def third_party_of(files: set[Path]) -> dict[str, list[str]]:
    """``{top-level module: [file:line, ...]}`` of the non-stdlib, non-``xeforge_core`` imports."""
    out: dict[str, list[str]] = {}
    for path in sorted(files):
        for module, line in imported_modules(path):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in ("__future__", "xeforge_core"):
                continue
            out.setdefault(top, []).append(f"{path.relative_to(ROOT)}:{line}")
    return out


def test_every_import_of_the_product_is_declared():
    problems = undeclared_imports(python_files(PRODUCT_TREES), declared_distributions())
    assert not problems, "imports that a fresh install would not satisfy:\n" + "\n".join(problems)


def test_an_undeclared_import_is_caught(tmp_path):
    """The check above can fail: a file importing an installed but undeclared distribution
    (pytest's own ``pluggy``) and one importing a module nothing provides are both named."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\ndef f():\n    import pluggy\n    from not_a_real_module_xf import thing\n")
    problems = undeclared_imports([bad], declared_distributions())
    assert len(problems) == 2, problems
    assert "bad.py:4: import pluggy (distribution pluggy is not declared" in problems[0]
    assert "bad.py:5: import not_a_real_module_xf (no installed distribution" in problems[1]


def test_declared_names_are_read_from_pyproject():
    names = declared_distributions()
    for dist in ("torch", "streamlit", "pydantic", "pydantic-settings", "gitpython", "diskcache",
                 "openai", "pandas", "plotly", "libcst", "pytest"):
        assert dist in names


def test_the_worker_imports_only_torch_triton_numpy():
    """``python -m xeforge_core.worker JOB_DIR`` runs ``worker/__main__.py``."""
    files = worker_closure("xeforge_core.worker.__main__")
    assert ROOT / "xeforge_core" / "worker" / "roles.py" in files  # the walk reached the roles
    extra = {k: v for k, v in third_party_of(files).items() if k not in WORKER_ALLOWED}
    assert not extra, f"the worker imports {sorted(extra)}: {extra}"


def test_the_doctor_child_imports_only_the_device_stack():
    """The doctor's child process runs on the device too; OpenVINO is its one optional extra,
    imported only inside the OpenVINO task."""
    files = worker_closure("xeforge_core.doctor.child")
    extra = {k: v for k, v in third_party_of(files).items() if k not in WORKER_ALLOWED | {"openvino"}}
    assert not extra, f"the doctor child imports {sorted(extra)}: {extra}"


def test_the_worker_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    """``third_party_of`` reports what the worker test must refuse."""
    fake = ROOT / "xeforge_core" / "worker" / "roles.py"
    files = {fake}
    assert "torch" in third_party_of(files)
    probe = tmp_path / "x.py"
    probe.write_text("import yaml\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert third_party_of({probe}) == {"yaml": ["x.py:1"]}
