"""The vectorised Monte Carlo pass against a scalar per-sample reference (pipeline-simulator §6.3,
§3 criticality), and the Box–Muller normals behind the lognormal jitter (§2)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from plena_opt.simulator import build_schedule, simulate
from plena_opt.simulator.engine import NoiseSampler, build_graph, parse_noise
from plena_opt.simulator.engine.dependencies import DependencyGraph, DepReason
from plena_opt.simulator.engine.longest_path import build_layout, critical_counts, end_times
from plena_opt.simulator.engine.noise import _ROW_CHUNK, SAMPLE_BLOCK
from plena_opt.simulator.scheduler import SCHEDULE_OP_TYPES


def _reference(graph: DependencyGraph, dur: np.ndarray) -> tuple[float, list[int], np.ndarray]:
    """One sample in float32, op by op in topological order: ``start`` = first arg-max over the
    dependencies (in their order) of ``end + lag``; returns makespan, critical path and ends."""
    end = np.zeros(graph.plan.n_ops, dtype=np.float32)
    binding: dict[int, int] = {}
    for j in graph.topo:
        best, src = np.float32(0.0), None
        for dep in graph.deps[j]:
            t = end[dep.src] + np.float32(dep.lag)
            if src is None or t > best:
                best, src = t, dep.src
        end[j] = best + dur[j]
        if src is not None:
            binding[j] = src
    cur, path = int(graph.sinks[end[graph.sinks].argmax()]), []
    while True:
        path.append(cur)
        if cur not in binding:
            return float(end.max()), path, end
        cur = binding[cur]


def _with_lags(graph: DependencyGraph) -> DependencyGraph:
    """``graph`` with a lag of 0.25 on every stage-to-stage edge (a P2P hop)."""
    hop = {DepReason.FWD_PREV_STAGE, DepReason.BWD_NEXT_STAGE, DepReason.FWD_PREV_CHUNK_WRAP}
    deps = tuple(
        tuple(dataclasses.replace(d, lag=0.25) if d.reason in hop else d for d in ds)
        for ds in graph.deps
    )
    lag_pad = np.zeros_like(graph.lag_pad)
    for j, ds in enumerate(deps):
        lag_pad[j, : len(ds)] = [d.lag for d in ds]
    return dataclasses.replace(graph, deps=deps, lag_pad=lag_pad)


NOISE = "sigma=0.1,rank=0.05,straggler_p=0.05"


@pytest.mark.parametrize(
    ("name", "args", "samples", "noise", "lags"),
    [
        # two blocks, the second shorter: its [rows, 1000] view reuses binding memory of rows
        # that the first block wrote, so stale slots would show
        ("1f1b", (4, 8), SAMPLE_BLOCK + 1000, NOISE, False),
        ("zb-h1", (2, 4), 300, NOISE, False),
        ("interleaved-1f1b", (2, 4, 2), 300, NOISE, True),
        ("bigmac-vpp", (2, 4, 2), 300, NOISE, False),  # up to five dependency slots per op
        ("gpipe", (3, 6), 20, "sigma=0", True),  # exact ties: the first arg-max binds
    ],
)
def test_vectorised_pass_equals_scalar_reference(name, args, samples, noise, lags) -> None:
    """Every sample's makespan and probe end time, and every op's critical-path count, equal a
    scalar float32 walk over the same durations exactly (same operations in the same order)."""
    plan = build_schedule(name, *args)
    graph = build_graph(plan)
    graph = _with_lags(graph) if lags else graph
    dur = {t: 1.0 + 0.5 * i for i, t in enumerate(SCHEDULE_OP_TYPES[name])}
    noise = parse_noise(noise)
    probes = {"first": 0, "last": plan.n_ops - 1}
    res = simulate(plan, dur, noise, samples=samples, seed=4, probes=probes, graph=graph)
    sampler = NoiseSampler(plan, noise, 4)
    on_path = np.zeros(plan.n_ops, dtype=np.int64)
    for block in range(-(-samples // SAMPLE_BLOCK)):
        lo = block * SAMPLE_BLOCK
        n = min(SAMPLE_BLOCK, samples - lo)
        d = sampler.durations(block, n, res.base)
        for col in range(n):
            makespan, path, end = _reference(graph, d[:, col])
            assert res.mc.makespan_samples[lo + col] == makespan
            assert res.mc.probe_ends["first"][lo + col] == end[0]
            assert res.mc.probe_ends["last"][lo + col] == end[-1]
            on_path[path] += 1
    np.testing.assert_array_equal(res.mc.criticality_by_op, on_path / samples)
    # representative timelines are float64 re-runs of a sample of the last block
    for name_q, q in (("p50", 0.5), ("p99", 0.99)):
        rep = res.mc.representative[name_q].makespan
        assert rep == pytest.approx(np.quantile(res.mc.makespan_samples, q), rel=0.02)


def test_busy_and_idle_match_the_sampled_durations() -> None:
    plan = build_schedule("1f1b", 4, 8)
    noise = parse_noise("sigma=0.1,rank=0.05")
    res = simulate(plan, {"F": 1.0, "B": 2.0}, noise, samples=500, seed=9)
    d = NoiseSampler(plan, noise, 9).durations(0, 500, res.base).astype(np.float64)
    busy = np.array([d[[o.id for o in plan.ops if o.rank == r]].sum() / 500 for r in range(4)])
    idle = res.mc.makespan_samples.mean() - busy
    # float32 durations summed pairwise in float32: relative error ~1e-7
    np.testing.assert_allclose(res.mc.rank_idle_mean, idle, rtol=1e-5)


def test_jitter_normals_are_standard_normal_and_pairs_independent() -> None:
    """log ε of the jitter (σ = 0.3) is N(−σ²/2, σ²): KS test, third and fourth moments, and no
    correlation between Box–Muller partners (stream rows ``i`` and ``i + _ROW_CHUNK/2``)."""
    sigma = 0.3
    plan = build_schedule("gpipe", 2, _ROW_CHUNK)  # 256 ops × 2048 samples
    f = NoiseSampler(plan, parse_noise(f"sigma={sigma}"), 1).factors(0, SAMPLE_BLOCK)
    z = (np.log(f.astype(np.float64)) + sigma**2 / 2) / sigma
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3
    # 524,288 values: standard errors of mean, sd, skewness and excess kurtosis ≈ 0.0014,
    # 0.001, 0.0034, 0.0068; tolerances are about five of them
    assert abs(z.mean()) < 0.007 and abs(z.std() - 1) < 0.005
    assert abs(stats.skew(z.ravel())) < 0.017 and abs(stats.kurtosis(z.ravel())) < 0.035
    h = _ROW_CHUNK // 2
    slot = {(o.rank, o.op_type, o.microbatch): o.id for o in plan.ops}
    first = [slot[(r, t, mb)] for r in range(2) for t in "FB" for mb in range(h)]
    second = [slot[(r, t, mb + h)] for r in range(2) for t in "FB" for mb in range(h)]
    corr = np.corrcoef(z[first].ravel(), z[second].ravel())[0, 1]
    assert abs(corr) < 5 / np.sqrt(z[first].size)  # |r| under five standard errors
    # radii come from 53-bit uniforms: |z| beyond 4 σ occurs at its normal rate (6.3e-5)
    assert 0 < np.mean(np.abs(z) > 4) < 2e-4


def test_noise_rows_are_prefix_stable_across_draw_chunks() -> None:
    """Micro-batch rows past the first draw chunk keep their noise when the plan grows."""
    spec = parse_noise("sigma=0.1")
    small, big = build_schedule("gpipe", 2, 70), build_schedule("gpipe", 2, 150)
    fs = NoiseSampler(small, spec, 3).factors(0, 100)
    fb = NoiseSampler(big, spec, 3).factors(0, 100)
    slot = {(o.rank, o.op_type, o.microbatch): o.id for o in big.ops}
    for o in small.ops:
        assert np.array_equal(fs[o.id], fb[slot[(o.rank, o.op_type, o.microbatch)]])


def test_wide_binding_slots_match_the_one_byte_path() -> None:
    """Graphs with more than 127 dependency slots record bindings as int32; both paths agree."""
    plan = build_schedule("bigmac-vpp", 2, 4, 2)
    layout = build_layout(build_graph(plan))
    dur = NoiseSampler(plan, parse_noise("sigma=0.2"), 0).durations(0, 256, np.ones(plan.n_ops))
    d = np.zeros((layout.n_rows, 256), dtype=np.float32)
    d[layout.row_of] = dur
    ends, counts = [], []
    for dtype in (np.int8, np.int32):
        end = np.empty_like(d)
        bind = np.zeros(d.shape, dtype=dtype)
        end_times(layout, d, end, bind)
        ends.append(end)
        counts.append(critical_counts(layout, end, bind))
    np.testing.assert_array_equal(ends[0], ends[1])
    np.testing.assert_array_equal(counts[0], counts[1])
    assert counts[0].sum() > 256  # every sample's path has several ops
