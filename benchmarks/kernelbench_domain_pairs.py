"""Build problem/solution pairs from a KernelBench checkout to check the verifier on inputs with a
domain: every problem whose ``get_inputs()`` gives its inputs one (probabilities from a softmax,
absolute values, all-positive ``torch.rand`` draws, scaled draws, index ranges from ``randint``,
boolean masks, signs), with a solution that is right by construction, for ``bench_corpus.py``.

For each such problem the pair's solution is the problem's own ``Model`` (renamed) wrapped in a
``ModelNew`` whose outputs pass through a Triton copy kernel: the same function as the reference,
so a verifier that draws the problem's own inputs must call it ``ok``, and one that feeds the
reference inputs outside its domain (a KL divergence fed normal "probabilities") calls a right
kernel wrong, which is what this checks. (The reference itself as a candidate is refused for
launching no Triton kernel, as it should be.) ``--solutions DIR`` adds hand-written ``ModelNew``
solutions, one ``<problem stem>.py`` each, as pairs ``<id>__own``.

Usage::

    python benchmarks/kernelbench_domain_pairs.py KERNELBENCH/KernelBench --out DIR [--levels 1 2]
        [--sample N] [--only STEM ...] [--solutions benchmarks/kernelbench_solutions]
    python benchmarks/bench_corpus.py DIR --out DIR/results --seeds 2 [--device cuda]

Writes ``DIR/pairs/<id>/{problem.py, solution.py, meta.json}`` (``DIR`` must be a git-ignored
folder: the problems are KernelBench's files, never the repository's) and ``DIR/domains.md``, the
table of every problem read with the domain of its inputs.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
from pathlib import Path

#: Domain tags and the expressions of ``get_inputs()`` that give them.
DOMAINS: dict[str, re.Pattern[str]] = {
    "softmax": re.compile(r"softmax"),
    "abs": re.compile(r"\babs\b|\.abs\("),
    "positive": re.compile(r"torch\.rand\(|rand_like|\.exp\(|sigmoid|\.clamp\(min"),
    "scaled": re.compile(r"\*\s*scale|scale\s*\*"),
    "indices": re.compile(r"randint|randperm|arange"),
    "mask": re.compile(r"\.bool\(|dtype=torch\.bool|[<>]=?\s*0"),
    "sign": re.compile(r"\*\s*2\s*-\s*1"),
}

_COPY_KERNEL = '''

import triton
import triton.language as tl


@triton.jit
def _pass_through(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=keep), mask=keep)


def _through_triton(out):
    if isinstance(out, (tuple, list)):
        return type(out)(_through_triton(o) for o in out)
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
        return out
    src = out.contiguous()
    dst = torch.empty_like(src)
    _pass_through[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), BLOCK=1024)
    return dst


class ModelNew(torch.nn.Module):
    """The problem's Model, its floating-point outputs copied by a Triton kernel."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.reference = _ReferenceModel(*args, **kwargs)

    def forward(self, *inputs):
        return _through_triton(self.reference(*inputs))
'''


def get_inputs_source(source: str) -> str:
    """The text of the module's ``get_inputs()``, or ""."""
    tree = ast.parse(source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    return ast.unparse(fn) if fn is not None else ""


def domains_of(source: str) -> list[str]:
    """The domain tags (``DOMAINS``) of the inputs a problem's ``get_inputs()`` makes."""
    text = get_inputs_source(source)
    return [tag for tag, pattern in DOMAINS.items() if pattern.search(text)]


def pass_through_solution(source: str) -> str:
    """The problem's module with ``Model`` renamed ``_ReferenceModel`` and a ``ModelNew`` that
    runs it and copies its floating-point outputs through a Triton kernel."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            node.name = "_ReferenceModel"
        elif isinstance(node, ast.Name) and node.id == "Model":
            node.id = "_ReferenceModel"
    return ast.unparse(tree) + "\n" + _COPY_KERNEL


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernelbench", type=Path, help="KernelBench's problem folder (holding level1/, level2/)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--levels", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--sample", type=int, default=None,
                    help="pair every problem whose inputs have a domain beyond all-positive draws, and this many of "
                         "the others (seed 0); default: all")
    ap.add_argument("--only", nargs="*", default=None, help="problem file stems to pair (all with a domain if not)")
    ap.add_argument("--solutions", type=Path, default=None, help="hand-written ModelNew files, <stem>.py")
    args = ap.parse_args(argv)

    rows = []
    for level in args.levels:
        for path in sorted((args.kernelbench / f"level{level}").glob("*.py"),
                           key=lambda p: int(p.name.split("_", 1)[0]) if p.name[0].isdigit() else 0):
            source = path.read_text()
            rows.append({"level": level, "stem": path.stem, "path": path, "domains": domains_of(source),
                         "get_inputs": " ".join(get_inputs_source(source).split())})
    chosen = [r for r in rows if r["domains"]]
    if args.only:
        chosen = [r for r in chosen if r["stem"] in args.only]
    elif args.sample is not None:
        special = [r for r in chosen if set(r["domains"]) - {"positive"}]
        plain = [r for r in chosen if r not in special]
        picked = random.Random(0).sample(plain, min(args.sample, len(plain)))
        chosen = sorted(special + picked, key=lambda r: (r["level"], int(r["stem"].split("_", 1)[0])))
    pairs = args.out / "pairs"
    pairs.mkdir(parents=True, exist_ok=True)
    own = {p.stem: p for p in args.solutions.glob("*.py")} if args.solutions else {}
    for r in chosen:
        pair_id = f"kb_l{r['level']}_{r['stem'].lower()}"
        made = [(f"{pair_id}__through", pass_through_solution(r["path"].read_text()), "pass-through")]
        if r["stem"] in own:
            made.append((f"{pair_id}__own", own[r["stem"]].read_text(), "hand-written ModelNew"))
        for ident, solution, kind in made:
            d = pairs / ident
            d.mkdir(exist_ok=True)
            shutil.copyfile(r["path"], d / "problem.py")
            (d / "solution.py").write_text(solution)
            (d / "meta.json").write_text(json.dumps({
                "format": "kernelbench", "level": r["level"], "problem_name": r["stem"], "expected": "correct",
                "problem_source": f"ScalingIntelligence/KernelBench KernelBench/level{r['level']}/{r['path'].name}",
                "solution_source": kind, "notes": f"get_inputs() domain: {', '.join(r['domains'])}"}, indent=1))
    lines = ["# KernelBench problems and the domain of their inputs", "",
             f"{len(rows)} problems read; {sum(1 for r in rows if r['domains'])} give their inputs a domain; "
             f"{len(chosen)} paired.", "", "| level | problem | domain | get_inputs() | paired |", "|---|---|---|---|---|"]
    paired = {r["stem"] for r in chosen}
    for r in rows:
        lines.append(f"| {r['level']} | {r['stem']} | {', '.join(r['domains']) or '-'} | "
                     f"`{r['get_inputs'][:160].replace('|', '/')}` | {'yes' if r['stem'] in paired else ''} |")
    (args.out / "domains.md").write_text("\n".join(lines) + "\n")
    print(f"{len(rows)} problems, {sum(1 for r in rows if r['domains'])} with a domain, {len(chosen)} paired "
          f"into {pairs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
