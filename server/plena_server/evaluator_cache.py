"""Evaluators kept warm across requests, bounded by entries and by bytes.

A cached evaluator memoises routed collectives, so its size depends on the request (NoC size,
model depth, the plans asked so far). The cache measures each entry's deep size when it is
stored and again every ``REMEASURE_EVERY`` hits, and evicts least recently used entries until the
total is under ``max_bytes``. An evaluator larger than the budget on its own is used once and not
kept, so one large request cannot pin memory.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

REMEASURE_EVERY = 64  # hits between two measurements of an entry (memo tables grow with use)
_ATOMIC = (str, bytes, int, float, bool, type(None), complex)


def deep_size_bytes(obj: object, limit: int | None = None) -> int:
    """Bytes reachable from ``obj`` (``sys.getsizeof`` per object; numpy buffers by ``nbytes``),
    each object counted once; stops early once ``limit`` is exceeded. Types and modules are not
    followed (they are shared by the whole process)."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type) or type(o).__name__ == "module":
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            total += o.nbytes + 112
            if o.base is not None:
                stack.append(o.base)
            continue
        total += sys.getsizeof(o, 64)
        if limit is not None and total > limit:
            return total
        if not isinstance(o, _ATOMIC):
            stack.extend(gc.get_referents(o))
    return total


@dataclass
class _Entry:
    value: Any
    nbytes: int
    hits: int = 0


class EvaluatorCache:
    """LRU of at most ``max_entries`` values whose measured deep size sums to ≤ ``max_bytes``."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        if max_entries < 0 or max_bytes < 0:
            raise ValueError("cache bounds must be non-negative")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_create(self, key: bytes, create: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``create()`` (stored if it fits the byte budget)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                entry.hits += 1
                if entry.hits % REMEASURE_EVERY == 0:
                    entry.nbytes = deep_size_bytes(entry.value, self.max_bytes)
                    self._evict()
                return entry.value
        value = create()
        nbytes = deep_size_bytes(value, self.max_bytes)
        with self._lock:
            if nbytes <= self.max_bytes and self.max_entries > 0:
                self._entries[key] = _Entry(value, nbytes)
                self._entries.move_to_end(key)
                self._evict()
        return value

    def _evict(self) -> None:
        while self._entries and (
            len(self._entries) > self.max_entries or self.total_bytes() > self.max_bytes
        ):
            self._entries.popitem(last=False)

    def total_bytes(self) -> int:
        """Sum of the entries' last measured sizes (bytes)."""
        return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)
