"""Scores, survivor arguments and the report of a mutation run (``benchmarks/bench_mutants.py``).

Pure functions over the run's records (no verification here), so a finished ``mutants.json``
can be reported again with other survivor arguments (``bench_mutants.py --resume --explain``).
A record of a verification is a dict with ``kind`` (our verdict kind; KernelBench's ``pass`` /
``fail``), ``reason``, ``findings`` and ``runs`` (``[variant, seed, distribution, config,
[[max abs error, max rel error, mismatches] per output]]`` against the truth).
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------------------------ survivors

#: Triton functions that clamp against constants: any composition of them is a monotone clamp
#: (values below one bound go to it, above the other to it), and a clamp is idempotent.
_CLAMPS = {"maximum", "minimum", "clamp", "relu"}


def _is_constant(node: ast.AST, var: str) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)) \
        or (isinstance(node, ast.Name) and node.id != var and node.id.isupper())


def _call_name(expr: ast.AST) -> str | None:
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, (ast.Attribute, ast.Name)):
        return None
    return expr.func.attr if isinstance(expr.func, ast.Attribute) else expr.func.id


def _clamp(expr: ast.AST, var: str) -> bool:
    """Whether ``expr`` is var, or max/min/clamp/relu of a clamp of var and constants."""
    if isinstance(expr, ast.Name):
        return expr.id == var
    if _call_name(expr) not in _CLAMPS:
        return False
    inner = [a for a in expr.args if not _is_constant(a, var)]  # type: ignore[attr-defined]
    return len(inner) == 1 and _clamp(inner[0], var)


def _reads(expr: ast.AST, var: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(expr))


def idempotent(expr: ast.AST, var: str) -> bool:
    """Whether ``expr`` is f(var) for an f with f(f(x)) = f(x): a clamp against constants
    (``tl.maximum(x, 0)``, ``tl.minimum(tl.maximum(x, lo), hi)``), ``tl.abs(x)``, a select that
    keeps x or a constant (``tl.where(x > 0, x, 0)``, whatever its condition), a select into x
    of a value that does not read x under a mask that does not either (``tl.where(mask, y, x)``), or
    ``tl.where(mask, f(x), 0)`` with f idempotent and a mask that does not read x. Compositions
    beyond clamps are not: ``tl.abs(tl.minimum(x, -1.0))`` maps -3 to 3, and 3 to 1."""
    if _clamp(expr, var):
        return True
    name = _call_name(expr)
    args = list(expr.args) if isinstance(expr, ast.Call) else []
    if name == "abs" and len(args) == 1:
        return isinstance(args[0], ast.Name) and args[0].id == var
    if name == "where" and len(args) == 3:
        cond, a, b = args
        if isinstance(b, ast.Name) and b.id == var and not _reads(cond, var) and not _reads(a, var):
            return True  # tl.where(mask, y, x): the mask's lanes take y both times, the others keep x
        if not _is_constant(b, var):
            return False
        if not _reads(cond, var):
            return idempotent(a, var)  # a mask that does not read x selects the same lanes both times
        return isinstance(a, ast.Name) and a.id == var  # x kept, or the constant, which is kept again
    return False


def _zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def _reselected(first: ast.AST, second: ast.AST, var: str) -> bool:
    """``var = tl.where(c, a, 0)`` then ``var = tl.where(var, a, 0)`` (``a`` not reading ``var``):
    every lane of ``var`` is ``a`` or 0, a nonzero lane is ``a`` and selects ``a`` again, a zero
    lane selects 0: the second select keeps ``var``."""
    if _call_name(first) != "where" or _call_name(second) != "where":
        return False
    (_, a1, z1), (c2, a2, z2) = first.args, second.args  # type: ignore[attr-defined]
    return (_zero(z1) and _zero(z2) and isinstance(c2, ast.Name) and c2.id == var
            and ast.dump(a1) == ast.dump(a2) and not _reads(a1, var))


def _statement(line: str) -> ast.Assign | None:
    try:
        stmt = ast.parse(line.strip()).body[0]
    except (SyntaxError, IndexError):
        return None
    return stmt if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) else None


def _idempotent_epilogue(before: str, after: str = "") -> str | None:
    """The argument that an epilogue applied twice changes nothing, or ``None``. ``after`` is the
    mutant's text (the epilogue, then its second application)."""
    stmt = _statement((before.strip().splitlines() or [""])[0])
    if stmt is None:
        return None
    var = stmt.targets[0].id  # type: ignore[attr-defined]
    lines = after.strip().splitlines()
    again = _statement(lines[1]) if len(lines) == 2 else None
    if (again is not None and again.targets[0].id == var  # type: ignore[attr-defined]
            and len(getattr(stmt.value, "args", [])) == 3 and len(getattr(again.value, "args", [])) == 3
            and _reselected(stmt.value, again.value, var)):
        return (f"equivalent: {ast.unparse(again.value)} after {ast.unparse(stmt)} keeps {var}: each of its lanes is "
                f"{ast.unparse(stmt.value.args[1])} or 0, a nonzero lane selects the same value again and a zero lane "  # type: ignore[attr-defined]
                "selects 0, at every size")
    names = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
    inner = [n for n in names if n not in ("tl",) and not n.isupper()]
    x = var if var in inner else (inner[0] if len(inner) == 1 else None)  # what the second application reads
    if x is not None and idempotent(stmt.value, x):
        return (f"equivalent: {ast.unparse(stmt.value)} is idempotent (f(f(x)) = f(x): a max/min/clamp with "
                f"constant bounds), so computing {var} twice gives the same value at every size")
    return None


