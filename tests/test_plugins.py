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
    assert formats.function_names() == ("kernel_function", "triton_kernel_wrapper")
    assert formats.get_format("wrapper").adapt is formats.get_format("kernelagent").adapt
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


def _toy_probe(out: dict) -> None:
    out["available"]["toy"] = 2
    for i in range(2):
        out["devices"][f"toy:{i}"] = {"type": "toy", "index": i, "name": "Toy accelerator", "driver_version": None,
                                      "triton_backend": "toy", "compute_units": 4, "l2_bytes": None,
                                      "memory_bytes": 1 << 30, "extra": {}}


def test_a_backend_is_one_module_plus_its_registration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Registered in ``worker.backends.BACKENDS`` only (ahead of the others, so detection
    prefers it), a new device backend is probed, chosen, parsed as an override, numbered through
    its visibility variable, given its device nodes in the sandbox, accepted by the Ray batch,
    named in the doctor's stack and in the note on a module that hard-codes it."""
    from xeforge_core import devices, sandbox
    from xeforge_core.raybatch.jobs import JobPlacement
    from xeforge_core.worker import backends, probe
    from xeforge_core.worker.backends.base import DeviceBackend
    from xeforge_core.worker.errors import hardcoded_device_note

    node = tmp_path / "toy0"
    node.write_text("")
    toy = DeviceBackend(name="toy", title="toy accelerator", triton_backend="toy", probe=_toy_probe,
                        torch_module="toy", visible_devices_var="TOY_VISIBLE_DEVICES",
                        device_nodes=(str(tmp_path / "toy*"),), runtime_libraries=("libtoyrt",),
                        doctor_problems=lambda stems: [] if "libtoyrt" in stems else ["no libtoyrt loaded"],
                        hardcoded=r"['\"]toy(:\d+)?['\"]")
    with pytest.raises(ValueError, match="unknown device 'toy:1'"):
        devices.parse_override("toy:1")

    touched = Touched(monkeypatch)
    touched.setattr(backends, "BACKENDS", (toy, *backends.BACKENDS))
    assert touched.files == {"backends/__init__.py"}  # + the backend's own module: 2 files

    result = probe.run({"options": {"probe_types": ["toy", "cpu"]}})
    assert result["available"] == {"toy": 2, "cpu": 1} and result["devices"]["toy:1"]["name"] == "Toy accelerator"
    assert devices.select_device(None, result["available"]) == ("toy", 0)
    assert devices.select_device("toy:1", result["available"]) == ("toy", 1)
    assert devices.parse_override("toy:1") == ("toy", 1)
    monkeypatch.setenv("TOY_VISIBLE_DEVICES", "5,7")
    assert devices.physical_index("toy", 1) == "7"
    assert node in sandbox.device_nodes()
    placement = JobPlacement(device_type="toy")
    assert placement.uses_gpus and placement.resources("timing")["num_gpus"] == 1
    assert backends.get_backend("toy").doctor_problems(["libcuda"]) == ["no libtoyrt loaded"]
    note = hardcoded_device_note("x = torch.ones(3, device='toy')", "RuntimeError: toy device not found", "cpu")
    assert note and note.startswith("hard-codes the toy device")
    assert "TOY_VISIBLE_DEVICES" in backends.device_env()


def test_the_backends_keep_the_selection_order_and_the_xpu_path() -> None:
    """xpu first, then cuda, then the interpreter; xpu behind the same interface as cuda."""
    from xeforge_core.devices import select_device
    from xeforge_core.worker import backends

    assert backends.names() == ("xpu", "cuda", "cpu") and backends.gpu_names() == ("xpu", "cuda")
    assert select_device(None, {"xpu": 1, "cuda": 2, "cpu": 1}) == ("xpu", 0)
    assert select_device(None, {"xpu": 0, "cuda": 2, "cpu": 1}) == ("cuda", 0)
    assert select_device(None, {"cpu": 1}) == ("cpu", 0)
    xpu, cuda = backends.get_backend("xpu"), backends.get_backend("cuda:1")
    assert (xpu.visible_devices_var, cuda.visible_devices_var) == ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES")
    assert (xpu.torch_module, xpu.triton_backend, xpu.graph_class) == ("xpu", "intel", "XPUGraph")
    assert not xpu.graph_timing and cuda.graph_timing and cuda.busy_wait and not xpu.busy_wait
    assert backends.triton_backend_for("xpu") == "intel" and backends.triton_backend_for("hip") == "amd"
    assert xpu.doctor_problems(["libsycl"]) == ["no Level Zero loader (libze_loader) is loaded in the xpu process"]
    with pytest.raises(ValueError, match="expected xpu, cuda, cpu"):
        backends.get_backend("tpu")
