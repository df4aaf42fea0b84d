"""Strict JSON output: every document plena-opt prints or sends is standard JSON.

``json.dumps`` writes ``Infinity``/``NaN`` by default, which is not JSON (RFC 8259) and breaks
strict readers. :func:`dumps` refuses them (``allow_nan=False``); a non-finite number means an
input outside the modelled range slipped through, so it becomes a :class:`PlenaInputError`
naming the document path of the first such value (CLI exit 2, gRPC INVALID_ARGUMENT), never a
traceback or an ``inf`` in the output.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from plena_opt.errors import PlenaInputError


def non_finite_path(obj: Any, path: str = "$") -> str | None:
    """Path (``$.a.b[3]``) of the first non-finite float in ``obj``, or None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            found = non_finite_path(value, f"{path}.{key}")
            if found:
                return found
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            found = non_finite_path(value, f"{path}[{i}]")
            if found:
                return found
    return None


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, allow_nan=False, **kwargs)``; a non-finite number raises
    :class:`PlenaInputError` naming where it is."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError as exc:
        where = non_finite_path(obj)
        if where is None:
            raise
        raise PlenaInputError(
            "result",
            f"the result is not finite at {where} (an input is outside the range the model "
            "supports)",
        ) from exc
