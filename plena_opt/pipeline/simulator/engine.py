"""Monte Carlo simulation of a fixed plan: vectorised longest path over samples (spec §6).

Ops are grouped by topological depth; for each level ``start = max_k(end[dep_k] + lag_k)`` over
arrays of shape ``[level ops, samples]`` and ``end = start + duration`` (float32, sample blocks of
:data:`~plena_opt.pipeline.simulator.noise.SAMPLE_BLOCK`). The arg-max dependency of every op and
sample gives the critical path per sample (criticality) without storing full timelines; the
representative samples (median and p99 makespan) are re-drawn afterwards for full timelines.
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


def _run_block(
    graph: DependencyGraph, dur: np.ndarray, want_crit: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Ends ``[n_ops + 1, n]`` (last row zero) and criticality counts for one duration block."""
    n_ops, n = dur.shape
    end = np.empty((n_ops + 1, n), dtype=np.float32)
    end[:n_ops] = dur
    end[n_ops] = 0.0
    k = graph.dep_pad.shape[1]
    bind = np.zeros((n_ops, n), dtype=np.int8 if k < 127 else np.int32) if want_crit else None
    has_lag = bool(np.any(graph.lag_pad))
    for lev in graph.levels:
        if graph.n_deps[lev[0]] == 0 and not np.any(graph.n_deps[lev]):
            continue
        e = end[graph.dep_pad[lev]]
        if has_lag:
            e += graph.lag_pad[lev][:, :, None].astype(np.float32)
        if want_crit:
            arg = e.argmax(axis=1)
            bind[lev] = arg
            end[lev] += np.take_along_axis(e, arg[:, None, :], axis=1)[:, 0, :]
        else:
            end[lev] += e.max(axis=1)
    counts = None
    if want_crit:
        cols = np.arange(n)
        cur = end[:n_ops].argmax(axis=0)
        counts = np.bincount(cur, minlength=n_ops)
        active = graph.n_deps[cur] > 0
        while active.any():
            nxt = graph.dep_pad[cur, bind[cur, cols]]
            cur = np.where(active, nxt, cur)
            counts += np.bincount(cur[active], minlength=n_ops)
            active &= graph.n_deps[cur] > 0
    return end, counts


def _representative(
    graph: DependencyGraph, base: np.ndarray, sampler: NoiseSampler, makespan: np.ndarray
) -> dict[str, Timeline]:
    out = {}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        target = np.quantile(makespan, q)
        idx = int(np.abs(makespan - target).argmin())
        block, col = divmod(idx, SAMPLE_BLOCK)
        n = min(SAMPLE_BLOCK, makespan.size - block * SAMPLE_BLOCK)
        fac = sampler.factors(block, n)[:, col].astype(np.float64)
        tl = compute_timeline(graph, base * fac, f"{name} (sample {idx})")
        out[name] = tl
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
    base32 = base.astype(np.float32)[:, None]
    makespan = np.empty(samples, dtype=np.float64)
    probe_ends = {k: np.empty(samples, dtype=np.float64) for k in probes}
    crit = np.zeros(plan.n_ops, dtype=np.int64)
    idle = np.zeros(plan.pp_size)
    onehot = np.zeros((plan.pp_size, plan.n_ops), dtype=np.float32)
    onehot[graph.rank_of, np.arange(plan.n_ops)] = 1.0
    for block in range(-(-samples // SAMPLE_BLOCK)):
        lo = block * SAMPLE_BLOCK
        n = min(SAMPLE_BLOCK, samples - lo)
        dur = sampler.factors(block, n) if not spec.is_zero else np.ones((plan.n_ops, n), "f4")
        dur *= base32
        busy = onehot @ dur
        end, counts = _run_block(graph, dur, criticality)
        ms = end[: plan.n_ops].max(axis=0)
        makespan[lo : lo + n] = ms
        idle += (ms[None, :] - busy).sum(axis=1)
        for k, j in probes.items():
            probe_ends[k][lo : lo + n] = end[j]
        if counts is not None:
            crit += counts
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
        rank_idle_mean=tuple(float(x) for x in idle / samples),
        representative=_representative(graph, base, sampler, makespan),
        probe_ends=probe_ends,
    )
