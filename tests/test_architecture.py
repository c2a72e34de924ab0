"""The package's shape: no import cycles between its modules, one exception base, and a top
level that exports the public API without importing it.

Imports are read with ``ast`` (nothing is executed for the cycle check). An import counts when
it runs as the module is imported: statements at module level, including those inside a
module-level ``if``/``try``/``with``, but not those under ``if TYPE_CHECKING:`` and not those
inside functions (they run when the function is called, after every module is loaded).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import xeforge_core
from xeforge_core.errors import XeForgeError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xeforge_core"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    """``{module name: file}`` of every module of the package."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                out += _module_level(stmt.body)
            out += _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += _module_level(stmt.body) + _module_level(stmt.orelse) + _module_level(stmt.finalbody)
            for handler in stmt.handlers:
                out += _module_level(handler.body)
        elif isinstance(stmt, ast.With):
            out += _module_level(stmt.body)
        else:
            out.append(stmt)
    return out


def _lazy_exports(tree: ast.Module) -> list[ast.stmt]:
    """A module-level ``__getattr__`` (PEP 562) imports only when its attribute is asked for."""
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]


def imports_of(name: str, path: Path, known: set[str], *, anywhere: bool = False,
               type_checking: bool = False) -> set[str]:
    """The package's modules that ``name`` imports: at module level (what importing it runs), or
    with ``anywhere`` also inside functions (what calling it can run), and with
    ``type_checking`` also under ``if TYPE_CHECKING:`` (what reading its types needs); never in
    a PEP 562 ``__getattr__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    lazy = _lazy_exports(tree)
    if anywhere:
        checking = [] if type_checking else [
            n for n in ast.walk(tree) if isinstance(n, ast.If) and _is_type_checking(n.test)]
        skip = {id(n) for block in lazy + checking for n in ast.walk(block)}
        stmts = [n for n in ast.walk(tree) if id(n) not in skip]
    else:
        stmts = [n for n in _module_level(tree.body) if n not in lazy]
    found: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, ast.Import):
            found |= {a.name for a in stmt.names}
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level:
                base = package.split(".")
                base = base[: len(base) - stmt.level + 1]
                mod = ".".join(base + ([stmt.module] if stmt.module else []))
            else:
                mod = stmt.module or ""
            subs = {f"{mod}.{a.name}" for a in stmt.names}
            found |= subs & known  # ``from pkg import submodule`` imports the submodule ...
            if subs - known:  # ... and ``from pkg import name`` the package
                found.add(mod)
    return {m for m in found if m in known and m != name}


def module_level_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that importing ``name`` imports directly."""
    return imports_of(name, path, known)


def import_graph(*, anywhere: bool = False, type_checking: bool = False) -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imports_of(name, path, known, anywhere=anywhere, type_checking=type_checking)
            for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_inside_the_package() -> None:
    graph = import_graph()
    assert len(graph) > 60 and "xeforge_core.knowledge" in graph["xeforge_core.analysis"]
    cycles = find_cycles(graph)
    assert not cycles, "module-level import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_cycle_hides_behind_a_function_level_import() -> None:
    """Two modules that need each other are one module, or two with the shared part moved out;
    importing one of them inside a function, or only for type checking, only hides that."""
    cycles = find_cycles(import_graph(anywhere=True, type_checking=True))
    assert not cycles, "import cycles through function-level imports: " + "; ".join(" <-> ".join(c) for c in cycles)


#: The layers, bottom up: a module may import its own layer and those below, never one above.
#: Each entry is (layer, module prefixes); the longest matching prefix decides a module's layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("xeforge_core.vocab", "xeforge_core.errors", "xeforge_core.units", "xeforge_core.verdict",
                    "xeforge_core.precision", "xeforge_core.compile_options", "xeforge_core.devlock",
                    "xeforge_core.roofline_gap")),
    ("problem and device", ("xeforge_core.problem", "xeforge_core.worker", "xeforge_core.knowledge",
                            "xeforge_core.lints", "xeforge_core.target", "xeforge_core.cache", "xeforge_core.sandbox",
                            "xeforge_core.analysis", "xeforge_core.samples", "xeforge_core.settings",
                            "xeforge_core.diffmerge")),
    ("worker and verify", ("xeforge_core.worker_outcome", "xeforge_core.worker_process", "xeforge_core.pool",
                           "xeforge_core.runner", "xeforge_core.devices", "xeforge_core.verify",
                           "xeforge_core.coverage", "xeforge_core.contract", "xeforge_core.sizes",
                           "xeforge_core.memcheck", "xeforge_core.variant_cost", "xeforge_core.doctor")),
    ("pipeline and engines", ("xeforge_core.pipeline", "xeforge_core.engines", "xeforge_core.codemods", "xeforge_core.inductor",
                              "xeforge_core.mutation", "xeforge_core.ir", "xeforge_core.session")),
    ("application service", ("xeforge_core.service", "xeforge_core.batch", "xeforge_core.batch_progress",
                             "xeforge_core.raybatch")),
    ("cli and ui", ("xeforge_core.cli", "xeforge_core.commands", "xeforge_core.ui")),
)


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module`` (the top-level package, which imports nothing
    but lazily, is in none)."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return best[0] if best else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer, as ``"a (layer) -> b (layer)"``."""
    out = []
    for module, targets in sorted(graph.items()):
        low = layer_of(module)
        for target in sorted(targets):
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                out.append(f"{module} ({LAYERS[low][0]}) -> {target} ({LAYERS[high][0]})")
    return out


