"""Paths the user mistyped are bad input (exit 2) naming the file and what to do: a misspelt
kernel, candidate or spec path names the nearest existing file of its folder (or the nearest
folder when the folder is misspelt). In-process through the CLI's main: nothing here starts a
worker."""

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
    (["probem.py", "cand.py"], "probem.py: kernel module file not found; did you mean problem.py?"),
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
    assert missing_path_hint(pair / "probem.py") == f"; did you mean {pair / 'problem.py'}?"