def _runs_key(run: list[Any]) -> tuple[Any, ...]:
    return tuple(run[:4])


def same_outputs(mutant: dict[str, Any], original: dict[str, Any]) -> bool | None:
    """Whether the mutant's errors against the truth equal the unmodified kernel's on every run
    both made (same inputs, same weights): then their outputs are, for all practical purposes,
    identical. ``None`` when they share no run."""
    theirs = {_runs_key(r): r[4] for r in original.get("runs") or []}
    shared = [(r[4], theirs[_runs_key(r)]) for r in mutant.get("runs") or [] if _runs_key(r) in theirs]
    if not shared:
        return None
    return all(a == b for a, b in shared)


def _worst(row: dict[str, Any]) -> float | None:
    errs = [o[0] for r in row.get("runs") or [] for o in r[4] if o and o[0] is not None]
    return max(errs) if errs else None


def survivor_analysis(key: str, row: dict[str, Any], original: dict[str, Any], given: dict[str, Any] | None,
                      device_type: str) -> dict[str, Any]:
    """Status (``equivalent``, ``gap`` or ``unexplained``), argument and evidence of a mutant our
    verifier passed. A given argument (``--explain``) wins; then what the run proves (refused at
    the published size: a gap), then what the class alone proves (an idempotent epilogue:
    equivalent; a race on the CPU interpreter: a gap). Identical outputs and the memory checker's
    reads are evidence only: a dropped K-tail mask reads out of bounds and changes nothing at
    sizes that are multiples of the tile, and is wrong at the others."""
    ours = row.get("ours") or {}
    evidence = []
    same = same_outputs(ours, original)
    if same is True:
        evidence.append("outputs identical to the unmodified kernel's on every checked input")
    elif same is False:
        evidence.append(f"outputs differ from the unmodified kernel's within the tolerance (max abs error against "
                        f"the truth {_worst(ours):.3g}, unmodified {_worst(original) or 0:.3g})")
    mem = [f for f in ours.get("findings") or [] if f["rule"].startswith("memcheck")]
    evidence += [f"{f['rule']}: {f['message']}" for f in mem]
    pub = row.get("published")
    if pub:
        evidence.append(f"at the published size: {pub.get('kind')}" + (f" ({pub.get('reason')})" if pub.get("reason") else ""))
    if given:
        return {"status": given.get("status", "unexplained"), "argument": given.get("argument", ""), "evidence": evidence}
    if pub and pub.get("kind") not in ("ok", "inconsistent", "inconclusive", "environment", "harness_error"):
        return {"status": "gap", "argument": "wrong at the published size, right at the sizes the verifier checks: "
                "the default sizes do not reach the fault", "evidence": evidence}
    cls = row.get("mutation_class")
    if cls == "add_without_atomic" and device_type == "cpu":
        return {"status": "gap", "argument": "the CPU interpreter runs the programs of a launch one after another, so "
                "a non-atomic read-add-write cannot race there; only a GPU run can show the lost updates",
                "evidence": evidence}
    if cls == "epilogue_twice":
        why = _idempotent_epilogue(row.get("before", ""), row.get("after", ""))
        if why:
            return {"status": "equivalent", "argument": why, "evidence": evidence}
    return {"status": "unexplained", "argument": f"argue it in --explain under {key!r}", "evidence": evidence}


