"""Write the public corpus (``corpus/pairs/<id>/``) from ``benchmarks/corpus_manifest.json``.

The corpus is public problem/solution pairs written outside this project (the layout is in
``benchmarks/bench_corpus.py``'s docstring). The files are not part of this repository; the
manifest names, for every pair, the GitHub address of its problem and its solution at a fixed
commit (``https://github.com/<owner>/<name>/blob/<commit>/<path>``), what the source repository
recorded about the solution's correctness (``expected``) and notes. Pairs published inside a JSON
file of records (the PyTorch-to-Triton training sets keep each problem and its Triton code as
fields of one record) are addressed with a fragment naming the record by its ``sample_key`` and
the field: ``.../traces.json#kernelbook_1174/pytorch_code`` (``#kernelbook_1174[1]/...``: the
second record of that key, where a set keeps several solutions of one problem). This script reads each file
at its commit from a local git clone or mirror of the repository and writes the pair with its
``meta.json``, plus ``SOURCES.md`` (the table of sources).

Usage::

    python benchmarks/build_corpus.py --mirrors DIR [--out corpus] [--only ID ...]

``DIR`` holds one git directory per repository, found as ``DIR/<owner>+<name>/repo``,
``DIR/<owner>+<name>``, ``DIR/<owner>/<name>`` or ``DIR/<name>`` (a bare mirror or a clone;
``git clone --mirror https://github.com/<owner>/<name>`` makes one). A repository or commit that
cannot be found is named with the pairs that need it; the other pairs are still written.
Exit status: 0 every pair written, 1 some pair missing, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "benchmarks" / "corpus_manifest.json"
_ADDRESS = re.compile(r"^https://github\.com/(?P<owner>[^/]+)/(?P<name>[^/]+)/blob/(?P<commit>[0-9a-f]{7,40})/(?P<path>.+)$")


class SourceMissing(Exception):
    """A repository, commit or path named by the manifest is not in the mirrors."""


def parse_address(address: str) -> tuple[str, str, str]:
    """``(owner/name, commit, path)`` of a GitHub blob address.

    Raises:
        ValueError: the address is not ``https://github.com/<owner>/<name>/blob/<commit>/<path>``.
    """
    m = _ADDRESS.match(address)
    if not m:
        raise ValueError(f"not a GitHub blob address at a commit: {address!r}")
    return f"{m['owner']}/{m['name']}", m["commit"], m["path"]


def git_dir(mirrors: Path, repo: str) -> Path:
    """The git directory of ``repo`` (``owner/name``) under ``mirrors``.

    Raises:
        SourceMissing: none of the accepted layouts holds it.
    """
    owner, name = repo.split("/", 1)
    for cand in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}", mirrors / owner / name,
                 mirrors / name):
        if (cand / "HEAD").is_file() or (cand / ".git").exists():
            return cand / ".git" if (cand / ".git").is_dir() else cand
    raise SourceMissing(f"no git directory for {repo} under {mirrors}")


def read_blob(mirrors: Path, address: str) -> str:
    """The text of the file at ``address`` (a GitHub blob address), read from the mirror; with a
    ``#<sample_key>/<field>`` fragment, that field of the record of the file's JSON list whose
    ``sample_key`` it is.

    Raises:
        SourceMissing: the repository, the commit, the path, the record or the field is not there.
    """
    address, _, fragment = address.partition("#")
    repo, commit, path = parse_address(address)
    done = subprocess.run(["git", "--git-dir", str(git_dir(mirrors, repo)), "show", f"{commit}:{path}"],
                          capture_output=True)
    if done.returncode != 0:
        raise SourceMissing(f"{repo} has no {path} at {commit}: {done.stderr.decode(errors='replace').strip()}")
    text = done.stdout.decode("utf-8", "replace")
    if not fragment:
        return text
    key, _, name = fragment.partition("/")
    key, _, nth = key.partition("[")  # kernelbook_1174[2]: the third record of that key
    index = int(nth.rstrip("]")) if nth else 0
    try:
        records = json.loads(text)
    except ValueError as exc:
        raise SourceMissing(f"{repo}:{path} at {commit} is not JSON ({exc})") from None
    matching = [r for r in records if isinstance(r, dict) and r.get("sample_key") == key]
    record = matching[index] if index < len(matching) else None
    if record is None or not isinstance(record.get(name), str):
        raise SourceMissing(f"{repo}:{path} at {commit} has no record {key!r} with a text field {name!r}")
    return record[name]


def sources_table(pairs: list[dict]) -> str:
    """``SOURCES.md``: one row per pair with both files' repository, commit and path."""
    lines = ["# Sources of the pairs", "",
             "Written by `benchmarks/build_corpus.py` from `benchmarks/corpus_manifest.json`.", "",
             "| id | problem repository | commit | problem path | solution repository | commit | solution path "
             "| expected |", "|---|---|---|---|---|---|---|---|"]
    for p in pairs:
        (pr, pc, pp), (sr, sc, sp) = (_with_fragment(p["problem_source"]), _with_fragment(p["solution_source"]))
        lines.append(f"| {p['id']} | {pr} | {pc[:12]} | {pp} | {sr} | {sc[:12]} | {sp} | {p['expected']} |")
    return "\n".join(lines) + "\n"


def _with_fragment(address: str) -> tuple[str, str, str]:
    """:func:`parse_address` of ``address`` with its ``#record/field`` fragment kept on the path."""
    base, hash_, fragment = address.partition("#")
    repo, commit, path = parse_address(base)
    return repo, commit, path + hash_ + fragment


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, required=True, help="folder of git mirrors or clones")
    ap.add_argument("--out", type=Path, default=ROOT / "corpus")
    ap.add_argument("--only", nargs="*", default=None, help="pair ids to write (default: all)")
    args = ap.parse_args(argv)
    if not args.mirrors.is_dir():
        print(f"build_corpus: --mirrors {args.mirrors} is not a folder", file=sys.stderr)
        return 2
    pairs = json.loads(MANIFEST.read_text())["pairs"]
    if args.only:
        known = {p["id"] for p in pairs}
        unknown = [i for i in args.only if i not in known]
        if unknown:
            import difflib

            hints = {i: difflib.get_close_matches(i, sorted(known), n=1) for i in unknown}
            print("build_corpus: unknown pair ids: " + ", ".join(
                f"{i}" + (f" (nearest: {h[0]})" if h else "") for i, h in hints.items()), file=sys.stderr)
            return 2
        pairs = [p for p in pairs if p["id"] in args.only]
    missing: list[str] = []
    written: list[dict] = []
    for p in pairs:
        try:
            problem = read_blob(args.mirrors, p["problem_source"])
            solution = read_blob(args.mirrors, p["solution_source"])
        except SourceMissing as exc:
            missing.append(f"{p['id']}: {exc}")
            continue
        d = args.out / "pairs" / p["id"]
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        (d / "problem.py").write_text(problem)
        (d / "solution.py").write_text(solution)
        (d / "meta.json").write_text(json.dumps({k: v for k, v in p.items() if k != "id"}, indent=2) + "\n")
        written.append(p)
    if written:  # every pair of the manifest the folder holds, not only those written now (--only)
        every = json.loads(MANIFEST.read_text())["pairs"]
        (args.out / "SOURCES.md").write_text(sources_table([p for p in every if (args.out / "pairs" / p["id"]).is_dir()]))
    print(f"build_corpus: {len(written)} pairs written to {args.out}, {len(missing)} missing")
    for line in missing:
        print(f"  missing {line}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
