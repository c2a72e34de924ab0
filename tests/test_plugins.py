"""Adding a problem format and a device backend, measured: each is one module (written here)
plus its entry in one registry, and every part of the product that depends on the concept takes
it from there. ``docs/architecture.md`` records the table these tests measure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xeforge_core.worker import formats
from xeforge_core.worker.formats.base import ProblemFormat

#: A toy format: the solution class is ``TritonSolution`` and its PyTorch reference is the
#: sibling ``<stem>_torch.py`` (neither name is known to any other module of the package).
TOY_FORMAT = ProblemFormat(name="toy", title="toy solution (class TritonSolution, <stem>_torch.py)",
                           entry_names=("TritonSolution",), reference_suffixes=("_torch",),
                           inputs_function="get_inputs", init_inputs_function="get_init_inputs")

TOY_KERNEL = '''
import torch
import triton
import triton.language as tl

N = 300


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


class TritonSolution(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''

TOY_REFERENCE = '''
import torch

N = 300


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''


class Touched:
    """The modules a registration patched, so the test measures what adding a concept touches."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.files: set[str] = set()

    def setattr(self, module: object, name: str, value: object) -> None:
        self.files.add(Path(module.__file__).name if Path(module.__file__).name != "__init__.py"  # type: ignore[attr-defined]
                       else str(Path(module.__file__).parent.name) + "/__init__.py")  # type: ignore[attr-defined]
        self.monkeypatch.setattr(module, name, value)


def test_a_format_is_one_module_plus_its_registration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Registered in ``worker.formats.FORMATS`` only, a new format is recognised by the static
    reader, the loader (its sibling reference), the workbench's input check and the candidate
    check, and its entry is run by the worker, which is told only the entry's name."""
    from xeforge_core.problem import load_problem
    from xeforge_core.problem.entry import entry_point
    from xeforge_core.problem.loader import check_candidate_entry
    from xeforge_core.problem.module import read_module
    from xeforge_core.ui.validate import InputError, check_kernel_source
    from xeforge_core.verify import VerifyOptions, verify

    kernel = tmp_path / "toy_scale.py"
    kernel.write_text(TOY_KERNEL)
    (tmp_path / "toy_scale_torch.py").write_text(TOY_REFERENCE)
    with pytest.raises(InputError):
        check_kernel_source(TOY_KERNEL)  # unknown before it is registered

    touched = Touched(monkeypatch)
    touched.setattr(formats, "FORMATS", (*formats.FORMATS, TOY_FORMAT))
    assert touched.files == {"formats/__init__.py"}  # + the format's own module: 2 files

    assert check_kernel_source(TOY_KERNEL) == TOY_KERNEL
    check_candidate_entry(TOY_KERNEL)
    assert entry_point(TOY_KERNEL) == ("class", "TritonSolution")
    assert read_module(TOY_KERNEL).model_class == "TritonSolution"
    problem = load_problem(kernel)
    assert problem.kernel.class_name == "TritonSolution"
    assert problem.reference is not None and problem.reference.path == tmp_path / "toy_scale_torch.py"
    fast = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, use_cache=False,
                         measure_performance=False, grid_coverage=False)
    verdict = verify(problem, TOY_KERNEL, device="cpu", options=fast)
    assert verdict.kind.value == "ok", verdict.reason
    wrong = verify(problem, TOY_KERNEL.replace("* 2.0, mask", "* 2.5, mask"), device="cpu", options=fast)
    assert wrong.kind.value == "wrong_answer", wrong.reason


def test_the_format_registry_names_every_convention_once() -> None:
    assert formats.class_names() == ("ModelNew", "Model")
    assert formats.function_names() == ("kernel_function",)
    assert formats.spec_suffixes() == (".yaml", ".yml")
    assert formats.reference_suffixes() == ("_pytorch", "_ref")
    assert formats.get_format("kernelagent").adapt is not None
    with pytest.raises(KeyError, match="known: kernelbench_solution"):
        formats.get_format("kernelbenh")


def test_reading_the_formats_imports_no_torch() -> None:
    import subprocess

    code = ("import sys, xeforge_core.worker.formats as f; f.class_names(); "
            "print(any(m == 'torch' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
