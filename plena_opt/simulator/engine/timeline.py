"""Realised timeline of one sample: start, end, wait and binding dependency per op (spec §5, §6).

``ready_at`` = max over data dependencies of (end + lag); ``rank_free_at`` = end of the previous op
on the rank; ``start = max(ready_at, rank_free_at)``; ``wait = start − rank_free_at``; the binding
dependency is the first arg-max over the op's dependencies (data dependencies before
``RANK_ORDER``); the critical path walks binding dependencies back from the op that ends last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plena_opt.simulator.engine.dependencies import Dependency, DependencyGraph, DepReason
from plena_opt.simulator.scheduler import Op, PipelinePlan

#: How :attr:`Timeline.bubble_ratio` is defined (spec §1.3 asks every metric to state it).
BUBBLE_DEFINITION = (
    "bubble_ratio = total idle / total busy over ranks = (p·makespan − Σ busy) / Σ busy "
    "(ideal-relative; GPipe/1F1B: (p−1)/m); bubble_share = idle / (p·makespan)"
)


@dataclass(frozen=True, slots=True)
class OpTiming:
    """One op's realised times (duration unit of the run) and why it started when it did."""

    op: Op
    start: float
    end: float
    ready_at: float
    rank_free_at: float
    binding: Dependency | None
    deps: tuple[Dependency, ...]

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def wait(self) -> float:
        return self.start - self.rank_free_at

    def to_dict(self, plan: PipelinePlan) -> dict:
        def dep(d: Dependency) -> dict:
            return {"src": d.src, "src_name": plan.ops[d.src].trace_name, "reason": d.reason.value}

        o = self.op
        return {
            "id": o.id,
            "name": o.trace_name,
            "label": o.label,
            "rank": o.rank,
            "kind": o.kind.value,
            "component": o.component.value,
            "chunk": o.chunk,
            "microbatch": o.microbatch,
            "step": o.step,
            "op_type": o.op_type,
            "start": self.start,
            "end": self.end,
            "duration": self.duration,
            "ready_at": self.ready_at,
            "rank_free_at": self.rank_free_at,
            "wait": self.wait,
            "binding_dep": dep(self.binding) if self.binding else None,
            "deps": [dep(d) for d in self.deps],
        }


@dataclass(frozen=True)
class Timeline:
    """Full timeline of one sample (``sample``: ``"deterministic"``, ``"p50"``, ``"p99"`` …)."""

    plan: PipelinePlan
    sample: str
    ops: tuple[OpTiming, ...]
    makespan: float
    rank_busy: tuple[float, ...]
    critical_path: tuple[int, ...]

    @property
    def rank_idle(self) -> tuple[float, ...]:
        return tuple(self.makespan - b for b in self.rank_busy)

    @property
    def bubble_ratio(self) -> float:
        busy = sum(self.rank_busy)
        return (len(self.rank_busy) * self.makespan - busy) / busy if busy > 0 else 0.0

    @property
    def bubble_share(self) -> float:
        total = len(self.rank_busy) * self.makespan
        return (total - sum(self.rank_busy)) / total if total > 0 else 0.0

    def to_dict(self, include_ops: bool = True) -> dict:
        """JSON-ready summary; ``include_ops=False`` leaves out the per-op list (the costly part
        of a large plan)."""
        out = {
            "sample": self.sample,
            "makespan": self.makespan,
            "rank_busy": list(self.rank_busy),
            "rank_idle": list(self.rank_idle),
            "bubble_ratio": self.bubble_ratio,
            "bubble_share": self.bubble_share,
            "bubble_definition": BUBBLE_DEFINITION,
            "critical_path": list(self.critical_path),
        }
        if include_ops:
            out["ops"] = [t.to_dict(self.plan) for t in self.ops]
        return out


def compute_timeline(graph: DependencyGraph, durations: np.ndarray, sample: str) -> Timeline:
    """Longest-path pass in topological order for one duration vector (float64)."""
    plan = graph.plan
    n = plan.n_ops
    d = np.asarray(durations, dtype=np.float64)
    # Python floats (IEEE doubles, the same arithmetic as float64) are much faster to index
    # one at a time than numpy scalars
    dl = d.tolist()
    end = [0.0] * n
    start = [0.0] * n
    binding: list[Dependency | None] = [None] * n
    ready = [0.0] * n
    for j in graph.topo.tolist():
        best, bdep, rdy = 0.0, None, 0.0
        for dep in graph.deps[j]:
            t = end[dep.src] + dep.lag
            if bdep is None or t > best:
                best, bdep = t, dep
            if dep.reason is not DepReason.RANK_ORDER and t > rdy:
                rdy = t
        start[j], end[j], binding[j], ready[j] = best, best + dl[j], bdep, rdy
    free = [end[p] if p >= 0 else 0.0 for p in graph.prev_on_rank.tolist()]
    ops = tuple(
        OpTiming(
            op=plan.ops[j],
            start=start[j],
            end=end[j],
            ready_at=ready[j],
            rank_free_at=free[j],
            binding=binding[j],
            deps=graph.deps[j],
        )
        for j in range(n)
    )
    makespan = max(end) if n else 0.0
    busy = np.bincount(graph.rank_of, weights=d, minlength=plan.pp_size)
    path = []
    if n:
        cur: int | None = int(np.argmax(end))
        while cur is not None:
            path.append(cur)
            b = binding[cur]
            cur = b.src if b is not None else None
    return Timeline(plan, sample, ops, makespan, tuple(float(x) for x in busy), tuple(path[::-1]))
