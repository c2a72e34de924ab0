"""Paths the user mistyped or mixed up are bad input (exit 2) naming the file and what to do: a
misspelt kernel, candidate or spec path names the nearest existing file of its folder (or the
nearest folder when the folder is misspelt); a spec or any other non-Python file given as the
candidate (or a spec as the kernel module) is refused as such, never judged as a compile_error.
In-process through the CLI's main: nothing here starts a worker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xeforge_core.cli import main
from xeforge_core.commands.verify import EXIT_BAD_INPUT
from xeforge_core.errors import missing_path_hint

SAMPLES = Path(__file__).resolve().parents[1] / "sample_kernels"


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with problem.py, its spec problem.yaml and cand.py; the working directory."""
    for src, name in (("01_vector_add.py", "problem.py"), ("01_vector_add.yaml", "problem.yaml"),
                      ("01_vector_add.py", "cand.py")):
        shutil.copy(SAMPLES / src, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _verify(capsys, *argv: str) -> tuple[int, str]:
    status = main(["verify", *argv, "--device", "cpu", "--quiet"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.err


@pytest.mark.parametrize("argv,says", [
    (["probem.py", "cand.py"], "probem.py: kernel or problem module file not found; did you mean problem.py?"),
    (["problem.py", "cnad.py"], "cnad.py: candidate file not found; did you mean cand.py?"),
    (["problem.py", "cand.py", "--spec", "problme.yaml"], "problme.yaml: spec file not found; did you mean problem.yaml?"),
])
def test_a_misspelt_path_names_the_nearest_file(pair, capsys, argv, says):
    status, err = _verify(capsys, *argv)
    assert status == EXIT_BAD_INPUT
    assert says in err, err


def test_a_misspelt_folder_names_the_nearest_folder(pair, capsys):
    (pair / "kernels").mkdir()
    status, err = _verify(capsys, "kernel/problem.py", "cand.py")
    assert status == EXIT_BAD_INPUT
    assert "the folder kernel does not exist; did you mean kernels?" in err, err


def test_nothing_near_is_not_a_guess(pair):
    assert missing_path_hint(pair / "zzzz.py") == ""
    # a shared ".py" is no likeness: names of one extension are compared by their stems
    (pair / "nomodel.py").write_text("")
    assert missing_path_hint(pair / "nothere.py") == ""
    assert missing_path_hint(pair / "problem.yml") == f"; did you mean {pair / 'problem.yaml'}?"
    assert missing_path_hint(pair / "probem.py") == f"; did you mean {pair / 'problem.py'}?"


@pytest.mark.parametrize("name,text,says", [
    ("problem.yaml", None, "the candidate is a spec (a .yaml file), expected a Python module (.py) defining ModelNew"),
    ("cand.json", '{"kernel": "add"}', "the candidate is not a kernel module (a .json file"),
    ("cand.txt", "add two vectors:\n  fast\n", "the candidate is not Python (a .txt file that does not parse"),
])
def test_a_non_python_candidate_is_bad_input_not_a_compile_error(pair, capsys, name, text, says):
    if text is not None:
        (pair / name).write_text(text)
    status, err = _verify(capsys, "problem.py", name)
    assert status == EXIT_BAD_INPUT
    assert f"xeforge verify: bad input: {name}: {says}" in err, err


def test_a_spec_given_as_the_kernel_module_is_bad_input(pair, capsys):
    status, err = _verify(capsys, "problem.yaml", "cand.py")
    assert status == EXIT_BAD_INPUT
    assert "problem.yaml: the kernel module is a spec (a .yaml file)" in err, err
