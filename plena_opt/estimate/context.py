"""What is fixed for one evaluation: model × NoC × memory × chip × workload, and its memos.

``EstimateContext`` holds the inputs every plan of one evaluation shares, the decode grids and
stage layouts, and the memo dictionaries (priced layers, collectives, extras) that plans with
equal shards share (``estimate.memo`` shares them across batch sizes too).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from fractions import Fraction

import numpy as np
from deepstack import NocProfile

from plena_opt.chip import ChipProfile, load_chip
from plena_opt.estimate.comm import PricedNetwork
from plena_opt.estimate.decode import DecodeGrid, StairSpec, shared_decode_grid
from plena_opt.estimate.layer import layer_kind_runs, stage_counts
from plena_opt.estimate.memo import PricingCaches, PricingMemo, stage_tables
from plena_opt.estimate.moe_load import power_law_alpha
from plena_opt.estimate.moe_routing import check_routing, routing_rows
from plena_opt.estimate.network import DEFAULT_NETWORK, NetworkBackend, network_factory
from plena_opt.estimate.plan import Workload
from plena_opt.estimate.pricer import LayerPricer, pricer_of
from plena_opt.memory import HbmStoragePrecision, Memory
from plena_opt.models import ModelSpec

_THREAD = threading.local()
# Balanced routing rows are a function of (experts, top-k, tokens) alone: one frozen array per
# draw, shared by every context (a network keeps a read-only array's EP-dispatch key by
# identity, so equal draws are neither copied nor hashed again), up to ``MAX_SHARED_ROWS``
# tokens (the routed dispatch's range: 8,192 tokens; at most 1 MiB at top-8) and
# ``MAX_BALANCED`` draws.
_BALANCED: dict[tuple[int, int, int], np.ndarray] = {}
MAX_SHARED_ROWS = 16384
MAX_BALANCED = 64


def shared_network(noc: NocProfile, backend: str = DEFAULT_NETWORK) -> NetworkBackend:
    """The network model of a profile (``backend``: a registered name, ``estimate.network``),
    shared by the evaluators of one thread.

    Routing patterns depend only on the profile, so every evaluator of a search (one per batch
    size) reuses them. ``Network`` is not thread-safe, hence one cache per thread.
    """
    cache = getattr(_THREAD, "networks", None)
    if cache is None:
        cache = _THREAD.networks = {}
    key = json.dumps(noc.describe(), sort_keys=True, default=str)
    if backend != DEFAULT_NETWORK:
        key = f"{backend}:{key}"
    net = cache.get(key)
    if net is None:
        net = cache[key] = network_factory(backend)(noc)
    return net


def _freeze(rows: np.ndarray) -> None:
    """Make ``rows`` and every array its memory comes from read-only."""
    a = rows
    while isinstance(a, np.ndarray):
        a.setflags(write=False)
        a = a.base


class EstimateContext:
    """Inputs shared by every plan of one evaluation: model × NoC × memory × chip × workload."""

    def __init__(
        self,
        model: ModelSpec,
        noc: NocProfile,
        memory: Memory,
        workload: Workload,
        chip: ChipProfile | None = None,
        precision: HbmStoragePrecision | None = None,
        memo: PricingMemo | None = None,
        network: str = DEFAULT_NETWORK,
    ) -> None:
        """``network``: the registered network back-end that prices collectives (a back-end
        other than the default keeps its own memo: ``memo`` is then not shared)."""
        self.model = model
        self.noc = noc
        self.memory = memory
        self.chip = chip if chip is not None else load_chip()
        # the chip kind's pricer, by the profile's ``kind`` (an unknown one is refused); its
        # formats first: a GPU defaults to the checkpoint's format and its own storage bytes
        kind_cls = pricer_of(self.chip)
        workload = kind_cls.checkpoint_workload(self.chip, model, workload)
        self.workload = workload
        if precision is None:
            precision = kind_cls.storage_precision(self.chip, workload)
        if precision is None:
            precision = HbmStoragePrecision.default()
        self.precision = precision
        # The chip kind's layer pricer: PLENA by ISA cycles, a GPU kernel by kernel, …
        self.pricer: LayerPricer = kind_cls(self.chip, precision, workload, memory, model)
        self.perf = self.pricer.perf_model  # the PLENA ISA model ``LayerShape`` reads, or None
        self.net = shared_network(noc, network)
        self.num_devices = noc.num_devices  # a product over the levels: read once per plan base
        self.compute_hz = workload.frequency_hz * memory.compute_frequency_scale
        self.kind_runs = layer_kind_runs(model)
        self.distinct_kinds = list(dict.fromkeys(k for k, _ in self.kind_runs))
        self.kind_totals: Counter = Counter()
        for kind, n in self.kind_runs:
            self.kind_totals[kind] += n
        self.track_energy = memory.energy_pj(0.0, 0.0) is not None
        # the routing rows drawn so far, in a box that ``with_lengths`` contexts share where a
        # longer draw starts with a shorter one (balanced rows: row t depends on t alone)
        self._row_box: list[np.ndarray | None] = [None]
        self._power_law_rows: dict[int, np.ndarray] = {}
        check_routing(workload.routing)
        if model.num_experts and workload.routing not in ("balanced", "random"):
            self.rows(1)  # read and validate a trace now, not inside the first MoE plan
        self._memory_warnings = list(memory.warnings())
        # memory, model and chip-kind warnings every plan ends with (``PlanCost._warnings``)
        self.input_warnings: list[str] | None = None
        # Memoised per-layer pricing and collectives, shared by the plans of one evaluation
        # (and, through ``memo``, by the evaluations that differ only in the batch size).
        if memo is None or network != DEFAULT_NETWORK:
            caches = PricingCaches()
        else:
            shares = kind_cls.shares_layers_across_batches and not model.num_experts
            caches = memo.caches(model, noc, memory, chip, workload, shares)
        self.layer_cache: dict = caches.layer
        self.comm_cache: dict = caches.comm
        self.comm_totals: dict = {}  # Σ seconds of each ``comm_cache`` entry, by its key
        self.extras_cache: dict = caches.extras
        self._grids: dict[tuple, DecodeGrid] = caches.grids
        self.priced_net = PricedNetwork(self.net, caches.collectives)  # memoised prices
        self.plan_bases: dict[tuple, object] = {}  # ``plan_base.PlanBase``
        # what a ``PlanBase`` holds that no batch size or output length changes (its schemes,
        # that the plan passed the §4.2 refusals), by plan: shared with ``with_lengths``
        self.plan_invariants: dict[tuple, tuple] = {}
        self.refined: dict[tuple, DecodeGrid] = caches.refined  # grids refined at equal cuts
        self.shard_ids: dict[tuple, int] = caches.shard_ids
        self.layer_grids: dict[tuple, DecodeGrid] = caches.layer_grids  # per layer's switches
        # the layer-refined base grid of each priced shard (``PlanPasses.decode``), by shard id
        self.shard_grids: dict[int, DecodeGrid] = {}
        # stage layouts and kinds per stage: a per-process table of the model's layer structure
        self.row_groups, self._stage_counts = stage_tables(self.kind_runs, model.num_layers)
        self.prefill_kv: np.ndarray | None = None  # the prefill's one KV length (``PlanPasses``)

    def with_lengths(
        self, batch_size: int, output_seq_len: int, memo: PricingMemo
    ) -> EstimateContext:
        """This context (built with ``memo`` and the default network) at another batch size and
        output length: what a new ``EstimateContext(..., memo=memo)`` of that workload holds,
        without pricing again what depends on neither (the checkpoint format, storage
        precision, the chip kind's pricer — which read the formats and options only —, the
        network, the layer kinds, the routing check, the plans' schemes and refusal checks:
        ``plan_invariants``). The per-workload parts are fresh: the workload, the memo's caches
        for it, the plan bases and the routing rows."""
        w = self.workload.with_lengths(batch_size, output_seq_len)
        new = object.__new__(EstimateContext)
        new.__dict__.update(self.__dict__)
        shares = type(self.pricer).shares_layers_across_batches and not self.model.num_experts
        caches = memo.caches(self.model, self.noc, self.memory, self.chip, w, shares)
        new.__dict__.update(
            workload=w,
            _row_box=self._row_box if w.routing == "balanced" else [None],
            _power_law_rows={},
            input_warnings=None,
            layer_cache=caches.layer,
            comm_cache=caches.comm,
            extras_cache=caches.extras,
            _grids=caches.grids,
            priced_net=PricedNetwork(self.net, caches.collectives),
            plan_bases={},
            refined=caches.refined,
            shard_ids=caches.shard_ids,
            layer_grids=caches.layer_grids,
            shard_grids={},
            prefill_kv=None,
        )
        return new

    def decode_grid(self, cp: int, read_per_token: float) -> DecodeGrid:
        """The decode's evaluation points for context parallelism ``cp`` and a KV read of
        ``read_per_token`` bytes per attended token and layer (cached)."""
        fast = ("read", cp, read_per_token)  # its own key space: a ratio may equal a read
        grid = self._grids.get(fast)
        if grid is not None:
            return grid
        quantum = self.memory.transfer_quantum_bytes
        ratio = None if quantum is None else Fraction(read_per_token) / quantum
        key = (cp, ratio)
        grid = self._grids.get(key)
        if grid is None:
            m, w = self.model, self.workload
            kinds = self.distinct_kinds
            spec = StairSpec(
                self.pricer.decode_tile,
                ratio,
                m.attention_chunk_size if any(k.chunked for k in kinds) else None,
                m.sliding_window if any(k.sliding for k in kinds) else None,
                # a GPU prices every step; DSA: min(kv, top-k) + kv
                every_step=self.pricer.every_decode_step or m.is_sparse,
            )
            grid = shared_decode_grid(w.input_seq_len, w.output_seq_len, cp, spec)
            self._grids[key] = grid
        self._grids[fast] = grid
        return grid

    def stage_kind_counts(self, pp: int) -> list[Counter]:
        """Per pipeline stage, how many layers of each kind it holds (§4.6 stage layout)."""
        counts = self._stage_counts.get(pp)
        if counts is None:
            counts = stage_counts(self.kind_runs, self.model.num_layers, pp)
            self._stage_counts[pp] = counts
        return counts

    def rows(self, tokens: int) -> np.ndarray:
        """At least ``tokens`` routing rows (cached; regenerated only to grow).

        ``power_law`` rows realise one step of exactly ``tokens`` tokens, and a longer draw's
        first rows are not a shorter draw, so they are cached per token count: a plan's price
        never depends on which plans were priced before it."""
        if self.workload.routing == "power_law":
            rows = self._power_law_rows.get(tokens)
            if rows is None:
                m = self.model
                rows = routing_rows("power_law", m.num_experts, m.top_k, tokens, power_law_alpha(m))
                _freeze(rows)  # the network keys frozen rows by identity
                self._power_law_rows[tokens] = rows
            return rows
        box = self._row_box
        if box[0] is None or box[0].shape[0] < tokens:
            m = self.model
            routing = self.workload.routing
            key = (m.num_experts, m.top_k, tokens)
            rows = _BALANCED.get(key) if routing == "balanced" else None
            if rows is None:
                rows = routing_rows(routing, m.num_experts, m.top_k, tokens, power_law_alpha(m))
                _freeze(rows)  # DeepStack's EP dispatch keys frozen rows by identity
                if routing == "balanced" and tokens <= MAX_SHARED_ROWS:
                    if len(_BALANCED) >= MAX_BALANCED:
                        _BALANCED.clear()
                    _BALANCED[key] = rows
            box[0] = rows
        return box[0]

    def lm_head_phases(self) -> tuple[bool, bool]:
        """(prefill, decode): whether the LM head is priced in each phase (§4.4)."""
        inc = self.workload.include_lm_head
        return (inc or self.model.family == "moe", inc)
