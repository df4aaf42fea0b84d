"""Monte Carlo simulation of a fixed plan: vectorised longest path over samples (spec §6).

Ops are grouped by topological depth (renumbered so that each level is a contiguous row range,
:mod:`~plena_opt.simulator.engine.longest_path`); for each level
``start = max_k(end[dep_k] + lag_k)`` over arrays of shape ``[level ops, samples]`` and
``end = start + duration`` (float32, sample blocks of
:data:`~plena_opt.simulator.engine.noise.SAMPLE_BLOCK` in bounded column slices,
:mod:`~plena_opt.simulator.engine.monte_carlo`). The arg-max dependency slot of every op
and sample, recorded in the same pass, gives the critical path per sample (criticality) without
storing full timelines; the representative samples (nearest the overall median and p99
makespan) are taken from the last sample slice, whose durations are kept, and re-run in float64
for full timelines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.engine.dependencies import DependencyGraph, build_graph
from plena_opt.simulator.engine.monte_carlo import MonteCarloResult, monte_carlo
from plena_opt.simulator.engine.noise import NoiseSpec, parse_noise
from plena_opt.simulator.engine.request import MAX_DURATION, check_duration, check_seed
from plena_opt.simulator.engine.timeline import Timeline, compute_timeline
from plena_opt.simulator.scheduler import OpKind, PipelinePlan, without_comm
from plena_opt.stop import StopToken

__all__ = ["MonteCarloResult", "SimulationResult", "base_durations", "simulate"]


def base_durations(plan: PipelinePlan, durations: Mapping[str, float]) -> np.ndarray:
    """Per-op base durations from a mapping op type → duration (any consistent time unit).

    Raises :class:`PlenaInputError` naming ``durations.<type>`` when one is missing, negative,
    not finite or above :data:`~plena_opt.simulator.engine.request.MAX_DURATION`.
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
    representative: bool = True,
) -> SimulationResult:
    """Simulate ``plan`` (never modified): the deterministic timeline, plus ``samples`` Monte Carlo
    samples under ``noise`` with ``seed`` (``0 <= seed < 2**32``). ``durations`` maps op type →
    base duration of one op (an interleaved chunk op's own time, F/v of a stage: see
    :func:`~plena_opt.simulator.engine.request.per_op_durations`) or gives one value per op.
    ``probes`` names ops whose per-sample end times are returned. ``stop`` (deadline / cancel
    token) is checked at every level of every sample block: the result then keeps the blocks
    done, with ``stop_reason`` set. ``representative=False`` skips the p50/p99 timelines of the
    Monte Carlo part (two float64 re-runs of the plan). Memory is bounded by
    :data:`~plena_opt.simulator.engine.monte_carlo.MAX_CELLS` buffer cells whatever
    ``samples`` is (:mod:`~plena_opt.simulator.engine.monte_carlo`).

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
        mc, reason = monte_carlo(
            graph,
            base,
            spec,
            int(samples),
            int(seed),
            probes or {},
            criticality,
            stop,
            representative,
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
