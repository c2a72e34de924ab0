"""Flop formulas: evaluated with dims as a namespace, arithmetic only."""

from __future__ import annotations

import pytest

from xeforge_core.problem import ProblemError, evaluate_flop


def test_names_are_whole_identifiers_not_text():
    # Textual substitution of N first would turn NH into "2H" and break or corrupt the result.
    assert evaluate_flop("N*NH", {"N": 2, "NH": 3}) == 6.0
    assert evaluate_flop("NH*N", {"NH": 3, "N": 2}) == 6.0
    assert evaluate_flop("B*BATCH", {"B": 5, "BATCH": 7}) == 35.0


def test_precedence_and_parentheses():
    dims = {"A": 2, "B": 3, "C": 4}
    assert evaluate_flop("A + B * C", dims) == 14.0
    assert evaluate_flop("(A + B) * C", dims) == 20.0
    assert evaluate_flop("-A + B", dims) == 1.0
    assert evaluate_flop("C / A - B", dims) == -1.0
    assert evaluate_flop("C // B", dims) == 1.0
    assert evaluate_flop("C % B", dims) == 1.0


def test_power_is_right_associative_and_binds_tighter_than_unary_minus():
    assert evaluate_flop("2**3**2", {}) == 512.0
    assert evaluate_flop("-A**2", {"A": 3}) == -9.0
    assert evaluate_flop("4*B*A*S*S*D", {"B": 1, "A": 4, "S": 128, "D": 64}) == 4 * 4 * 128 * 128 * 64


def test_numbers_and_numeric_strings():
    assert evaluate_flop(1e9, {}) == 1e9
    assert evaluate_flop(12, {}) == 12.0
    assert evaluate_flop("2*EPS", {"EPS": "1e-5"}) == pytest.approx(2e-5)  # YAML 1.1 string


@pytest.mark.parametrize(
    ("formula", "token"),
    [
        ("__import__('os').system('true')", "__import__('os').system('true')"),
        ("N.real", "N.real"),
        ("X[0]", "X[0]"),
        ("'a' * N", "'a'"),
        ("lambda: 1", "lambda: 1"),
        ("N if N else 1", "N if N else 1"),
        ("N < 3", "N < 3"),
    ],
)
def test_non_arithmetic_rejected_with_field_and_token(formula, token):
    with pytest.raises(ProblemError) as err:
        evaluate_flop(formula, {"N": 2, "X": [1]}, field="bench-gpu[0].flop", file="k.yaml", line=9)
    assert err.value.field == "bench-gpu[0].flop"
    assert err.value.line == 9
    assert token in str(err.value)
    assert "k.yaml:9 [bench-gpu[0].flop]" in str(err.value)


def test_disallowed_operator():
    with pytest.raises(ProblemError, match="operator that is not allowed"):
        evaluate_flop("N | 1", {"N": 2})


def test_list_valued_dim_rejected_clearly():
    with pytest.raises(ProblemError, match="SCALE_SHAPE.*is a list"):
        evaluate_flop("2*SCALE_SHAPE", {"SCALE_SHAPE": [4096]})


def test_unknown_dim_and_bad_values():
    with pytest.raises(ProblemError, match="'M', which is not a dim"):
        evaluate_flop("2*M", {"N": 2})
    with pytest.raises(ProblemError, match="not a number"):
        evaluate_flop("2*ACT", {"ACT": "relu"})
    with pytest.raises(ProblemError, match="divides by zero"):
        evaluate_flop("N/0", {"N": 2})
    with pytest.raises(ProblemError, match="exponent"):
        evaluate_flop("10**10**10", {})
    with pytest.raises(ProblemError, match="not an arithmetic expression"):
        evaluate_flop("2*(N", {"N": 2})
    with pytest.raises(ProblemError, match="empty"):
        evaluate_flop("  ", {})
    with pytest.raises(ProblemError):
        evaluate_flop(True, {})
