"""Run sample problems against their PyTorch references in one subprocess (Triton interpreter).

``run_against_reference(problems)`` starts a single Python process with ``TRITON_INTERPRET=1``
that, for every problem, builds the ``ci`` variant's inputs from the spec (seeded normals, the
variant dtype over floating-point inputs, ``model.to(dtype)``), runs the kernel model and the
reference model (which takes the kernel model's state dict) and compares outputs with the
variant's tolerances (dtype defaults otherwise). Every config of every ``@triton.autotune``
kernel is run on its own, since the interpreter cannot benchmark configs. One process for all
problems keeps the torch import cost to one.

This is the fast check; ``verify()`` (the isolated worker) is exercised on a few problems in the
test modules and on all of them in the ``slow`` tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = r'''
import importlib.util, json, sys, traceback
import torch
from triton.runtime.autotuner import Autotuner

DEFAULT_TOL = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-4)}

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def resolve(v, dims):
    return dims[v] if isinstance(v, str) and v in dims else v

def run_case(case):
    variant, spec = case["variant"], case["spec"]
    dims = variant["dims"]
    vdtype = getattr(torch, variant["dtype"]) if variant.get("dtype") else None
    gen = torch.Generator().manual_seed(123)
    inputs = []
    for name in variant["params"]:
        ispec = spec["inputs"][name]
        shape = [int(resolve(d, dims)) for d in ispec["shape"]]
        dt = getattr(torch, ispec.get("dtype") or "float32")
        if vdtype is not None and dt.is_floating_point:
            dt = vdtype
        inputs.append(torch.randn(*shape, generator=gen).to(dt))
    inits = list(variant.get("init_values") or [resolve(i["value"], dims) for i in spec["inits"]])
    kmod = load(case["kernel"], "sample_kernel_" + case["name"])
    rmod = load(case["reference"], "sample_ref_" + case["name"])
    torch.manual_seed(0)
    model = kmod.Model(*inits)
    torch.manual_seed(0)
    ref = rmod.Model(*inits)
    ref.load_state_dict(model.state_dict())
    if vdtype is not None:
        model, ref = model.to(vdtype), ref.to(vdtype)
    expected = ref(*[x.clone() for x in inputs])
    tuners = [o for o in vars(kmod).values() if isinstance(o, Autotuner)]
    saved = [list(t.configs) for t in tuners]
    n_cfg = max([len(c) for c in saved] or [1])
    results = []
    for ci in range(n_cfg):
        for t, cfgs in zip(tuners, saved):
            t.configs = [cfgs[min(ci, len(cfgs) - 1)]]
        args = [x.clone() for x in inputs]
        out = model(*args)
        out = out[0] if isinstance(out, (tuple, list)) else out
        untouched = all(torch.equal(a, x) for a, x in zip(args, inputs))
        d_rtol, d_atol = DEFAULT_TOL.get(out.dtype, (1e-2, 1e-2))
        rtol = float(variant["rtol"]) if variant.get("rtol") is not None else d_rtol
        atol = float(variant["atol"]) if variant.get("atol") is not None else d_atol
        same_meta = out.shape == expected.shape and out.dtype == expected.dtype
        err = float((out.float() - expected.float()).abs().max()) if same_meta else None
        ok = same_meta and untouched and bool(torch.isfinite(out.float()).all()) and torch.allclose(
            out.float(), expected.float(), rtol=rtol, atol=atol)
        results.append({"config": ci, "ok": bool(ok), "max_abs_err": err, "inputs_untouched": untouched,
                        "shape": list(out.shape), "dtype": str(out.dtype),
                        "expected": [list(expected.shape), str(expected.dtype)]})
    return results

out = {}
for case in json.load(open(sys.argv[1])):
    try:
        out[case["name"]] = {"ok": None, "runs": run_case(case)}
        out[case["name"]]["ok"] = all(r["ok"] for r in out[case["name"]]["runs"])
    except Exception:
        out[case["name"]] = {"ok": False, "error": traceback.format_exc()[-3000:]}
print("@@RESULT@@" + json.dumps(out))
'''


def case_for(name: str, problem: Any, variant: str = "ci") -> dict[str, Any]:
    """The JSON case the script runs: ``problem`` (with spec and reference) on ``variant``."""
    assert problem.spec is not None and problem.reference is not None
    assert problem.kernel.path is not None and problem.reference.path is not None
    return {
        "name": name,
        "kernel": str(problem.kernel.path),
        "reference": str(problem.reference.path),
        "spec": problem.spec.to_data(),
        "variant": problem.variant(variant).to_data(),
    }


def run_against_reference(cases: list[dict[str, Any]], tmp_path: Path, timeout_s: float = 600) -> dict[str, Any]:
    """Run ``cases`` in one interpreter subprocess; returns ``{name: {"ok", "runs" | "error"}}``."""
    job = tmp_path / "cases.json"
    job.write_text(json.dumps(cases))
    script = tmp_path / "run_cases.py"
    script.write_text(_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(script), str(job)], capture_output=True, text=True,
                          timeout=timeout_s, env=env, cwd=str(tmp_path))
    marker = "@@RESULT@@"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(marker)), None)
    assert line is not None, f"harness failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(line[len(marker):])
