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
workload-dependent tables. Decode grids and collective prices (a function of the NoC, the
rank groups and the byte count) depend on neither and are always shared; stage layouts are a
table per process (``stage_tables``).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from plena_opt.estimate.comm import CollectivePrices, Cost
from plena_opt.estimate.plan import Workload

if TYPE_CHECKING:
    from plena_opt.estimate.decode import DecodeGrid, RunGrid
    from plena_opt.estimate.layer import LayerKind
    from plena_opt.estimate.passes import StageGroups
    from plena_opt.estimate.pricing import StageArrays

MAX_ENTRIES = 8  # distinct (inputs, workload-minus-batch) kept; the oldest is dropped beyond
# A workload's field values but the batch size, in field order: with its class, the memo's key
# for "the workload with the batch size blanked out" — equal exactly when the dataclass's ``==``
# says the two workloads at batch 1 are equal, hashed and compared in C (r16trim; the
# dataclass's generated ``__hash__`` / ``__eq__`` are Python, ~2 µs a look-up)
_BATCHLESS = attrgetter(*(f.name for f in fields(Workload) if f.name != "batch_size"))


@dataclass
class PricingCaches:
    """The memos of one ``EstimateContext`` (possibly shared with others), each keyed by what
    its entries depend on (small interned ids for shards and schemes: ``PlanBase.shard_id``)."""

    # ((shard id, phase), layer kind, points key) -> one priced layer
    layer: dict[tuple, StageArrays] = field(default_factory=dict)
    # ((comm id, phase), layer kind) -> one layer's collectives by reference name
    comm: dict[tuple, dict[str, Cost]] = field(default_factory=dict)
    # ((shard id, phase), pp, points key) -> (extras by stage, stage-boundary transfer), and
    # ((shard id, phase), "priced", points key) -> the (embedding, LM head) pair
    extras: dict[tuple, tuple] = field(default_factory=dict)
    # (cp, read / quantum) or ("read", cp, read bytes) -> the base decode grid
    grids: dict[tuple, DecodeGrid | RunGrid] = field(default_factory=dict)
    collectives: CollectivePrices = field(default_factory=CollectivePrices)
    # (grid key, cuts, last) -> the decode grid refined at those cuts
    refined: dict[tuple, DecodeGrid | RunGrid] = field(default_factory=dict)
    shard_ids: dict[tuple, int] = field(default_factory=dict)  # interned (shard, tp, cp) / schemes
    # (shard id, grid token) -> the grid refined until every layer keeps its roofline side
    layer_grids: dict[tuple[int, int], DecodeGrid | RunGrid] = field(default_factory=dict)


@dataclass
class StageLayouts:
    """Per-context memo of what follows from a stage layout alone (kinds per stage), shared by
    every plan of that pipeline depth."""

    # (stages, kinds) -> layers of each kind over the whole pipeline
    per_kind: dict[tuple[int, tuple[LayerKind, ...]], list[int]] = field(default_factory=dict)
    # (stages, kinds, stages with extras) -> stages grouped by equal layout (``StageGroups``)
    groups: dict[tuple, StageGroups] = field(default_factory=dict)
    # pp -> the first stage of each distinct footprint
    footprint_stages: dict[int, list[int]] = field(default_factory=dict)
    # pp -> (each stage's range of layer indices, each stage's layer count)
    ranges: dict[int, tuple[list[range], list[int]]] = field(default_factory=dict)


STAGE_TABLES = 32  # distinct layer structures whose stage tables a process keeps
_STAGE_TABLES: dict[tuple, tuple[StageLayouts, dict[int, list[Counter]]]] = {}


def stage_tables(
    kind_runs: list[tuple[LayerKind, int]], num_layers: int
) -> tuple[StageLayouts, dict[int, list[Counter]]]:
    """(``StageLayouts``, pp → layer kinds by stage) of a model's layer structure: a table per
    process, since both follow from the runs of layer kinds and the layer count alone (the
    pipeline depth and the stages with extras are in their keys). Read-only to their users;
    threads that race both build the same table and one is kept. At most ``STAGE_TABLES``
    structures (the table starts afresh beyond)."""
    key = (tuple(kind_runs), num_layers)
    hit = _STAGE_TABLES.get(key)
    if hit is None:
        if len(_STAGE_TABLES) >= STAGE_TABLES:
            _STAGE_TABLES.clear()
        hit = _STAGE_TABLES.setdefault(key, (StageLayouts(), {}))
    return hit


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
        self, model: Any, noc: Any, memory: Any, chip: Any, workload: Workload, shares_layers: bool
    ) -> PricingCaches:
        """The caches for a context of these inputs: layer, collective and extras memos shared
        only when ``shares_layers`` (fresh ones otherwise), grids and collective prices always."""
        objs = (model, noc, memory, chip)
        # ``replace(workload, batch_size=1)`` as its class and field values (``_BATCHLESS``)
        key = (id(model), id(noc), id(memory), id(chip), type(workload), _BATCHLESS(workload))
        made = False
        with self._lock:
            entry = self._entries.get(key)
            pinned = None if entry is None else entry.pinned
            if (pinned is None or pinned[0] is not model or pinned[1] is not noc
                    or pinned[2] is not memory or pinned[3] is not chip):  # fmt: skip
                entry, made = _Entry(objs, PricingCaches(), shares_layers), True
                self._entries[key] = entry
                while len(self._entries) > MAX_ENTRIES:
                    del self._entries[next(iter(self._entries))]
        shared = entry.caches
        if entry.shares_layers:
            if shares_layers:
                return shared
        elif made:  # an entry nobody shares layers of: its own memos are this context's alone
            return shared
        return PricingCaches(
            grids=shared.grids,
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
