"""Safe arithmetic for ISA cost expressions (analytic-model §1.2).

Instruction costs are written as expressions over chip configuration names, e.g.
``"(MLEN//BLEN)**2*BLEN"``. They are evaluated by walking the parsed syntax tree; only numbers,
names from the given namespace, ``+ - * / // **``, unary signs and parentheses are accepted, so no
user text is ever executed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

MAX_EXPRESSION_CHARS = 500
MAX_MAGNITUDE = 2**62  # cycles; far above any real instruction cost
MAX_EXPONENT = 64  # keeps ``**`` from building huge integers

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class ExpressionError(ValueError):
    """An expression uses something other than numbers, known names and + - * / // **."""


def evaluate(expression: str | int | float, names: Mapping[str, int | float]) -> int | float:
    """Evaluate ``expression`` with ``names`` bound; returns the number (int or float)."""
    if isinstance(expression, bool):
        raise ExpressionError("must be a number or an arithmetic expression, not a bool")
    if isinstance(expression, int | float):
        return expression
    if not isinstance(expression, str):
        raise ExpressionError("must be a number or an arithmetic expression string")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"is not a valid expression: {expression!r}") from exc
    return _walk(tree.body, names, expression)


def _walk(node: ast.AST, names: Mapping[str, int | float], text: str) -> int | float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ExpressionError(f"{text!r}: only numeric constants are allowed")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names))
            raise ExpressionError(f"{text!r}: unknown name {node.id!r}; known names: {known}")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _walk(node.left, names, text)
        right = _walk(node.right, names, text)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ExpressionError(f"{text!r}: exponent {right} exceeds {MAX_EXPONENT}")
            if abs(left) > 1 and right > 0 and right * math.log2(abs(left)) > 62:
                raise ExpressionError(f"{text!r}: a value exceeds {MAX_MAGNITUDE:.3g}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise ExpressionError(f"{text!r}: division by zero") from exc
        except OverflowError as exc:
            raise ExpressionError(f"{text!r}: the value overflows") from exc
        # Bound every intermediate: a cycle count beyond 2**62 is nonsense, and the bound keeps
        # integer powers of huge bases from running for minutes.
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise ExpressionError(f"{text!r}: a value exceeds {MAX_MAGNITUDE:.3g}")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_walk(node.operand, names, text))
    raise ExpressionError(
        f"{text!r}: only numbers, names, + - * / // ** and parentheses are allowed "
        f"(found {type(node).__name__})"
    )
