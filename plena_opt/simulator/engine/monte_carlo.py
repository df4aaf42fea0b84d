"""The Monte Carlo pass of :func:`~plena_opt.simulator.engine.run.simulate` (spec §6.2–6.4).

Samples run in blocks of :data:`~plena_opt.simulator.engine.noise.SAMPLE_BLOCK` (the random
streams' unit), and a block in column slices of at most ``MAX_CELLS // rows`` samples, so that
the float32 duration and end-time buffers (plus the binding slots) never hold more than
:data:`MAX_CELLS` cells however many ops the plan has: memory is ``O(ops · slice)``, not
``O(ops · samples)``. Each slice draws its samples' noise from the whole-block streams
(:meth:`NoiseSampler.durations` with ``first``), so every sample's durations, and therefore its
makespan, probe ends and critical path, are the same whatever the slicing; a plan small enough
for one slice per block (``rows · 2048 ≤ MAX_CELLS``, e.g. 8,192 ops) runs exactly as before.
Per slice only reductions are kept: makespan and probe ends per sample (``O(samples)``),
per-op busy time and critical-path counts (``O(ops)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from plena_opt.simulator.engine.dependencies import DependencyGraph
from plena_opt.simulator.engine.longest_path import (
    LevelLayout,
    binding_dtype,
    build_layout,
    critical_counts,
    end_times,
)
from plena_opt.simulator.engine.noise import SAMPLE_BLOCK, NoiseSampler, NoiseSpec
from plena_opt.simulator.engine.statistics import QuantileStats, summarize
from plena_opt.simulator.engine.timeline import Timeline, compute_timeline
from plena_opt.stop import Stopped, StopToken

#: Most buffer cells (rows × samples of one slice) held at once: 2^25 cells are 128 MiB of
#: float32 durations, 128 MiB of end times and 32 MiB of one-byte binding slots.
MAX_CELLS = 1 << 25


@dataclass(frozen=True)
class MonteCarloResult:
    """Monte Carlo summary. ``criticality_by_op[j]`` = share of samples with op ``j`` on the
    critical path; ``criticality_by_type`` = mean of that share over ops of each type.
    ``probes[name]`` holds per-sample end times of the requested ops. A run stopped early keeps
    its whole sample slices: ``n_samples`` of them (fewer than asked) and no representative
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


def slice_width(rows: int, max_cells: int | None = None) -> int:
    """Samples per column slice for ``rows`` buffer rows (1 … :data:`SAMPLE_BLOCK`; default
    budget :data:`MAX_CELLS`)."""
    return max(1, min(SAMPLE_BLOCK, (max_cells or MAX_CELLS) // max(rows, 1)))


def _representative(
    graph: DependencyGraph,
    sampler: NoiseSampler,
    base: np.ndarray,
    last: tuple[np.ndarray, np.ndarray, int, int],
    makespan: np.ndarray,
) -> dict[str, Timeline]:
    """Full timelines of the samples nearest the overall p50 and p99 makespan, chosen among the
    last sample block. ``last = (durations, row_of, lo, n)``: the last slice's durations
    (``[rows, n]`` in layout order) hold samples ``[lo, lo + n)``; a chosen sample outside them
    (an earlier slice of the block) has its column re-drawn from the block's streams, the same
    values (:meth:`NoiseSampler.durations` with ``first``)."""
    dur, row_of, lo, n = last
    b0 = (makespan.size - 1) // SAMPLE_BLOCK * SAMPLE_BLOCK
    out = {}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        i = b0 + int(np.abs(makespan[b0:] - np.quantile(makespan, q)).argmin())
        if lo <= i < lo + n:
            col = dur[row_of, i - lo].astype(np.float64)
        else:
            one = sampler.durations(b0 // SAMPLE_BLOCK, 1, base, first=i - b0)
            col = one[:, 0].astype(np.float64)
        out[name] = compute_timeline(graph, col, f"{name} (sample {i})")
    return out


class _BlockBuffers:
    """Float32 durations and end times (plus binding slots) of one sample slice, laid out by
    level (:mod:`~plena_opt.simulator.engine.longest_path`); allocated once per run and viewed
    C-contiguously for a narrower slice."""

    def __init__(self, layout: LevelLayout, width: int, criticality: bool) -> None:
        self.layout, self.width = layout, width
        rows = layout.n_rows
        self._dur = np.empty(rows * width, dtype=np.float32)
        self._end = np.empty(rows * width, dtype=np.float32)
        self._bind = np.zeros(rows * width, dtype=binding_dtype(layout)) if criticality else None

    def views(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(dur, end, bind)`` for a slice of ``n`` samples; ``bind`` is zeroed when ``n``
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


def _slices(samples: int, width: int):
    """``(block, first, lo, n)``: samples ``[lo, lo + n)`` are columns ``[first, first + n)`` of
    sample block ``block``."""
    for block in range(-(-samples // SAMPLE_BLOCK)):
        b0 = block * SAMPLE_BLOCK
        size = min(SAMPLE_BLOCK, samples - b0)
        for first in range(0, size, width):
            yield block, first, b0 + first, min(width, size - first)


def monte_carlo(
    graph: DependencyGraph,
    base: np.ndarray,
    spec: NoiseSpec,
    samples: int,
    seed: int,
    probes: Mapping[str, int],
    criticality: bool,
    stop: StopToken | None = None,
    representative: bool = True,
    max_cells: int | None = None,
) -> tuple[MonteCarloResult | None, str]:
    """Run ``samples`` samples slice by slice and reduce each slice (spec §6.4): makespan, probe
    end times, per-op busy time and critical-path counts. Returns the result (None when stopped
    before one slice finished) and the stop reason ("" when complete). ``representative=False``
    skips the p50/p99 timelines (two float64 re-runs of the plan); ``max_cells`` (default
    :data:`MAX_CELLS`) bounds the slice buffers."""
    plan = graph.plan
    layout = build_layout(graph)
    sampler = NoiseSampler(plan, spec, seed)
    makespan = np.empty(samples, dtype=np.float64)
    probe_ends = {k: np.empty(samples, dtype=np.float64) for k in probes}
    crit = np.zeros(plan.n_ops, dtype=np.int64)
    busy_rows = np.zeros(plan.n_ops, dtype=np.float64)
    width = min(samples, slice_width(layout.n_rows, max_cells or MAX_CELLS))
    buffers = _BlockBuffers(layout, width, criticality)
    done, reason, lo, n = 0, "", 0, 0
    try:
        for block, first, lo, n in _slices(samples, width):
            dur, end, bind = buffers.views(n)
            sampler.durations(block, n, base, dur[: plan.n_ops], layout.row_of, stop, first)
            end_times(layout, dur, end, bind, stop)
            # float32 (pairwise) sums within a slice, float64 across slices
            busy_rows += dur[: plan.n_ops].sum(axis=1)
            makespan[lo : lo + n] = end[layout.sink_rows].max(axis=0)
            for k, j in probes.items():
                probe_ends[k][lo : lo + n] = end[layout.row_of[j]]
            if bind is not None:
                crit += critical_counts(layout, end, bind)[layout.row_of]
            done = lo + n
    except Stopped as exc:  # keep the whole slices done; the buffers hold a torn slice
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
    reps = {}
    if representative and not reason:
        reps = _representative(graph, sampler, base, (dur, layout.row_of, lo, n), makespan)
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
        representative=reps,
        probe_ends=probe_ends,
    )
    return result, reason
