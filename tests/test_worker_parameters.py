"""Parameters a constructor fills with one value are redrawn as trained weights would be
(``xeforge_core.worker.parameters``): a kernel that drops a zero bias is caught, a right kernel
that keeps the parameters under other names is ok without an ``init_differs`` finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from xeforge_core.cli import main
from xeforge_core.worker.parameters import redraw_constant_parameters_, redrawn_note

KB = Path(__file__).resolve().parent / "fixtures" / "formats" / "kernelbench"


class _Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 6)
        self.norm = nn.LayerNorm(6)
        self.frozen = nn.Parameter(torch.ones(6), requires_grad=False)
        self.scalar = nn.Parameter(torch.tensor([2.0]))
        self.register_buffer("running", torch.zeros(6))


class _Renamed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(6))
        self.beta = nn.Parameter(torch.zeros(6))


def test_only_trainable_constant_filled_parameters_are_redrawn():
    torch.manual_seed(0)
    m = _Norms()
    linear_before = m.linear.weight.detach().clone(), m.linear.bias.detach().clone()
    redrawn = redraw_constant_parameters_(m, seed=3)
    assert redrawn == {"scalar": 2.0, "norm.weight": 1.0, "norm.bias": 0.0}
    assert torch.equal(m.linear.weight, linear_before[0]) and torch.equal(m.linear.bias, linear_before[1])
    assert torch.equal(m.frozen, torch.ones(6)) and torch.equal(m.running, torch.zeros(6))
    assert m.scalar.item() != 2.0 and 1.0 <= m.scalar.item() <= 3.0  # a learned scalar is a weight too
    w, b = m.norm.weight.detach(), m.norm.bias.detach()
    assert len(set(w.tolist())) == 6 and bool(((w >= 0.5) & (w <= 1.5)).all())  # a scale stays positive
    assert len(set(b.tolist())) == 6 and bool((b.abs() <= 0.1).all())
    assert redrawn_note(redrawn) == "scalar (filled with 2), norm.weight (filled with 1), norm.bias (filled with 0)"


def test_the_draw_follows_shape_and_fill_value_not_the_name():
    a, b = _Norms(), _Renamed()
    redraw_constant_parameters_(a, seed=5)
    redraw_constant_parameters_(b, seed=5)
    assert torch.equal(a.norm.weight, b.gamma) and torch.equal(a.norm.bias, b.beta)
    c = _Renamed()
    redraw_constant_parameters_(c, seed=6)
    assert not torch.equal(b.gamma, c.gamma)  # another seed, other values


@pytest.fixture
def verify(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))

    def run(*args: Path) -> tuple[int, dict]:
        code = main(["verify", *map(str, args), "--device", "cpu", "--json", "--seeds", "1", "--no-odd-size"])
        return code, json.loads(capsys.readouterr().out)
    return run


def test_a_kernel_that_drops_a_zero_initialised_shift_is_wrong_and_says_why(verify):
    code, v = verify(KB / "affine_rows.py", KB / "affine_rows_no_shift.py")
    assert (code, v["kind"]) == (1, "wrong_answer"), v["reason"]
    assert "were redrawn, as training changes them: scale (filled with 1), shift (filled with 0)" in v["reason"]


def test_a_right_kernel_with_renamed_parameters_is_ok_without_init_differs(verify):
    code, v = verify(KB / "affine_rows.py", KB / "affine_rows_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert "init_differs" not in {f["rule"] for f in v["findings"]}



def test_a_constant_folded_into_the_weights_at_construction_is_wrong_and_the_reason_says_why():
    """A published pattern (KernelBenchFiltered's GEMM-ReLU-divide): the divisor is folded into
    the linear layer's weights in ``__init__``. With the problem's weights loaded, as trained ones
    would be, it is off by the divisor; the reason says its own initial values differed and were
    replaced, which is why KernelBench's evaluation (modules compared as constructed) passes it."""
    from pathlib import Path

    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    fixtures = Path(__file__).parent / "fixtures" / "weights"
    verdict = verify(load_problem(fixtures / "folded_divisor_problem.py"),
                     (fixtures / "folded_divisor_solution.py").read_text(), device="cpu",
                     options=VerifyOptions(seeds=1, measure_performance=False, use_cache=False))
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert "its own initial values of linear.weight, linear.bias are not the baseline's" in verdict.reason
