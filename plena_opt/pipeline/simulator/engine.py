"""Monte Carlo simulation of a fixed plan: vectorised longest path over samples (spec §6).

Ops are grouped by topological depth (renumbered so that each level is a contiguous row range,
:mod:`~plena_opt.pipeline.simulator.longest_path`); for each level
``start = max_k(end[dep_k] + lag_k)`` over arrays of shape ``[level ops, samples]`` and
``end = start + duration`` (float32, sample blocks of
:data:`~plena_opt.pipeline.simulator.noise.SAMPLE_BLOCK`). The arg-max dependency slot of every op
and sample, recorded in the same pass, gives the critical path per sample (criticality) without
storing full timelines; the
representative samples (nearest the overall median and p99 makespan) are taken from the last
sample block, whose durations are kept, and re-run in float64 for full timelines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.pipeline.scheduler import OpKind, PipelinePlan, without_comm
from plena_opt.pipeline.simulator.dependencies import DependencyGraph, build_graph
from plena_opt.pipeline.simulator.longest_path import (
    LevelLayout,
    binding_dtype,
    build_layout,
    critical_counts,
    end_times,
)
from plena_opt.pipeline.simulator.noise import SAMPLE_BLOCK, NoiseSampler, NoiseSpec, parse_noise
from plena_opt.pipeline.simulator.request import MAX_DURATION, check_duration, check_seed
from plena_opt.pipeline.simulator.statistics import QuantileStats, summarize
from plena_opt.pipeline.simulator.timeline import Timeline, compute_timeline
from plena_opt.stop import Stopped, StopToken


def base_durations(plan: PipelinePlan, durations: Mapping[str, float]) -> np.ndarray:
    """Per-op base durations from a mapping op type → duration (any consistent time unit).

    Raises :class:`PlenaInputError` naming ``durations.<type>`` when one is missing, negative,
    not finite or above :data:`~plena_opt.pipeline.simulator.request.MAX_DURATION`.
    """
    for key, value in durations.items():
        check_duration(value, f"durations.{key}")
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
    ``probes[name]`` holds per-sample end times of the requested ops. A run stopped early keeps
    its whole sample blocks: ``n_samples`` of them (fewer than asked) and no representative
    timelines."""

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
    """Deterministic timeline (every factor 1) plus the Monte Carlo part when ``samples > 0``.
    ``stop_reason`` is "" for a complete run, else why the Monte Carlo part stopped early
    ("deadline", "cancelled", "shutdown"; ``mc`` then covers fewer samples, or is None)."""

    plan: PipelinePlan
    graph: DependencyGraph
    base: np.ndarray
    deterministic: Timeline
    mc: MonteCarloResult | None
    stop_reason: str = ""

    @property
    def partial(self) -> bool:
        """True when the Monte Carlo part stopped before its requested samples."""
        return bool(self.stop_reason)

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
        det = self.deterministic.to_dict(include_ops)
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


def _representative(
    graph: DependencyGraph,
    last_durations: np.ndarray,
    row_of: np.ndarray,
    offset: int,
    makespan: np.ndarray,
) -> dict[str, Timeline]:
    """Full timelines of the samples nearest the overall p50 and p99 makespan, chosen among the
    last sample block (whose durations, ``[rows, n]`` in layout order, are still in memory, so
    nothing is re-drawn)."""
    out = {}
    tail = makespan[offset:]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        col = int(np.abs(tail - np.quantile(makespan, q)).argmin())
        dur = last_durations[row_of, col].astype(np.float64)
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
    simulate_comm: bool | None = None,
    stop: StopToken | None = None,
) -> SimulationResult:
    """Simulate ``plan`` (never modified): the deterministic timeline, plus ``samples`` Monte Carlo
    samples under ``noise`` with ``seed`` (``0 <= seed < 2**32``). ``durations`` maps op type →
    base duration of one op (an interleaved chunk op's own time, F/v of a stage: see
    :func:`~plena_opt.pipeline.simulator.request.per_op_durations`) or gives one value per op.
    ``probes`` names ops whose per-sample end times are returned. ``stop`` (deadline / cancel
    token) is checked at every level of every sample block: the result then keeps the blocks
    done, with ``stop_reason`` set.

    ``simulate_comm`` (spec §0 rule 4): ``False`` filters the plan's ``COMM`` ops out (the
    result's ``plan`` is then the filtered plan; probes and a per-op ``durations`` array refer to
    the given plan's op ids); ``True`` or ``None`` simulate the plan as it is (the scheduler adds
    sends only when asked: ``build_schedule(..., simulate_comm=True)``)."""
    if simulate_comm is False and any(o.kind is OpKind.COMM for o in plan.ops):
        plan, durations, probes = _filter_comm(plan, durations, probes)
        graph = None
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 0:
        raise PlenaInputError("samples", "samples must be an integer >= 0")
    seed = check_seed(seed)
    spec = parse_noise(noise)
    graph = graph or build_graph(plan)
    if isinstance(durations, Mapping):
        base = base_durations(plan, durations)
    else:
        base = np.asarray(durations, dtype=np.float64)
        ok = np.all(np.isfinite(base)) and np.all((base >= 0) & (base <= MAX_DURATION))
        if base.shape != (plan.n_ops,) or not ok:
            raise PlenaInputError(
                "durations",
                f"durations must be one finite value in [0, {MAX_DURATION:g}] per op",
            )
    det = compute_timeline(graph, base, "deterministic")
    mc, reason = None, ""
    if samples:
        mc, reason = _monte_carlo(
            graph, base, spec, int(samples), int(seed), probes or {}, criticality, stop
        )
    return SimulationResult(plan, graph, base, det, mc, reason)


