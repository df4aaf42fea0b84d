"""User-input errors shared by every layer (CLI: exit 2; gRPC: INVALID_ARGUMENT / NOT_FOUND /
FAILED_PRECONDITION for a damaged study store).

Messages are bounded: whatever a request carries, an error message echoes at most
:data:`MAX_ECHO` characters of one input (:func:`echo`), lists at most :data:`MAX_NAMES` valid
names (:func:`name_list`) and is cut at :data:`MAX_MESSAGE` UTF-8 bytes in all (gRPC sends it,
percent-encoded, in a response header, whose size is limited to 8 KiB by default).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Characters of one user input echoed back in a message.
MAX_ECHO = 64
#: Valid names listed in a "did not find" message.
MAX_NAMES = 10
#: UTF-8 bytes of a whole message (the field name is capped at a quarter of it).
MAX_MESSAGE = 1024


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, saying how much was cut (lone surrogates,
    which cannot be sent, become backslash escapes)."""
    data = text.encode("utf-8", "backslashreplace")
    if len(data) <= limit:
        return data.decode("utf-8")
    tail = f"… ({len(data) - limit} more bytes)"
    keep = max(limit - len(tail.encode("utf-8")), 0)
    return data[:keep].decode("utf-8", "ignore") + tail


def echo(value: Any, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` for a message, shortened to ``limit`` characters (``'abc…' (N chars)``)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(value)
    return f"{text[:limit]!r}… ({len(text)} characters)"


def name_list(names: Iterable[str], limit: int = MAX_NAMES, empty: str = "(none)") -> str:
    """The first ``limit`` names, comma-separated, then ``… (N more)``; ``empty`` when none."""
    items = list(names)
    if not items:
        return empty
    shown = ", ".join(n if len(n) <= MAX_ECHO else n[:MAX_ECHO] + "…" for n in items[:limit])
    more = len(items) - limit
    return shown + (f", … ({more} more)" if more > 0 else "")


class PlenaInputError(ValueError):
    """Bad user input: names the offending ``field`` and the ``rule`` it breaks.

    ``str(err)`` is the human message (the rule text, which already names the field where the
    reference wording does). ``bare=True`` marks a rule worded as the reference prints it, which
    the CLI shows without a ``field:`` prefix. Subclasses pick the gRPC status. Both texts are
    capped (:data:`MAX_MESSAGE`).
    """

    def __init__(self, field: str, rule: str, *, bare: bool = False) -> None:
        rule = clip(str(rule))
        super().__init__(rule)
        self.field = clip(str(field), MAX_MESSAGE // 4)
        self.rule = rule
        self.bare = bare


class PlenaTypeError(PlenaInputError, TypeError):
    """A value of the wrong type (e.g. a float where an integer is required)."""


class PlenaStoreError(PlenaInputError):
    """A well-formed request whose study store cannot be used as it is (a damaged journal, a
    file that is not a journal): CLI ``error: …`` exit 2, gRPC FAILED_PRECONDITION. The message
    says what was found and the command that repairs it."""


class PlenaNotFoundError(PlenaInputError, LookupError):
    """An unknown name (model, profile, study); the message lists the valid ones
    (:func:`name_list`)."""


def not_found(field: str, what: str, name: str, known: Iterable[str]) -> PlenaNotFoundError:
    """``unknown <what> '<name>'; known: a, b, … (N more)`` with the input and the list capped."""
    return PlenaNotFoundError(field, f"unknown {what} {echo(name)}; known: {name_list(known)}")


class PlenaRunError(RuntimeError):
    """Work that could not be finished, through no fault of the input (worker processes that
    died before a study was complete): CLI ``error: …`` exit 1, no traceback. The message says
    what is missing and how to resume."""
