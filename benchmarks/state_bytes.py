"""Bytes of a problem's model state (parameters and buffers), and its largest tensor, at its published and scaled sizes.

A forward reads its weights at least once, so a problem whose inputs are small but whose
weights are large (a batch-1 MLP: 4 KB of input, megabytes of weights) moves far more than
its inputs. :func:`meta_sizes` builds ``Model(*get_init_inputs())`` on PyTorch's ``meta``
device (shapes and dtypes, no storage, so sizes scaled far past the device's memory cost
nothing) for each set of size-constant overrides (set as the verifier sets them, values derived
from them recomputed: ``worker.inputs.module_overrides``), in one child process with a time limit:
the problem module is code written elsewhere, and it never runs in the benchmark's process.
It runs the forward there too, for the largest tensor a size makes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_CHILD = r"""
import json, sys, types
import torch
from xeforge_core.worker.inputs import module_overrides
path, overrides = json.load(sys.stdin)
src = open(path, encoding="utf-8").read()
# the verifier's own override of the size constants, which re-evaluates the values derived from
# them (bias_shape = (out_channels, 1, 1, 1)) from the module's file
out = []
for ov in overrides:
    state_b = largest = None
    try:
        mod = types.ModuleType("problem")
        mod.__file__ = path
        exec(compile(src, path, "exec"), mod.__dict__)
        with module_overrides(mod, ov), torch.device("meta"):
            model = mod.Model(*mod.get_init_inputs())
            state = [*model.parameters(), *model.buffers()]
            state_b = sum(t.numel() * t.element_size() for t in state)
            inputs = [x for x in mod.get_inputs() if isinstance(x, torch.Tensor)]
            got = model(*mod.get_inputs())
        outputs = [x for x in (got if isinstance(got, (tuple, list)) else [got]) if isinstance(x, torch.Tensor)]
        largest = max(t.numel() for t in [*state, *inputs, *outputs])
    except Exception:
        pass
    out.append([state_b, largest])
print(json.dumps(out))
"""


def meta_sizes(source: str, overrides: list[dict[str, Any]], timeout_s: float = 120.0
               ) -> list[tuple[int | None, int | None]]:
    """For each dict of module-constant ``overrides`` (``{}``: the published sizes) of
    ``source`` (a KernelBench-style problem module), in order, ``(state bytes, largest
    tensor)``: the bytes of ``Model``'s parameters and buffers, and the elements of the largest
    tensor a forward touches (a parameter or buffer, an input of ``get_inputs()``, an output),
    both on the meta device in one child. ``None`` where the model cannot be built there (the
    bytes) or the forward cannot run there (the largest tensor: an op without a meta kernel, an
    input moved with ``.cuda()``); all ``None`` when the child fails or passes ``timeout_s``
    seconds."""
    with tempfile.TemporaryDirectory() as tmp:   # the module's file, removed however the child ends
        path = Path(tmp) / "problem.py"
        path.write_text(source, encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps([str(path), overrides], default=list),
                                  capture_output=True, text=True, timeout=timeout_s, check=False)
            got = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() \
                else None
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            got = None
    if not isinstance(got, list) or len(got) != len(overrides):
        return [(None, None)] * len(overrides)

    def count(v: Any) -> int | None:
        return int(v) if isinstance(v, int) else None

    out: list[tuple[int | None, int | None]] = []
    for pair in got:
        b, n = pair if isinstance(pair, list) and len(pair) == 2 else (None, None)
        out.append((count(b), count(n)))
    return out
