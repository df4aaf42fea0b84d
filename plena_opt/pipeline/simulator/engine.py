"""Monte Carlo simulation of a fixed plan: vectorised longest path over samples (spec §6).

Ops are grouped by topological depth; for each level ``start = max_k(end[dep_k] + lag_k)`` over
arrays of shape ``[level ops, samples]`` and ``end = start + duration`` (float32, sample blocks of
:data:`~plena_opt.pipeline.simulator.noise.SAMPLE_BLOCK`). The arg-max dependency of every op and
sample gives the critical path per sample (criticality) without storing full timelines; the
representative samples (nearest the overall median and p99 makespan) are taken from the last
sample block, whose durations are kept, and re-run in float64 for full timelines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.pipeline.scheduler import PipelinePlan
from plena_opt.pipeline.simulator.dependencies import DependencyGraph, build_graph
from plena_opt.pipeline.simulator.noise import SAMPLE_BLOCK, NoiseSampler, NoiseSpec, parse_noise
from plena_opt.pipeline.simulator.statistics import QuantileStats, summarize
from plena_opt.pipeline.simulator.timeline import Timeline, compute_timeline


def base_durations(plan: PipelinePlan, durations: Mapping[str, float]) -> np.ndarray:
    """Per-op base durations from a mapping op type → duration (any consistent time unit).

    Raises :class:`PlenaInputError` naming ``durations.<type>`` when one is missing, negative or
    not finite.
    """
    for key, value in durations.items():
        v = float(value)
        if not np.isfinite(v) or v < 0:
            raise PlenaInputError(f"durations.{key}", f"durations.{key} must be finite and >= 0")
    missing = [t for t in plan.op_types() if t not in durations]
    if missing:
        raise PlenaInputError(
            f"durations.{missing[0]}",
            f"durations.{missing[0]} is required by schedule {plan.schedule_name!r} "
            f"(op types: {', '.join(plan.op_types())})",
        )
    return np.array([float(durations[o.op_type]) for o in plan.ops], dtype=np.float64)


@dataclass(frozen=True)
class MonteCarloResult:
    """Monte Carlo summary. ``criticality_by_op[j]`` = share of samples with op ``j`` on the
    critical path; ``criticality_by_type`` = mean of that share over ops of each type.
    ``probes[name]`` holds per-sample end times of the requested ops."""

    n_samples: int
    seed: int
    noise: NoiseSpec
    makespan: QuantileStats
    makespan_samples: np.ndarray
    criticality_by_op: np.ndarray
    criticality_by_type: dict[str, float]
    rank_idle_mean: tuple[float, ...]
    representative: dict[str, Timeline]
    probe_ends: dict[str, np.ndarray] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "n_samples": self.n_samples,
            "seed": self.seed,
            "noise": self.noise.model_dump(),
            "makespan": self.makespan.to_dict(),
            "criticality_by_type": self.criticality_by_type,
            "rank_idle_mean": list(self.rank_idle_mean),
            "representative": {
                k: {"makespan": t.makespan, "bubble_ratio": t.bubble_ratio}
                for k, t in self.representative.items()
            },
        }


@dataclass(frozen=True)
class SimulationResult:
    """Deterministic timeline (every factor 1) plus the Monte Carlo part when ``samples > 0``."""

    plan: PipelinePlan
    graph: DependencyGraph
    base: np.ndarray
    deterministic: Timeline
    mc: MonteCarloResult | None

    @property
    def makespan(self) -> float:
        return self.deterministic.makespan

    def timelines(self) -> dict[str, Timeline]:
        """Representative timelines: ``deterministic`` and, with Monte Carlo, ``p50``/``p99``."""
        out = {"deterministic": self.deterministic}
        if self.mc:
            out.update(self.mc.representative)
        return out

    def to_dict(self, include_ops: bool = True) -> dict:
        det = self.deterministic.to_dict()
        if not include_ops:
            det.pop("ops")
        return {
            "schedule": self.plan.schedule_name,
            "pp": self.plan.pp_size,
            "vpp": self.plan.vpp_size,
            "microbatches": self.plan.microbatches,
            "n_ops": self.plan.n_ops,
            "makespan": self.makespan,
            "deterministic": det,
            "monte_carlo": self.mc.to_dict() if self.mc else None,
        }


def _run_block(graph: DependencyGraph, end: np.ndarray, want_crit: bool) -> np.ndarray | None:
    """Turn durations ``end[:n_ops]`` into end times in place (``end[n_ops]`` must be zero) and
    return the per-op critical-path counts of the block (``None`` without criticality)."""
    n_ops, n = end.shape[0] - 1, end.shape[1]
    k_max = graph.dep_pad.shape[1]
    bind = np.zeros((n_ops, n), dtype=np.int8 if k_max < 127 else np.int32) if want_crit else None
    has_lag = bool(np.any(graph.lag_pad))
    for lev in graph.levels:
        if not graph.n_deps[lev].any():
            continue
        k_here = int(graph.n_deps[lev].max())
        best = end[graph.dep_pad[lev, 0]]
        if has_lag:
            best += graph.lag_pad[lev, 0][:, None].astype(np.float32)
        arg = np.zeros(best.shape, dtype=bind.dtype) if want_crit else None
        for k in range(1, k_here):
            ek = end[graph.dep_pad[lev, k]]
            if has_lag:
                ek += graph.lag_pad[lev, k][:, None].astype(np.float32)
            if want_crit:
                np.copyto(arg, k, where=ek > best)
            np.maximum(best, ek, out=best)
        end[lev] += best
        if want_crit:
            bind[lev] = arg
    if not want_crit:
        return None
    cols = np.arange(n)
    cur = graph.sinks[end[graph.sinks].argmax(axis=0)]  # the op that ends last is a sink
    counts = np.bincount(cur, minlength=n_ops)
    active = graph.n_deps[cur] > 0
    while active.any():
        nxt = graph.dep_pad[cur, bind[cur, cols]]
        cur = np.where(active, nxt, cur)
        counts += np.bincount(cur[active], minlength=n_ops)
        active &= graph.n_deps[cur] > 0
    return counts


def _representative(
    graph: DependencyGraph, last_durations: np.ndarray, offset: int, makespan: np.ndarray
) -> dict[str, Timeline]:
    """Full timelines of the samples nearest the overall p50 and p99 makespan, chosen among the
    last sample block (whose durations are still in memory, so nothing is re-drawn)."""
    out = {}
    tail = makespan[offset:]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        col = int(np.abs(tail - np.quantile(makespan, q)).argmin())
        dur = last_durations[:, col].astype(np.float64)
        out[name] = compute_timeline(graph, dur, f"{name} (sample {offset + col})")
    return out


def simulate(
    plan: PipelinePlan,
    durations: Mapping[str, float] | Sequence[float] | np.ndarray,
    noise: NoiseSpec | Mapping | str | None = None,
    samples: int = 0,
    seed: int = 0,
    probes: Mapping[str, int] | None = None,
    criticality: bool = True,
    graph: DependencyGraph | None = None,
) -> SimulationResult:
    """Simulate ``plan`` (never modified): the deterministic timeline, plus ``samples`` Monte Carlo
    samples under ``noise`` with ``seed``. ``durations`` maps op type → base duration (or gives
    one value per op). ``probes`` names ops whose per-sample end times are returned."""
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 0:
        raise PlenaInputError("samples", "samples must be an integer >= 0")
    spec = parse_noise(noise)
    graph = graph or build_graph(plan)
    if isinstance(durations, Mapping):
        base = base_durations(plan, durations)
    else:
        base = np.asarray(durations, dtype=np.float64)
        if base.shape != (plan.n_ops,) or not np.all(np.isfinite(base)) or np.any(base < 0):
            raise PlenaInputError("durations", "durations must be one finite value >= 0 per op")
    det = compute_timeline(graph, base, "deterministic")
    mc = None
    if samples:
        mc = _monte_carlo(graph, base, spec, int(samples), int(seed), probes or {}, criticality)
    return SimulationResult(plan, graph, base, det, mc)


def _monte_carlo(
    graph: DependencyGraph,
    base: np.ndarray,
    spec: NoiseSpec,
    samples: int,
    seed: int,
    probes: Mapping[str, int],
    criticality: bool,
) -> MonteCarloResult:
    plan = graph.plan
    sampler = NoiseSampler(plan, spec, seed)
    makespan = np.empty(samples, dtype=np.float64)
    probe_ends = {k: np.empty(samples, dtype=np.float64) for k in probes}
    crit = np.zeros(plan.n_ops, dtype=np.int64)
    busy_total = np.zeros(plan.n_ops, dtype=np.float64)
    end = np.empty((plan.n_ops + 1, min(samples, SAMPLE_BLOCK)), dtype=np.float32)
    for block in range(-(-samples // SAMPLE_BLOCK)):
        lo = block * SAMPLE_BLOCK
        n = min(SAMPLE_BLOCK, samples - lo)
        buf = end[:, :n] if n == end.shape[1] else np.empty((plan.n_ops + 1, n), np.float32)
        sampler.durations(block, n, base, out=buf[: plan.n_ops])
        buf[plan.n_ops] = 0.0
        busy_total += buf[: plan.n_ops].sum(axis=1, dtype=np.float64)
        if lo + n == samples:
            last_durations = buf[: plan.n_ops].copy()
        counts = _run_block(graph, buf, criticality)
        ms = buf[graph.sinks].max(axis=0)
        makespan[lo : lo + n] = ms
        for k, j in probes.items():
            probe_ends[k][lo : lo + n] = buf[j]
        if counts is not None:
            crit += counts
    busy = np.bincount(graph.rank_of, weights=busy_total, minlength=plan.pp_size) / samples
    idle = makespan.mean() - busy
    share = crit / samples
    by_type: dict[str, list[float]] = {}
    for o in plan.ops:
        by_type.setdefault(o.op_type, []).append(float(share[o.id]))
    return MonteCarloResult(
        n_samples=samples,
        seed=seed,
        noise=spec,
        makespan=summarize(makespan),
        makespan_samples=makespan,
        criticality_by_op=share,
        criticality_by_type={k: float(np.mean(v)) for k, v in by_type.items()}
        if criticality
        else {},
        rank_idle_mean=tuple(float(x) for x in idle),
        representative=_representative(graph, last_durations, lo, makespan),
        probe_ends=probe_ends,
    )
