"""Bytes of a problem's model state (parameters and buffers) at its published and scaled sizes.

A forward reads its weights at least once, so a problem whose inputs are small but whose
weights are large (a batch-1 MLP: 4 KB of input, megabytes of weights) moves far more than
its inputs. :func:`state_bytes` builds ``Model(*get_init_inputs())`` on PyTorch's ``meta``
device (shapes and dtypes, no storage, so sizes scaled far past the device's memory cost
nothing) for each set of size-constant overrides, in one child process with a time limit:
the problem module is code written elsewhere, and it never runs in the benchmark's process.
:func:`largest_tensor` runs the forward there too, for the largest tensor a size makes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

_CHILD = r"""
import json, sys, types
import torch
src, overrides, what = json.load(sys.stdin)
out = []
for ov in overrides:
    try:
        mod = types.ModuleType("problem")
        exec(compile(src, "problem.py", "exec"), mod.__dict__)
        for k, v in ov.items():
            mod.__dict__[k] = tuple(v) if isinstance(v, list) and isinstance(mod.__dict__.get(k), tuple) else v
        with torch.device("meta"):
            model = mod.Model(*mod.get_init_inputs())
            state = [*model.parameters(), *model.buffers()]
            if what == "bytes":
                out.append(sum(t.numel() * t.element_size() for t in state))
                continue
            inputs = [x for x in mod.get_inputs() if isinstance(x, torch.Tensor)]
            got = model(*mod.get_inputs())
        outputs = [x for x in (got if isinstance(got, (tuple, list)) else [got]) if isinstance(x, torch.Tensor)]
        out.append(max(t.numel() for t in [*state, *inputs, *outputs]))
    except Exception:
        out.append(None)
print(json.dumps(out))
"""


def state_bytes(source: str, overrides: list[dict[str, Any]], timeout_s: float = 120.0) -> list[int | None]:
    """Bytes of ``Model``'s parameters and buffers in ``source`` (a KernelBench-style problem
    module) for each dict of module-constant ``overrides`` (``{}``: the published sizes), in
    order; ``None`` where the model cannot be built on the meta device. All ``None`` when the
    child fails or passes ``timeout_s`` seconds."""
    return _on_meta(source, overrides, "bytes", timeout_s)


def largest_tensor(source: str, overrides: list[dict[str, Any]], timeout_s: float = 120.0) -> list[int | None]:
    """Elements of the largest tensor a forward touches (a parameter or buffer, an input of
    ``get_inputs()``, an output), computed on the meta device, for each dict of ``overrides``
    as :func:`state_bytes`; ``None`` where the forward cannot run there (an op without a meta
    kernel, an input moved with ``.cuda()``)."""
    return _on_meta(source, overrides, "largest", timeout_s)


def _on_meta(source: str, overrides: list[dict[str, Any]], what: str, timeout_s: float) -> list[int | None]:
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps([source, overrides, what], default=list),
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        got = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else None
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        got = None
    if not isinstance(got, list) or len(got) != len(overrides):
        return [None] * len(overrides)
    return [int(v) if isinstance(v, int) else None for v in got]
