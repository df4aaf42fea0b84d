"""Strict JSON output: every document plena-opt prints or sends is standard JSON.

``json.dumps`` writes ``Infinity``/``NaN`` by default, which is not JSON (RFC 8259) and breaks
strict readers. :func:`dumps` refuses them (``allow_nan=False``); a non-finite number means an
input outside the modelled range slipped through, so it becomes a :class:`PlenaInputError`
naming the document path of the first such value (CLI exit 2, gRPC INVALID_ARGUMENT), never a
traceback or an ``inf`` in the output.

:func:`load_document` is the reading side for every JSON file a user names (profiles, design
spaces): a file that is not UTF-8, not JSON, or nested deeper than :data:`MAX_NESTING` levels is
a :class:`PlenaInputError` naming the field, never a ``UnicodeDecodeError`` or a
``RecursionError``; :func:`read_user_text` reads such a file (JSON or CSV) bounded in bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plena_opt.errors import PlenaInputError

#: JSON nesting depth accepted in a document a user gives (profiles nest 3-4 levels).
MAX_NESTING = 64


def read_user_text(path: str | Path, field: str, what: str, max_bytes: int) -> str:
    """The UTF-8 text of the file a user names as ``field`` (a ``what`` file, at most
    ``max_bytes`` bytes); an unreadable, larger or non-UTF-8 file is a :class:`PlenaInputError`
    naming ``field``."""
    p = Path(path)
    try:
        if p.stat().st_size > max_bytes:
            raise PlenaInputError(field, f"{p.name}: larger than {max_bytes} bytes")
        return p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlenaInputError(field, f"cannot read {what} file {p.name}: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise PlenaInputError(field, f"{p.name}: not UTF-8 text") from None


def nesting_depth_exceeds(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` (parsed JSON) nests deeper than ``limit`` (iterative: cannot overflow)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def load_document(data: bytes | str, field: str, what: str) -> Any:
    """Parse the JSON document ``data`` read from a user's file; ``what`` names it in messages
    (``memory profile 'x.json'``). Not UTF-8, not JSON or nested deeper than
    :data:`MAX_NESTING`: :class:`PlenaInputError` on ``field``."""
    too_deep = PlenaInputError(field, f"{what} is nested deeper than {MAX_NESTING} levels")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise PlenaInputError(field, f"{what} is not UTF-8 text (a binary file?)") from None
    except json.JSONDecodeError as exc:
        raise PlenaInputError(field, f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise too_deep from None
    if nesting_depth_exceeds(doc):
        raise too_deep
    return doc


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
