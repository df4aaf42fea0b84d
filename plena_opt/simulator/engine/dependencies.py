"""Dependencies of a plan with their reasons, topological order and cycle reports.

Edge rules: pipeline-simulator §0.1 (invariants 1–9), §1.1 (training), §1.4 (inference), §5 (BigMac
units). The plan is only read, never reordered (design rule 3).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.scheduler import Component, Op, OpKind, PipelinePlan


class DepReason(StrEnum):
    """Why an op waits for another (spec §5; each has a unit test)."""

    RANK_ORDER = "RANK_ORDER"
    FWD_PREV_STAGE = "FWD_PREV_STAGE"
    FWD_PREV_CHUNK_WRAP = "FWD_PREV_CHUNK_WRAP"
    BWD_NEXT_STAGE = "BWD_NEXT_STAGE"
    BWD_NEXT_CHUNK_WRAP = "BWD_NEXT_CHUNK_WRAP"
    OWN_FWD_ACTIVATION = "OWN_FWD_ACTIVATION"
    OWN_INPUT_GRAD = "OWN_INPUT_GRAD"
    LOSS = "LOSS"
    VE_UNIT_READY = "VE_UNIT_READY"
    VE_BWD_AFTER_LLM_RANK0_BWD_UNIT = "VE_BWD_AFTER_LLM_RANK0_BWD_UNIT"
    GEN_FWD_AFTER_LLM_OUTPUT_UNIT = "GEN_FWD_AFTER_LLM_OUTPUT_UNIT"
    GEN_BWD_AFTER_GEN_FWD = "GEN_BWD_AFTER_GEN_FWD"
    LLM_LAST_BWD_AFTER_GEN_BWD_UNIT = "LLM_LAST_BWD_AFTER_GEN_BWD_UNIT"
    PREFILL_PREV_STAGE = "PREFILL_PREV_STAGE"
    PREFILL_PREV_CHUNK = "PREFILL_PREV_CHUNK"
    PREFILL_TO_DECODE = "PREFILL_TO_DECODE"
    DECODE_PREV_STAGE = "DECODE_PREV_STAGE"
    DECODE_TOKEN_FEEDBACK = "DECODE_TOKEN_FEEDBACK"
    COMM_P2P = "COMM_P2P"


@dataclass(frozen=True, slots=True)
class Dependency:
    """``dst`` may start only after ``src`` ends (+ ``lag``, same time unit as durations)."""

    src: int
    dst: int
    reason: DepReason
    lag: float = 0.0


class PlanCycleError(PlenaInputError):
    """The plan cannot run (deadlock); ``cycle`` lists the dependencies along the cycle."""

    def __init__(self, cycle: list[Dependency], text: str) -> None:
        super().__init__("plan", f"plan has a dependency cycle (deadlock): {text}")
        self.cycle = cycle


def _key(comp: Component, kind: OpKind, rank: int, chunk: int, mb: int, step: int) -> tuple:
    return (comp, kind, rank, chunk, mb, step)


@dataclass(frozen=True)
class _Lookup:
    """The plan's ops indexed for the dependency rules (one per plan; read-only)."""

    plan: PipelinePlan
    idx: dict[tuple, int]  # compute op key (``_key``) → op id
    sends: dict[tuple, int]  # hop (code, rank, chunk, mb, step) → op id
    by_mb: dict[tuple, list[int]]  # VE/GEN ops by (component, kind, unit of p micro-batches)
    last_chunk_of_p: dict[tuple[int, int], int]  # (rank, mb) → its last prefill chunk
    has_gen: bool
    has_ve: bool

    @classmethod
    def of(cls, plan: PipelinePlan) -> _Lookup:
        p = plan.pp_size
        idx = {
            _key(o.component, o.kind, o.rank, o.chunk, o.microbatch, o.step): o.id
            for o in plan.ops
            if o.kind is not OpKind.COMM
        }
        # hops keyed by their code (XP, XD, XF, XB): a rank may send twice per (chunk, mb)
        sends = {
            (o.code, o.rank, o.chunk, o.microbatch, o.step): o.id
            for o in plan.ops
            if o.kind is OpKind.COMM
        }
        by_mb: dict[tuple, list[int]] = {}
        for o in plan.ops:
            if o.component is not Component.LLM:
                by_mb.setdefault((o.component, o.kind, o.microbatch // p), []).append(o.id)
        last_chunk_of_p: dict[tuple[int, int], int] = {}
        for o in plan.ops:
            if o.kind is OpKind.P:
                last_chunk_of_p[(o.rank, o.microbatch)] = max(
                    o.chunk, last_chunk_of_p.get((o.rank, o.microbatch), 0)
                )
        has_gen = any(o.component is Component.GEN for o in plan.ops)
        has_ve = any(o.component is Component.VE for o in plan.ops)
        return cls(plan, idx, sends, by_mb, last_chunk_of_p, has_gen, has_ve)

    def need(self, key: tuple, dst: int) -> int:
        """The op of ``key`` that op ``dst`` waits for (missing: ``PlenaInputError``)."""
        if key not in self.idx:
            comp, kind, rank, chunk, mb, step = key
            raise PlenaInputError(
                "plan",
                f"op {self.plan.ops[dst].trace_name} needs {comp.value} {kind.value} "
                f"(rank {rank}, chunk {chunk}, mb {mb}, step {step}), which the plan lacks",
            )
        return self.idx[key]

    def hop_or(self, code: str, key: tuple, dst: int) -> int:
        """The hop ``code`` that sends the op of ``key`` if the plan has one, else that op."""
        _, _, rank, chunk, mb, step = key
        src = self.sends.get((code, rank, chunk, mb, step))
        return self.need(key, dst) if src is None else src

    def unit_llm(self, kind: OpKind, rank: int, chunk: int, unit: int, dst: int) -> list[int]:
        """The LLM ops of ``kind`` on ``rank``/``chunk`` for the micro-batches of ``unit``."""
        p = self.plan.pp_size
        mbs = range(unit * p, min((unit + 1) * p, self.plan.microbatches))
        return [self.need(_key(Component.LLM, kind, rank, chunk, x, -1), dst) for x in mbs]


_Deps = list[tuple[int, DepReason]]


def _llm_forward(lk: _Lookup, o: Op) -> _Deps:
    """LLM forward: the previous stage (or the last stage's previous chunk), else the VE unit."""
    p, L, r, c, mb, j = lk.plan.pp_size, Component.LLM, o.rank, o.chunk, o.microbatch, o.id
    if r > 0:
        return [(lk.hop_or("XF", _key(L, OpKind.F, r - 1, c, mb, -1), j), DepReason.FWD_PREV_STAGE)]
    if c > 0:
        src = lk.hop_or("XF", _key(L, OpKind.F, p - 1, c - 1, mb, -1), j)
        return [(src, DepReason.FWD_PREV_CHUNK_WRAP)]
    if lk.has_ve:
        return [
            (src, DepReason.VE_UNIT_READY)
            for src in lk.by_mb.get((Component.VE, OpKind.F, mb // p), [])
        ]
    return []


def _llm_backward(lk: _Lookup, o: Op) -> _Deps:
    """LLM backward (``B``/``I``): the next stage (or the first stage's next chunk), then the own
    forward activation, or on the last stage and chunk the loss / the GEN backward unit."""
    p, v = lk.plan.pp_size, lk.plan.vpp_size
    L, k, r, c, mb, j = Component.LLM, o.kind, o.rank, o.chunk, o.microbatch, o.id
    d: _Deps = []
    if r < p - 1:
        d.append((lk.hop_or("XB", _key(L, k, r + 1, c, mb, -1), j), DepReason.BWD_NEXT_STAGE))
    elif c < v - 1:
        d.append((lk.hop_or("XB", _key(L, k, 0, c + 1, mb, -1), j), DepReason.BWD_NEXT_CHUNK_WRAP))
    own = lk.need(_key(L, OpKind.F, r, c, mb, -1), j)
    if r == p - 1 and c == v - 1:
        if lk.has_gen:
            for src in lk.by_mb.get((Component.GEN, OpKind.B, mb // p), []):
                d.append((src, DepReason.LLM_LAST_BWD_AFTER_GEN_BWD_UNIT))
        else:
            d.append((own, DepReason.LOSS))
    else:
        d.append((own, DepReason.OWN_FWD_ACTIVATION))
    return d


def _inference(lk: _Lookup, o: Op) -> _Deps:
    """Prefill (``P``): previous stage, previous chunk; decode (``D``): previous stage, else the
    token fed back from the last stage, else the last stage's last prefill chunk."""
    p, L, r, c, mb, j = lk.plan.pp_size, Component.LLM, o.rank, o.chunk, o.microbatch, o.id
    need = lk.need
    d: _Deps = []
    if o.kind is OpKind.P:
        if r > 0:
            d.append(
                (_sent(lk.sends, OpKind.P, r - 1, c, mb, -1, j, need), DepReason.PREFILL_PREV_STAGE)
            )
        if c > 0:
            d.append((need(_key(L, OpKind.P, r, c - 1, mb, -1), j), DepReason.PREFILL_PREV_CHUNK))
        return d
    t = o.step
    if r > 0:
        d.append((_sent(lk.sends, OpKind.D, r - 1, 0, mb, t, j, need), DepReason.DECODE_PREV_STAGE))
    elif t > 0:
        src = _sent(lk.sends, OpKind.D, p - 1, 0, mb, t - 1, j, need)
        d.append((src, DepReason.DECODE_TOKEN_FEEDBACK))
    elif (p - 1, mb) in lk.last_chunk_of_p:
        src = need(_key(L, OpKind.P, p - 1, lk.last_chunk_of_p[(p - 1, mb)], mb, -1), j)
        d.append((src, DepReason.PREFILL_TO_DECODE))
    return d


def _data_deps(lk: _Lookup, o: Op) -> _Deps:
    """The data dependencies of op ``o`` in rule order (spec §0.1, §1.1, §1.4, §5)."""
    p, v, r, mb, j = lk.plan.pp_size, lk.plan.vpp_size, o.rank, o.microbatch, o.id
    comp, kind = o.component, o.kind
    if comp is Component.LLM and kind is OpKind.F:
        return _llm_forward(lk, o)
    if comp is Component.LLM and kind in (OpKind.B, OpKind.I):
        return _llm_backward(lk, o)
    if comp is Component.LLM and kind is OpKind.W:
        src = lk.need(_key(Component.LLM, OpKind.I, r, o.chunk, mb, -1), j)
        return [(src, DepReason.OWN_INPUT_GRAD)]
    if comp is Component.VE and kind is OpKind.B:
        srcs = lk.unit_llm(OpKind.B, 0, 0, mb // p, j)
        return [(src, DepReason.VE_BWD_AFTER_LLM_RANK0_BWD_UNIT) for src in srcs]
    if comp is Component.GEN and kind is OpKind.F:
        srcs = lk.unit_llm(OpKind.F, p - 1, v - 1, mb // p, j)
        return [(src, DepReason.GEN_FWD_AFTER_LLM_OUTPUT_UNIT) for src in srcs]
    if comp is Component.GEN and kind is OpKind.B:
        src = lk.need(_key(Component.GEN, OpKind.F, r, 0, mb, -1), j)
        return [(src, DepReason.GEN_BWD_AFTER_GEN_FWD)]
    if kind in (OpKind.P, OpKind.D):
        return _inference(lk, o)
    if kind is OpKind.COMM:
        return [(_producer(lk.idx, o, lk.need), DepReason.COMM_P2P)]
    return []


def derive_dependencies(plan: PipelinePlan) -> list[list[Dependency]]:
    """Per destination op: data dependencies (rule order), then the ``RANK_ORDER`` edge unless the
    previous op on the rank is already a data source. Missing partner ops raise
    :class:`PlenaInputError` (an incomplete plan)."""
    lk = _Lookup.of(plan)
    out = [[Dependency(s, o.id, reason) for s, reason in _data_deps(lk, o)] for o in plan.ops]
    for order in plan.ranks:
        for prev, cur in zip(order, order[1:], strict=False):
            if all(dep.src != prev for dep in out[cur]):
                out[cur].append(Dependency(prev, cur, DepReason.RANK_ORDER))
    return out


_SEND_CODE = {OpKind.P: "XP", OpKind.D: "XD"}


def _sent(
    sends: dict, kind: OpKind, rank: int, chunk: int, mb: int, step: int, dst: int, need
) -> int:
    """The op whose end releases the next stage: the hop (COMM) if the plan has one, else the op."""
    comm = sends.get((_SEND_CODE[kind], rank, chunk, mb, step))
    if comm is not None:
        return comm
    return need(_key(Component.LLM, kind, rank, chunk, mb, step), dst)


def _producer(idx: dict, o, need) -> int:
    """The op a hop sends the output of: same rank, chunk, micro-batch and step; ``XF`` sends a
    forward, ``XB`` a backward (``B``, or ``I`` in zero-bubble plans), ``XP``/``XD`` a prefill /
    decode step (by step: prefill hops have none)."""
    L, r, c, mb, t = Component.LLM, o.rank, o.chunk, o.microbatch, o.step
    if o.code == "XF":
        return need(_key(L, OpKind.F, r, c, mb, -1), o.id)
    if o.code == "XB":
        key_b = _key(L, OpKind.B, r, c, mb, -1)
        return idx[key_b] if key_b in idx else need(_key(L, OpKind.I, r, c, mb, -1), o.id)
    producer = OpKind.D if t >= 0 else OpKind.P
    return need(_key(L, producer, r, c, mb, t), o.id)


@dataclass(frozen=True)
class DependencyGraph:
    """Dependencies in array form for the vectorised pass (pad index = ``n_ops``, a zero row)."""

    plan: PipelinePlan
    deps: tuple[tuple[Dependency, ...], ...]
    topo: np.ndarray
    levels: tuple[np.ndarray, ...]
    dep_pad: np.ndarray
    lag_pad: np.ndarray
    n_deps: np.ndarray
    rank_of: np.ndarray
    prev_on_rank: np.ndarray
    sinks: np.ndarray


def _describe_cycle(plan: PipelinePlan, deps: list[list[Dependency]], left: set[int]) -> None:
    # walk backwards along dependencies that stay inside the unsorted set until a node repeats
    node, seen, path = min(left), {}, []
    while node not in seen:
        seen[node] = len(path)
        dep = next(d for d in deps[node] if d.src in left)
        path.append(dep)
        node = dep.src
    cycle = path[seen[node] :]
    text = "; ".join(
        f"{plan.ops[d.dst].trace_name} waits for {plan.ops[d.src].trace_name} ({d.reason.value})"
        for d in cycle
    )
    raise PlanCycleError(cycle, text)


def build_graph(plan: PipelinePlan) -> DependencyGraph:
    """Derive dependencies, run Kahn's topological sort (cycle → :class:`PlanCycleError`) and
    group ops by depth (longest dependency chain) for the level-synchronous vectorised pass."""
    n = plan.n_ops
    deps = derive_dependencies(plan)
    indeg = np.array([len(d) for d in deps], dtype=np.int64)
    children: list[list[int]] = [[] for _ in range(n)]
    for d_list in deps:
        for d in d_list:
            children[d.src].append(d.dst)
    depth = np.zeros(n, dtype=np.int64)
    queue = deque(int(i) for i in np.flatnonzero(indeg == 0))
    topo: list[int] = []
    while queue:
        j = queue.popleft()
        topo.append(j)
        for ch in children[j]:
            depth[ch] = max(depth[ch], depth[j] + 1)
            indeg[ch] -= 1
            if indeg[ch] == 0:
                queue.append(ch)
    if len(topo) < n:
        _describe_cycle(plan, deps, set(range(n)) - set(topo))
    k = max((len(d) for d in deps), default=0) or 1
    dep_pad = np.full((n, k), n, dtype=np.int64)
    lag_pad = np.zeros((n, k), dtype=np.float64)
    for j, d_list in enumerate(deps):
        for i, d in enumerate(d_list):
            dep_pad[j, i] = d.src
            lag_pad[j, i] = d.lag
    order = np.argsort(depth, kind="stable")
    bounds = np.flatnonzero(np.diff(depth[order])) + 1
    levels = tuple(np.split(order, bounds)) if n else ()
    prev = np.full(n, -1, dtype=np.int64)
    for ranks in plan.ranks:
        for a, b in zip(ranks, ranks[1:], strict=False):
            prev[b] = a
    return DependencyGraph(
        plan=plan,
        deps=tuple(tuple(d) for d in deps),
        topo=np.asarray(topo, dtype=np.int64),
        levels=levels,
        dep_pad=dep_pad,
        lag_pad=lag_pad,
        n_deps=np.array([len(d) for d in deps], dtype=np.int64),
        rank_of=np.array([o.rank for o in plan.ops], dtype=np.int64),
        prev_on_rank=prev,
        sinks=np.array([j for j in range(n) if not children[j]], dtype=np.int64),
    )