# ------------------------------------------------------------------------------------ scores


#: Exceptions with which KernelBench's evaluation fails for the machine, not for the kernel: a
#: device filled by other work running beside it. Such a ``fail`` is no verdict.
KB_ENVIRONMENT_ERRORS = ("torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError")


def kb_kind(row: dict[str, Any] | None) -> str | None:
    """KernelBench's verdict kind of ``row`` (``kernelbench_eval.py``'s record): its ``kind``,
    except ``no_verdict`` for a ``fail`` raised by ``KB_ENVIRONMENT_ERRORS`` (its
    ``metadata.runtime_error_name``), which says nothing about the kernel."""
    if not row:
        return None
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    if row.get("kind") == "fail" and metadata.get("runtime_error_name") in KB_ENVIRONMENT_ERRORS:
        return "no_verdict"
    return row.get("kind")


#: A timeout counts as a refusal only where the unmodified kernel's verification took less than
#: this share of the limit: a slower one can time out from the load of the run alone (twelve
#: verifications sharing one GPU stretched a LayerNorm's from tens of seconds to 219 s of 300).
SLOW_SHARE = 1 / 3


def slow_kernels(originals: dict[str, dict[str, Any]], limit_s: float) -> set[str]:
    """The kernels whose unmodified verification took over ``SLOW_SHARE`` of ``limit_s``: a
    timeout of one of their mutants is no verdict."""
    return {k for k, o in originals.items() if float((o.get("ours") or {}).get("seconds") or 0) > SLOW_SHARE * limit_s}


def ours_kind(row: dict[str, Any], slow: set[str] | frozenset[str] = frozenset()) -> str | None:
    """Our verdict kind of mutant ``row``, as scored: ``no_verdict`` for a timeout of a mutant of
    a ``slow`` kernel (:func:`slow_kernels`)."""
    kind = (row.get("ours") or {}).get("kind")
    return "no_verdict" if kind == "timeout" and row["kernel_id"] in slow else kind


def _score(rows: list[dict[str, Any]], tool: str, refusing: set[str], passing: set[str],
           slow: set[str] | frozenset[str] = frozenset()) -> tuple[int, int]:
    """(refused, counted) of ``tool`` over ``rows`` (mutants of kernels it passes), each verdict
    as scored (:func:`ours_kind`, :func:`kb_kind`)."""
    if tool == "ours":
        kinds = [ours_kind(r, slow) for r in rows if r.get("ours")]
        counted = [k for k in kinds if k in refusing or k in passing]
        return sum(k in refusing for k in counted), len(counted)
    kinds = [kb_kind(r.get("kb")) for r in rows if r.get("kb")]
    counted = [k for k in kinds if k in ("pass", "fail")]
    return sum(k == "fail" for k in counted), len(counted)


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({a / b:.0%})" if b else "-"


