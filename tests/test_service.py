"""The application service as the workbench and the pipeline benchmark use it: named sessions
in a given path with secrets kept out, controllers of a session or of memory, and one set of
approval rules for both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xeforge_core import service
from xeforge_core.problem import load_problem
from xeforge_core.session import REDACTED, SessionError

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "sample_kernels" / "01_vector_add.py"


def _edited(source: str, tag: str) -> str:
    return source + f"\n# {tag}\n"


@pytest.fixture(scope="module")
def problem():
    return load_problem(KERNEL)


def test_a_named_session_in_a_path_keeps_its_secret_out_and_resumes(tmp_path: Path, problem) -> None:
    secret = "sk-test-0123456789abcdefghij"
    session = service.start_session(problem, device=None, path=tmp_path / "s", name="vec",
                                    plan=["autotuning"], secrets=[secret])
    assert session.path == tmp_path / "s" and session.plan == ["autotuning"]
    controller = service.session_controller(tmp_path / "s", "cpu")
    rec = controller.keep("autotuning", _edited(problem.kernel.source, secret), engine="manual")
    controller.approve(rec.id)
    resumed = service.resume_session(tmp_path / "s")
    assert secret not in resumed.source("head") and REDACTED in resumed.source("head")
    files = [p for p in (tmp_path / "s").rglob("*") if p.is_file() and ".git" not in p.parts]
    assert all(secret not in p.read_text(errors="ignore") for p in files)


@pytest.mark.parametrize("kind", ["session", "memory"])
def test_both_controllers_refuse_the_same_approvals_in_the_same_words(tmp_path: Path, problem, kind: str) -> None:
    if kind == "session":
        controller = service.session_controller(
            service.start_session(problem, device=None, path=tmp_path / "s", plan=["autotuning"]), "cpu")
    else:
        controller = service.memory_controller(problem, "cpu", plan=["autotuning"])
    same = controller.keep("autotuning", problem.kernel.source, engine="manual")
    with pytest.raises(SessionError, match=rf"candidate {same.id} does not change the kernel"):
        controller.approve(same.id)
    first = controller.keep("autotuning", _edited(problem.kernel.source, "a"), engine="manual")
    second = controller.keep("autotuning", _edited(problem.kernel.source, "b"), engine="manual")
    controller.approve(first.id)
    with pytest.raises(SessionError, match=rf"candidate {first.id} is already approved"):
        controller.approve(first.id)
    with pytest.raises(SessionError, match=rf"candidate {second.id} was verified against .*; verify it again"):
        controller.approve(second.id)
    third = controller.keep("autotuning", _edited(controller.current().kernel.source, "c"), engine="manual")
    controller.reject(third.id, "no")
    with pytest.raises(SessionError, match=rf"candidate {third.id} was rejected"):
        controller.approve(third.id)


def test_the_service_and_the_memory_controller_need_no_gitpython() -> None:
    code = ("import sys; sys.modules['git'] = None\n"
            "from xeforge_core import service\n"
            "from xeforge_core.problem import load_problem\n"
            f"p = load_problem({str(KERNEL)!r})\n"
            "c = service.memory_controller(p, 'cpu', plan=['autotuning'])\n"
            "r = c.keep('autotuning', p.kernel.source + '\\n# x\\n', engine='manual')\n"
            "print(c.approve(r.id))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "memory:1"
