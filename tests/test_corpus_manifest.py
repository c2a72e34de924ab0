"""The corpus manifest names every public pair at a fixed commit, so the corpus can be rebuilt."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("build_corpus", ROOT / "benchmarks" / "build_corpus.py")
build_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_corpus)

PAIRS = json.loads((ROOT / "benchmarks" / "corpus_manifest.json").read_text())["pairs"]


def test_every_pair_is_named_at_a_commit_with_the_fields_the_benchmarks_read():
    ids = [p["id"] for p in PAIRS]
    assert len(ids) == len(set(ids)) and len(ids) >= 30
    for p in PAIRS:
        assert re.fullmatch(r"(kb|ka)_l\d_\d{3}_[a-z0-9_]+__[a-z0-9]+|mt_[a-z0-9_]+__[a-z0-9_]+", p["id"]), p["id"]
        assert p["format"] == {"kb": "kernelbench", "ka": "kernelagent", "mt": "wrapper"}[p["id"][:2]]
        assert p["expected"] in {"correct", "wrong", "unknown"}
        for key in ("problem_source", "solution_source"):
            address, _, record = p[key].partition("#")  # a record of a JSON file: #sample_key[n]/field
            repo, commit, path = build_corpus.parse_address(address)
            assert len(commit) == 40 and (path.endswith(".py") or (path.endswith(".json") and record)), (p["id"], key)


def _mirror(tmp_path: Path, name: str, files: dict[str, str]) -> str:
    """A git repository ``mirrors/someone+<name>`` holding ``files`` in one commit; its hash."""
    repo = tmp_path / "mirrors" / f"someone+{name}"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for path, text in files.items():
        (repo / path).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", *env, "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", *env, "-C", str(repo), "commit", "-qm", "x"], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_pair_is_written_from_a_local_mirror_and_a_missing_commit_is_named(tmp_path):
    commit = _mirror(tmp_path, "kernels", {"problem.py": "class Model: pass\n", "solution.py": "class ModelNew: pass\n"})
    base = f"https://github.com/someone/kernels/blob/{commit}/"
    assert build_corpus.read_blob(tmp_path / "mirrors", base + "solution.py") == "class ModelNew: pass\n"
    with pytest.raises(build_corpus.SourceMissing, match="no other.py"):
        build_corpus.read_blob(tmp_path / "mirrors", base + "other.py")
    with pytest.raises(build_corpus.SourceMissing, match="no git directory for elsewhere/x"):
        build_corpus.git_dir(tmp_path / "mirrors", "elsewhere/x")
    with pytest.raises(ValueError, match="not a GitHub blob address"):
        build_corpus.parse_address("https://example.com/x.py")


def test_a_pair_is_read_from_a_record_of_a_json_file(tmp_path):
    """Training sets keep a problem and its solution as fields of one JSON record; a key may
    repeat (several solutions of one problem): ``#key[n]/field`` is its n-th record."""
    records = [{"sample_key": "book_7", "pytorch_code": "class GetMask: pass\n", "triton_code": "a"},
               {"sample_key": "book_7", "pytorch_code": "class GetMask: pass\n", "triton_code": "b"}]
    commit = _mirror(tmp_path, "traces", {"traces.json": json.dumps(records)})
    base = f"https://github.com/someone/traces/blob/{commit}/traces.json"
    mirrors = tmp_path / "mirrors"
    assert build_corpus.read_blob(mirrors, base + "#book_7/pytorch_code") == "class GetMask: pass\n"
    assert build_corpus.read_blob(mirrors, base + "#book_7/triton_code") == "a"
    assert build_corpus.read_blob(mirrors, base + "#book_7[1]/triton_code") == "b"
    with pytest.raises(build_corpus.SourceMissing, match="no record 'book_8' with a text field 'triton_code'"):
        build_corpus.read_blob(mirrors, base + "#book_8/triton_code")
