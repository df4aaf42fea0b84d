"""Deadline and cancel token for long work (Monte Carlo simulation, the search re-check).

A :class:`StopToken` is a thread-safe flag with the reason it was raised (``"cancelled"``,
``"shutdown"``, ...; the first reason wins) plus an optional deadline on the
:func:`time.monotonic` clock (reason ``"deadline"``) and an optional parent whose stop it
inherits. Loops call :meth:`StopToken.is_set` (about 0.2 µs) or :meth:`StopToken.check`, which
raises :class:`Stopped`; the work then returns what it has finished, marked partial with the
token's :attr:`StopToken.reason`.
"""

from __future__ import annotations

import threading
import time

#: Stop reasons a result may carry besides "completed".
STOP_REASONS = ("deadline", "cancelled", "shutdown")


class Stopped(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :meth:`StopToken.check` inside work that must stop; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"stopped: {reason}")
        self.reason = reason


class StopToken:
    """A cancel flag with a reason, an optional deadline (monotonic seconds) and parent."""

    def __init__(self, deadline: float | None = None, parent: StopToken | None = None) -> None:
        self._event = threading.Event()
        self._reason = ""
        self.deadline = deadline
        self.parent = parent

    @classmethod
    def within(cls, seconds: float | None, parent: StopToken | None = None) -> StopToken:
        """A token whose deadline is ``seconds`` from now (None: no deadline)."""
        return cls(None if seconds is None else time.monotonic() + seconds, parent)

    def set(self, reason: str = "cancelled") -> None:
        """Ask the work to stop (the first reason wins)."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    cancel = set

    def is_set(self) -> bool:
        """True once cancelled, past the deadline or when the parent is set."""
        if self._event.is_set():
            return True
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return True
        return self.parent is not None and self.parent.is_set()

    @property
    def reason(self) -> str:
        """Why the work stops ("" while it may go on): the flag's reason, else the parent's,
        else "deadline"."""
        if self._event.is_set():
            return self._reason
        if self.parent is not None and self.parent.is_set():
            return self.parent.reason
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "deadline"
        return ""

    def check(self) -> None:
        """Raise :class:`Stopped` when the work must stop."""
        if self.is_set():
            raise Stopped(self.reason or "cancelled")

    def remaining(self) -> float | None:
        """Seconds to the deadline (None: none; may be negative)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the flag (not the deadline) is set or ``timeout`` passes."""
        return self._event.wait(timeout)
