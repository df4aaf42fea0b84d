"""Pricing memo shared by the evaluators of one problem that differ only in the batch size.

A search builds one ``Evaluator`` per global batch size. Most of what a plan costs does not
depend on the batch size as such but on the per-device shard it leads to: every plan whose
``DeviceShard`` (micro-batch, sequences per device, heads, …) is the same prices the same layers
and the same collectives. With many data-parallel ranks, small batch sizes all give one sequence
per device, so a search over 16 batch sizes prices most layers and collectives once instead of
16 times.

The memo keys already name everything the priced pieces depend on within one context (shard,
tp, cp, phase, layer kind, evaluation points, schemes); sharing them across contexts is exact
when every other input is the same object or value. ``PricingMemo.caches`` therefore keys an
entry by the identity of the model, NoC, memory and chip objects (kept alive by the entry) and
by the workload with the batch size blanked out.

Only dense models on PLENA chips share layers and collectives: MoE loads read routing rows
that a context draws for its own batch size, and GPU chips price kernels with their own
workload-dependent tables. Decode grids, stage layouts and collective prices (a function of
the NoC, the rank groups and the byte count) depend on neither and are always shared.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

MAX_ENTRIES = 8  # distinct (inputs, workload-minus-batch) kept; the oldest is dropped beyond


@dataclass
class PricingCaches:
    """The memo dictionaries of one ``EstimateContext`` (possibly shared with others)."""

    layer: dict = field(default_factory=dict)
    comm: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)
    grids: dict = field(default_factory=dict)
    stage_counts: dict = field(default_factory=dict)
    collectives: dict = field(default_factory=dict)  # ``comm.PricedNetwork``'s prices
    refined: dict = field(default_factory=dict)  # decode grids refined at given cuts
    shard_ids: dict = field(default_factory=dict)  # interned (shard, tp, cp) / scheme keys
    layer_grids: dict = field(default_factory=dict)  # decode grids refined per priced layer


@dataclass
class _Entry:
    pinned: tuple[Any, ...]  # the objects whose ids form the key (kept alive, so ids stay unique)
    caches: PricingCaches
    shares_layers: bool


class PricingMemo:
    """Caches shared by contexts of the same inputs that differ only in ``batch_size``."""

    def __init__(self) -> None:
        self._entries: dict[tuple, _Entry] = {}
        self._lock = threading.Lock()

    def caches(
        self, model: Any, noc: Any, memory: Any, chip: Any, workload: Any, shares_layers: bool
    ) -> PricingCaches:
        """The caches for a context of these inputs: layer, collective and extras memos shared
        only when ``shares_layers`` (fresh ones otherwise), grids and stage layouts always."""
        objs = (model, noc, memory, chip)
        key = (*(id(o) for o in objs), replace(workload, batch_size=1))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or any(a is not b for a, b in zip(entry.pinned, objs, strict=True)):
                entry = _Entry(objs, PricingCaches(), shares_layers)
                self._entries[key] = entry
                while len(self._entries) > MAX_ENTRIES:
                    del self._entries[next(iter(self._entries))]
        shared = entry.caches
        if shares_layers and entry.shares_layers:
            return shared
        return PricingCaches(
            grids=shared.grids,
            stage_counts=shared.stage_counts,
            collectives=shared.collectives,
            refined=shared.refined,
        )

    def __getstate__(self) -> dict:
        return {}  # a cache: a copy (pickled, deep-copied) starts empty

    def __setstate__(self, state: dict) -> None:
        self.__init__()

    def clear(self) -> None:
        """Forget every priced piece (the next context starts fresh)."""
        with self._lock:
            self._entries.clear()