def write_reports(out: Path, header: dict[str, Any], originals: dict[str, dict[str, Any]],
                  mutants: dict[str, dict[str, Any]], refusing: set[str], passing: set[str]) -> str:
    """Write ``mutants.csv`` and ``mutants.md``; returns the Markdown (tables last)."""
    rows = sorted(mutants.values(), key=lambda r: (r["kernel_id"], r["mutation_class"]))
    cols = ["kernel_id", "mutation_class", "line", "kernel", "before", "after", "ours", "ours_reason", "kb",
            "published", "status", "argument"]
    with open(out / "mutants.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in rows:
            a = r.get("analysis") or {}
            w.writerow([r["kernel_id"], r["mutation_class"], r["line"], r["kernel"], r["before"], r["after"],
                        (r.get("ours") or {}).get("kind", ""), (r.get("ours") or {}).get("reason", ""),
                        kb_kind(r.get("kb")) or "", (r.get("published") or {}).get("kind", ""),
                        a.get("status", ""), a.get("argument", "")])
    slow = slow_kernels(originals, float(header.get("timeout") or 300))
    unjudged = [r for r in rows if ours_kind(r, slow) == "no_verdict"]
    ours_r, ours_n = _score(rows, "ours", refusing, passing, slow)
    kb_r, kb_n = _score(rows, "kb", refusing, passing)
    kernels_ours = [k for k, o in originals.items() if (o.get("ours") or {}).get("kind") in passing]
    kernels_kb = [k for k, o in originals.items() if kb_kind(o.get("kb")) == "pass"]
    missed = [r for r in rows if kb_kind(r.get("kb")) == "fail"
              and (r.get("ours") or {}).get("kind") in passing]
    survivors = [r for r in rows if (r.get("ours") or {}).get("kind") in passing]
    equivalent = [r for r in survivors if (r.get("analysis") or {}).get("status") == "equivalent"]
    lines = [f"# Mutation benchmark of the verifier ({header['date']})", "",
             f"Device: {header['device']}; {header['versions']}; host {header['host']}; seeds {header['seeds']}; "
             f"memory checker {'on' if header.get('memcheck') else 'off'}; "
             f"KernelBench's evaluation {'from ' + header['kernelbench'] if header.get('kernelbench') else 'not run'}; "
             f"{header.get('seconds', '?')} s.", "",
             f"{len(originals)} unmodified kernels: ours passes {len(kernels_ours)}, KernelBench's evaluation passes "
             f"{len(kernels_kb)}. {len(rows)} mutants of the kernels a tool passes. A refusal counts only where the "
             "tool passes the unmodified kernel.", "",
             f"**Mutation score, ours: {_pct(ours_r, ours_n)}; KernelBench's evaluation: {_pct(kb_r, kb_n)}.** "
             f"Without the {len(equivalent)} survivors argued equivalent (they cannot change any output the problem "
             f"allows), ours: {_pct(ours_r, ours_n - len(equivalent))}."
             + (f" Not counted: {len(unjudged)} timeouts of mutants of kernels whose unmodified verification took over "
                f"{SLOW_SHARE:.0%} of the {float(header.get('timeout') or 300):g} s limit "
                f"({', '.join(sorted({r['kernel_id'] for r in unjudged}))}): the run's load, not the mutant, may "
                "have made them slow." if unjudged else ""), "",
             f"Mutants KernelBench's evaluation refuses but ours passes: {len(missed)}"
             + (": " + ", ".join(f"{r['kernel_id']}/{r['mutation_class']}" for r in missed) if missed else "."), ""]
    lines += ["## Per fault class", "", "| class | mutants | ours refused | KernelBench refused | survivors (ours) |",
              "|---|---|---|---|---|"]
    for cls in sorted({r["mutation_class"] for r in rows}):
        sub = [r for r in rows if r["mutation_class"] == cls]
        a, b = _score(sub, "ours", refusing, passing, slow)
        c, d = _score(sub, "kb", refusing, passing)
        lines.append(f"| {cls} | {len(sub)} | {_pct(a, b)} | {_pct(c, d)} | {b - a} |")
    lines += ["", "## Per kernel", "", "| kernel | unmodified: ours | unmodified: KernelBench | mutants | ours refused "
              "| KernelBench refused |", "|---|---|---|---|---|---|"]
    for kid in sorted(originals):
        sub = [r for r in rows if r["kernel_id"] == kid]
        o = originals[kid]
        a, b = _score(sub, "ours", refusing, passing, slow)
        c, d = _score(sub, "kb", refusing, passing)
        allowed = (o.get("ours") or {}).get("allowed")
        ours = (o.get("ours") or {}).get("kind", "-") + (f" (--allow {','.join(allowed)})" if allowed else "")
        lines.append(f"| {kid} | {ours} | {kb_kind(o.get('kb')) or '-'} | "
                     f"{len(sub)} | {_pct(a, b)} | {_pct(c, d)} |")
    lines += ["", f"## Survivors ({len(survivors)}): equivalent or a gap", ""]
    for r in survivors:
        a = r.get("analysis") or {}
        lines.append(f"- **{r['kernel_id']}/{r['mutation_class']}** (line {r['line']}, {r['kernel']}): "
                     f"`{_one_line(r['before'])}` -> `{_one_line(r['after'])}`. **{a.get('status', 'unexplained')}**: "
                     f"{a.get('argument', '')}" + (f" Evidence: {'; '.join(a.get('evidence') or [])}." if a.get("evidence") else ""))
    unmod = [(k, o) for k, o in sorted(originals.items()) if (o.get("ours") or {}).get("kind") not in passing]
    if unmod:
        lines += ["", "## Unmodified kernels ours does not pass (their mutants are not counted for ours)", ""]
        lines += [f"- {k}: {(o.get('ours') or {}).get('kind')}: {(o.get('ours') or {}).get('reason', '')}" for k, o in unmod]
    text = "\n".join(lines) + "\n"
    (out / "mutants.md").write_text(text)
    return text


def _one_line(text: str) -> str:
    return " / ".join(s.strip() for s in text.splitlines())[:160].replace("|", "/")