def test_every_module_has_a_layer() -> None:
    missing = [m for m in all_modules() if m != "xeforge_core" and layer_of(m) is None]
    assert not missing, f"modules in no layer of LAYERS (add each to the one it belongs to): {missing}"


def test_layers_import_only_downward() -> None:
    """Counting imports inside functions and under TYPE_CHECKING: workflow modules import the
    vocabulary, never the reverse."""
    assert layer_of("xeforge_core.vocab.stages") == 0 and layer_of("xeforge_core.ui.workbench") == len(LAYERS) - 1
    bad = upward_imports(import_graph(anywhere=True, type_checking=True))
    assert not bad, "imports from a higher layer: " + "; ".join(bad)


def test_the_layer_check_can_fail() -> None:
    assert upward_imports({"xeforge_core.vocab.stages": {"xeforge_core.pipeline.loop"},
                           "xeforge_core.pipeline.loop": {"xeforge_core.vocab.stages"}}) == [
        "xeforge_core.vocab.stages (vocabulary) -> xeforge_core.pipeline.loop (pipeline and engines)"]


def test_the_cycle_check_can_fail() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_and_function_imports_do_not_count(tmp_path: Path) -> None:
    source = ("from typing import TYPE_CHECKING\nimport xeforge_core.b\nif TYPE_CHECKING:\n"
              "    import xeforge_core.c\ntry:\n    from xeforge_core import d\nexcept ImportError:\n"
              "    pass\n\ndef f():\n    import xeforge_core.e\n")
    path = tmp_path / "a.py"
    path.write_text(source)
    known = {f"xeforge_core.{m}" for m in "abcde"}
    assert module_level_imports("xeforge_core.a", path, known) == {"xeforge_core.b", "xeforge_core.d"}


def _import_everything() -> list[object]:
    modules = []
    for info in pkgutil.walk_packages(xeforge_core.__path__, "xeforge_core."):
        if info.name.endswith("__main__"):
            continue
        modules.append(importlib.import_module(info.name))
    return modules


def test_every_exception_class_derives_from_the_one_base() -> None:
    found = []
    for module in _import_everything():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException):
                found.append(cls)
    names = {c.__name__ for c in found}
    assert {"ProblemError", "SessionError", "EngineError", "KnowledgeError", "WorkbenchError",
            "InputError", "ReviewError", "WorkerError", "LockTimeout", "VerificationCancelled"} <= names
    strays = [f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, XeForgeError)]
    assert not strays, f"exception classes that do not derive from XeForgeError: {strays}"


def test_errors_keep_the_builtin_meaning_they_share() -> None:
    from xeforge_core.devlock import LockTimeout
    from xeforge_core.knowledge import KnowledgeError

    err = KnowledgeError("unknown stage 'x'", file="rules/a.yaml", field="rules[0].stage")
    assert isinstance(err, ValueError) and str(err) == "rules/a.yaml [rules[0].stage]: unknown stage 'x'"
    assert isinstance(LockTimeout("busy"), TimeoutError)


@pytest.mark.parametrize("name", sorted(xeforge_core.__all__))
def test_the_top_level_exports_resolve(name: str) -> None:
    assert getattr(xeforge_core, name) is not None


def test_the_top_level_exports_the_documented_api_and_no_submodule_name() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    submodules = {m.name for m in pkgutil.iter_modules(xeforge_core.__path__)}
    for name in xeforge_core.__all__:
        assert name not in submodules, f"xeforge_core.{name} would shadow the submodule"
        assert name == "__version__" or f"{name}" in doc, f"{name} is exported but not in docs/architecture.md"


def test_importing_the_top_level_imports_nothing_else() -> None:
    import subprocess
    import sys

    code = "import sys, xeforge_core; print(sorted(m for m in sys.modules if m.startswith('xeforge_core')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['xeforge_core']"


class EchoEngine:
    """An engine written for this test: one module (this one) plus one registry entry."""

    name = "echo"

    def propose(self, stage, context, feedback=None):  # noqa: ANN001, ANN201
        from xeforge_core.engines.base import Candidate

        return Candidate(code=context.current_code + "\n# echo\n", engine=self.name, rationale="echo")


def test_an_engine_is_one_module_plus_its_registration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Registered in ``engines.registry.ENGINES`` only, a new engine is offered by the CLI,
    listed by the plan for every stage, built by ``get_engine`` and run by the loop."""
    from xeforge_core.cli import build_parser
    from xeforge_core.engines import get_engine, registry
    from xeforge_core.pipeline.controller import MemoryController
    from xeforge_core.pipeline.loop import LoopOptions, run_stage
    from xeforge_core.problem import load_problem
    from xeforge_core.verdict import Step, StepStatus, Verdict, VerdictKind

    spec = registry.EngineSpec("echo", "appends a comment", f"{__name__}:EchoEngine", "any")
    monkeypatch.setattr(registry, "ENGINES", (*registry.ENGINES, spec))
    args = build_parser().parse_args(["optimize", "k.py", "--engine", "echo"])
    assert args.engine == "echo"
    assert "echo" in registry.engines_for("fusion") and "echo" in registry.engines_for("dtype_fix")
    problem = load_problem(ROOT / "sample_kernels" / "01_vector_add.py")
    ok = Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.NOT_MEASURED)])
    outcome = run_stage(MemoryController(problem), "fusion", get_engine("echo"),
                        LoopOptions(auto=True, verify_fn=lambda *a, **k: ok))
    assert outcome.status == "approved" and outcome.best_source.endswith("# echo\n")
