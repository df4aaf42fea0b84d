"""Safe evaluation of ISA cost expressions (analytic-model §1.2)."""

from __future__ import annotations

import pytest

from plena_opt.chip.expression import ExpressionError, evaluate

NAMES = {"MLEN": 2048, "BLEN": 128, "VECTOR_EXP_CYCLES": 1}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("BLEN", 128),
        ("(MLEN//BLEN)**2*BLEN", 32768),
        ("1+BLEN", 129),
        ("1 + VECTOR_EXP_CYCLES", 2),
        ("MLEN/BLEN", 16.0),
        ("-BLEN + 2*BLEN", 128),
        ("+(3*BLEN)+11", 395),
        (7, 7),
        ("  42  ", 42),
    ],
)
def test_allowed_arithmetic(expression: str | int, expected: int | float) -> None:
    assert evaluate(expression, NAMES) == expected


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ('__import__("os").system("true")', "only numbers"),
        ("BLEN.bit_length()", "only numbers"),
        ("[BLEN][0]", "only numbers"),
        ("BLEN if MLEN else 1", "only numbers"),
        ("BLEN > 1", "only numbers"),
        ("lambda: 1", "only numbers"),
        ("BLEN % 3", "only numbers"),
        ("'abc'", "numeric constants"),
        ("True", "numeric constants"),
        ("NOPE + 1", "unknown name 'NOPE'"),
        ("2**10**10", "exponent"),
        ("BLEN // 0", "division by zero"),
        ("BLEN +", "not a valid expression"),
        ("1" * 600, "longer than"),
    ],
)
def test_rejected_expressions(expression: str, fragment: str) -> None:
    with pytest.raises(ExpressionError, match=fragment):
        evaluate(expression, NAMES)


@pytest.mark.parametrize("value", [True, None, [1]])
def test_non_expression_values_rejected(value: object) -> None:
    with pytest.raises(ExpressionError):
        evaluate(value, NAMES)  # type: ignore[arg-type]
