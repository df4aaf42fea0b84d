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
from plena_opt.pipeline.scheduler import Component, OpKind, PipelinePlan


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


def derive_dependencies(plan: PipelinePlan) -> list[list[Dependency]]:
    """Per destination op: data dependencies (rule order), then the ``RANK_ORDER`` edge unless the
    previous op on the rank is already a data source. Missing partner ops raise
    :class:`PlenaInputError` (an incomplete plan)."""
    p, v = plan.pp_size, plan.vpp_size
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
    has_gen = any(o.component is Component.GEN for o in plan.ops)
    has_ve = any(o.component is Component.VE for o in plan.ops)
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

    def need(key: tuple, dst: int) -> int:
        if key not in idx:
            comp, kind, rank, chunk, mb, step = key
            raise PlenaInputError(
                "plan",
                f"op {plan.ops[dst].trace_name} needs {comp.value} {kind.value} "
                f"(rank {rank}, chunk {chunk}, mb {mb}, step {step}), which the plan lacks",
            )
        return idx[key]

    def unit_llm(kind: OpKind, rank: int, chunk: int, unit: int, dst: int) -> list[int]:
        mbs = range(unit * p, min((unit + 1) * p, plan.microbatches))
        return [need(_key(Component.LLM, kind, rank, chunk, x, -1), dst) for x in mbs]

    out: list[list[Dependency]] = []
    for o in plan.ops:
        d: list[tuple[int, DepReason]] = []
        L, r, c, mb, j = Component.LLM, o.rank, o.chunk, o.microbatch, o.id
        if o.component is Component.LLM and o.kind is OpKind.F:
            if r > 0:
                src = sends.get(("XF", r - 1, c, mb, -1))
                src = need(_key(L, OpKind.F, r - 1, c, mb, -1), j) if src is None else src
                d.append((src, DepReason.FWD_PREV_STAGE))
            elif c > 0:
                src = sends.get(("XF", p - 1, c - 1, mb, -1))
                src = need(_key(L, OpKind.F, p - 1, c - 1, mb, -1), j) if src is None else src
                d.append((src, DepReason.FWD_PREV_CHUNK_WRAP))
            elif has_ve:
                for src in by_mb.get((Component.VE, OpKind.F, mb // p), []):
                    d.append((src, DepReason.VE_UNIT_READY))
        elif o.component is Component.LLM and o.kind in (OpKind.B, OpKind.I):
            k = o.kind
            if r < p - 1:
                src = sends.get(("XB", r + 1, c, mb, -1))
                src = need(_key(L, k, r + 1, c, mb, -1), j) if src is None else src
                d.append((src, DepReason.BWD_NEXT_STAGE))
            elif c < v - 1:
                src = sends.get(("XB", 0, c + 1, mb, -1))
                src = need(_key(L, k, 0, c + 1, mb, -1), j) if src is None else src
                d.append((src, DepReason.BWD_NEXT_CHUNK_WRAP))
            own = need(_key(L, OpKind.F, r, c, mb, -1), j)
            if r == p - 1 and c == v - 1:
                if has_gen:
                    for src in by_mb.get((Component.GEN, OpKind.B, mb // p), []):
                        d.append((src, DepReason.LLM_LAST_BWD_AFTER_GEN_BWD_UNIT))
                else:
                    d.append((own, DepReason.LOSS))
            else:
                d.append((own, DepReason.OWN_FWD_ACTIVATION))
        elif o.component is Component.LLM and o.kind is OpKind.W:
            d.append((need(_key(L, OpKind.I, r, c, mb, -1), j), DepReason.OWN_INPUT_GRAD))
        elif o.component is Component.VE and o.kind is OpKind.B:
            for src in unit_llm(OpKind.B, 0, 0, mb // p, j):
                d.append((src, DepReason.VE_BWD_AFTER_LLM_RANK0_BWD_UNIT))
        elif o.component is Component.GEN and o.kind is OpKind.F:
            for src in unit_llm(OpKind.F, p - 1, v - 1, mb // p, j):
                d.append((src, DepReason.GEN_FWD_AFTER_LLM_OUTPUT_UNIT))
        elif o.component is Component.GEN and o.kind is OpKind.B:
            src = need(_key(Component.GEN, OpKind.F, r, 0, mb, -1), j)
            d.append((src, DepReason.GEN_BWD_AFTER_GEN_FWD))
        elif o.kind is OpKind.P:
            if r > 0:
                d.append(
                    (
                        _sent(sends, OpKind.P, r - 1, c, mb, -1, j, need),
                        DepReason.PREFILL_PREV_STAGE,
                    )
                )
            if c > 0:
                d.append(
                    (need(_key(L, OpKind.P, r, c - 1, mb, -1), j), DepReason.PREFILL_PREV_CHUNK)
                )
        elif o.kind is OpKind.D:
            t = o.step
            if r > 0:
                d.append(
                    (_sent(sends, OpKind.D, r - 1, 0, mb, t, j, need), DepReason.DECODE_PREV_STAGE)
                )
            elif t > 0:
                src = _sent(sends, OpKind.D, p - 1, 0, mb, t - 1, j, need)
                d.append((src, DepReason.DECODE_TOKEN_FEEDBACK))
            elif (p - 1, mb) in last_chunk_of_p:
                src = need(_key(L, OpKind.P, p - 1, last_chunk_of_p[(p - 1, mb)], mb, -1), j)
                d.append((src, DepReason.PREFILL_TO_DECODE))
        elif o.kind is OpKind.COMM:
            d.append((_producer(idx, o, need), DepReason.COMM_P2P))
        out.append([Dependency(s, j, reason) for s, reason in d])
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