def _filter_comm(
    plan: PipelinePlan,
    durations: Mapping[str, float] | Sequence[float] | np.ndarray,
    probes: Mapping[str, int] | None,
) -> tuple[PipelinePlan, Mapping[str, float] | np.ndarray, dict[str, int] | None]:
    """The plan without ``COMM`` ops, with per-op durations and probes moved to the new ids
    (:func:`without_comm` numbers the kept ops rank by rank, in rank order)."""
    kept = [j for order in plan.ranks for j in order if plan.ops[j].kind is not OpKind.COMM]
    new_id = {old: new for new, old in enumerate(kept)}
    if not isinstance(durations, Mapping):
        arr = np.asarray(durations, dtype=np.float64)
        if arr.shape != (plan.n_ops,):
            raise PlenaInputError("durations", "durations must give one value per op of the plan")
        durations = arr[kept]
    moved = None
    if probes:
        moved = {}
        for k, j in probes.items():
            if j not in new_id:
                raise PlenaInputError(
                    f"probes.{k}", f"probe {k!r} names a COMM op, left out when simulate_comm=False"
                )
            moved[k] = new_id[j]
    return without_comm(plan), durations, moved


class _BlockBuffers:
    """Float32 durations and end times (plus binding slots) of one sample block, laid out by
    level (:mod:`~plena_opt.pipeline.simulator.longest_path`); allocated once per run and viewed
    C-contiguously for a shorter last block."""

    def __init__(self, layout: LevelLayout, width: int, criticality: bool) -> None:
        self.layout, self.width = layout, width
        rows = layout.n_rows
        self._dur = np.empty(rows * width, dtype=np.float32)
        self._end = np.empty(rows * width, dtype=np.float32)
        self._bind = np.zeros(rows * width, dtype=binding_dtype(layout)) if criticality else None

    def views(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(dur, end, bind)`` for a block of ``n`` samples; ``bind`` is zeroed when ``n``
        changes (levels with one dependency slot never write it)."""
        rows = self.layout.n_rows
        shape = (rows, n)
        bind = None
        if self._bind is not None:
            if n != self.width:
                self._bind[:] = 0
                self.width = n
            bind = self._bind[: rows * n].reshape(shape)
        return (
            self._dur[: rows * n].reshape(shape),
            self._end[: rows * n].reshape(shape),
            bind,
        )


def _monte_carlo(
    graph: DependencyGraph,
    base: np.ndarray,
    spec: NoiseSpec,
    samples: int,
    seed: int,
    probes: Mapping[str, int],
    criticality: bool,
    stop: StopToken | None = None,
) -> tuple[MonteCarloResult | None, str]:
    """Run ``samples`` samples in blocks of :data:`SAMPLE_BLOCK` and reduce each block (spec §6.4):
    makespan, probe end times, per-op busy time and critical-path counts. Returns the result
    (None when stopped before one block finished) and the stop reason ("" when complete)."""
    plan = graph.plan
    layout = build_layout(graph)
    sampler = NoiseSampler(plan, spec, seed)
    makespan = np.empty(samples, dtype=np.float64)
    probe_ends = {k: np.empty(samples, dtype=np.float64) for k in probes}
    crit = np.zeros(plan.n_ops, dtype=np.int64)
    busy_rows = np.zeros(plan.n_ops, dtype=np.float64)
    buffers = _BlockBuffers(layout, min(samples, SAMPLE_BLOCK), criticality)
    done, reason = 0, ""
    try:
        for block in range(-(-samples // SAMPLE_BLOCK)):
            lo = block * SAMPLE_BLOCK
            n = min(SAMPLE_BLOCK, samples - lo)
            dur, end, bind = buffers.views(n)
            sampler.durations(block, n, base, dur[: plan.n_ops], layout.row_of, stop)
            end_times(layout, dur, end, bind, stop)
            # float32 (pairwise) sums within a block, float64 across blocks
            busy_rows += dur[: plan.n_ops].sum(axis=1)
            makespan[lo : lo + n] = end[layout.sink_rows].max(axis=0)
            for k, j in probes.items():
                probe_ends[k][lo : lo + n] = end[layout.row_of[j]]
            if bind is not None:
                crit += critical_counts(layout, end, bind)[layout.row_of]
            done = lo + n
    except Stopped as exc:  # keep the whole blocks done; the buffers hold a torn block
        reason = exc.reason
    if done == 0:
        return None, reason
    if reason:
        samples, makespan = done, makespan[:done]
        probe_ends = {k: v[:done] for k, v in probe_ends.items()}
    busy_total = busy_rows[layout.row_of]
    busy = np.bincount(graph.rank_of, weights=busy_total, minlength=plan.pp_size) / samples
    idle = makespan.mean() - busy
    share = crit / samples
    by_type: dict[str, list[float]] = {}
    for o in plan.ops:
        by_type.setdefault(o.op_type, []).append(float(share[o.id]))
    representative = {} if reason else _representative(graph, dur, layout.row_of, lo, makespan)
    result = MonteCarloResult(
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
        representative=representative,
        probe_ends=probe_ends,
    )
    return result, reason
