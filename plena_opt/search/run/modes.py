"""How a search spends its budget: resolve ``auto`` (from counts), score every plan (exhaustive),
or run a sampler (``plena_opt.search.run.sampled``); and score the rest of the space for the exact
front."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from plena_opt.search.record import Record
from plena_opt.search.request import budget_left
from plena_opt.search.space.space import Point

if TYPE_CHECKING:
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.run.session import _Search

# A sampled front is rated against the exact one only for spaces up to this many plans.
EXACT_COMPARE_LIMIT = 20_000

EXHAUSTIVE_CHUNK = 128
# Study user attribute holding the exact front a sampled search was rated against (``exact_front``).
EXACT_FRONT_ATTR = "exact_front"
# Scored plans are written once this many are waiting or this much time passed (s): one journal
# append and fsync per write; a crash redoes at most that much scoring on resume. (When the
# writes happen, not what is scored or found.)
WRITE_POINTS, WRITE_SECONDS = 1024, 0.5

# ``auto`` decides from counts and these two CPU-time constants, never from a clock (issue 26):
# the same request picks the same sampler, and finds the same front, on any machine at any load.
#
# PLAN_CPU_SECONDS: the evaluator's CPU time per plan, fresh evaluator, every legal plan of the
# default workload (NoC routes already built: both modes pay routing alike). Measured by
# ``python benchmarks/bench_growth.py --plan-cost`` on 2026-12-06, the 2-core development VM at
# load 2.3 (other sessions running): llama-3.1-70b and qwen3-235b-a22b on the bench_scale switch
# hierarchy of 32, 512 and 8,192 devices (112–1,344 plans), rows 0.124–0.225 ms, median of the
# six rows 0.216 ms (benchmarks/README.md, "Growth of the default search").
PLAN_CPU_SECONDS = 0.00022
# GPU_PLAN_CPU_SECONDS: the same figure for a GPU chip profile (``kind: gpu``: per-kernel tables
# per workload, no layer sharing across batch sizes), what ``auto`` uses when the evaluator's
# ``chip_kind`` is ``gpu``. Measured by ``python benchmarks/bench_plan_cost.py`` on 2026-12-06,
# same VM, load 2.1, 3 rounds side by side with PLENA rows: llama-3.1-70b and qwen3-235b-a22b
# on h200x32 (h200-sxm) and llama-3.1-70b on hgx-h100x8 / hgx-h200x8, rows 0.48–0.83 ms, median
# 0.54 ms, against 0.35 ms for the PLENA rows of the same run (illustrative_gpu_cluster_32):
# 1.5× PLENA side by side, 2.5× ``PLAN_CPU_SECONDS`` (benchmarks/README.md, "Per-plan cost by
# chip kind"). An earlier estimate of ~2.1 ms (10×) was not reproduced.
GPU_PLAN_CPU_SECONDS = 0.00054
# The chip kinds the cost model knows (``Evaluator.chip_kind``); an evaluator without one
# (test fakes) is priced as ``plena``.
CHIP_KINDS = ("plena", "gpu")
# ROUTE_CPU_SECONDS_PER_DEVICE: what a plan costs beyond that on a cold process at large device
# counts, per device (NoC routing of its collective groups, paid once per pattern; a search
# scores each plan once, so it pays it per plan). Fitted on the default-search rows of
# ``python benchmarks/bench_growth.py`` (2026-12-06, load 1.9–2.1, exhaustive everywhere, re-check
# CPU subtracted), CPU per plan over devices at 8,192, 32,768 and 65,536 devices:
# llama-3.1-70b 0.24, 0.13, 0.13 µs, qwen3-235b-a22b 0.39, 0.34, 0.35 µs per device; 0.25 µs taken
# between the two models (median 0.29). Negligible below ~1,000 devices (≤ 0.25 ms a plan).
ROUTE_CPU_SECONDS_PER_DEVICE = 0.25e-6
# TPE_CPU_SECONDS_PER_TRIAL: the sampler's own CPU time per budgeted trial beyond scoring its plan
# (ask, tell, the proposals it repeats or makes illegal, refinement bookkeeping), multivariate
# TPE with constant liar as ``samplers.make_sampler`` builds it, 200-trial budget. Measured by
# ``python benchmarks/bench_growth.py --tpe-overhead`` on 2026-12-06, same VM, load 2.3:
# llama-3.1-70b, 1,024 devices, 4 batch sizes (1,968 plans), seeds 0–2: 3.2, 5.6, 4.0 ms,
# median 4.0 ms (before issue 26 repeats were told as trials: 8.4 ms wall at load 1).
TPE_CPU_SECONDS_PER_TRIAL = 0.0040


def plan_cpu_seconds(devices: int, kind: str = "plena") -> float:
    """Modelled CPU seconds to score one plan on ``devices`` devices of chip ``kind`` (one of
    ``CHIP_KINDS``; constants above)."""
    if kind not in CHIP_KINDS:
        raise ValueError(f"chip kind {kind!r} has no per-plan cost; known: {', '.join(CHIP_KINDS)}")
    base = GPU_PLAN_CPU_SECONDS if kind == "gpu" else PLAN_CPU_SECONDS
    return base + ROUTE_CPU_SECONDS_PER_DEVICE * devices


def sampler_cost_model(
    req: SearchRequest, unscored: int, space: int, devices: int, kind: str = "plena"
) -> tuple[float, float]:
    """(exhaustive, sampler) CPU seconds ``auto`` compares for a space of ``space`` legal plans on
    ``devices`` devices of chip ``kind`` of which ``unscored`` are not scored yet: scoring every one
    of them, against the sampler's budget left (``budget_left``: ``trials`` less the plans the study
    holds, each scored plus ``TPE_CPU_SECONDS_PER_TRIAL``) plus, when the result would then score
    the rest of the space to rate the sampled front (``compare_exact``, by default when that costs
    at most ``auto_budget_s``), scoring that rest too."""
    per_plan = plan_cpu_seconds(devices, kind)
    budget = budget_left(req, unscored, space)
    exhaustive = unscored * per_plan
    sampler = budget * (per_plan + TPE_CPU_SECONDS_PER_TRIAL)
    if compares_exact(req, unscored - budget, space, devices, kind):
        sampler += (unscored - budget) * per_plan
    return exhaustive, sampler


def compares_exact(
    req: SearchRequest, rest: int, space: int, devices: int, kind: str = "plena"
) -> bool:
    """Whether a sampled search scores the ``rest`` of the space to rate its front: as asked
    (``compare_exact``), else when the space has at most ``EXACT_COMPARE_LIMIT`` plans and
    pricing the rest costs at most ``auto_budget_s`` by ``plan_cpu_seconds`` (counts only)."""
    if req.compare_exact is not None:
        return req.compare_exact
    per_plan = plan_cpu_seconds(devices, kind)
    return space <= EXACT_COMPARE_LIMIT and rest * per_plan <= req.auto_budget_s


def choose_sampler(s: _Search, todo: list[Point]) -> str:
    """Resolve ``auto`` from counts (``sampler_cost_model``): exhaustive when the unscored plans
    fit the budget left (``budget_left``) or scoring all of them costs no more than the sampler
    would, else TPE (which scores nothing when the study already holds ``trials`` plans)."""
    name = s.req.sampler
    if name != "auto":
        return name
    left = budget_left(s.req, len(todo), len(s.space))
    if len(todo) <= left:
        return "exhaustive"
    if left == 0:  # the study holds ``trials`` plans: nothing to score, whatever the costs
        return "tpe"
    exhaustive_s, sampler_s = sampler_cost_model(
        s.req, len(todo), len(s.space), s.space.num_devices, s.chip_kind
    )
    return "exhaustive" if exhaustive_s <= sampler_s else "tpe"


def run_exhaustive(s: _Search, todo: list[Point]) -> None:
    """Score every plan of ``todo`` in chunks, storing batches as they fill; stops between
    chunks when ``s.check_stop()`` says so."""
    total, done = len(todo), 0
    pending: list[Record] = []
    last = time.perf_counter()
    try:
        _exhaustive_loop(s, todo, pending, done, total, last)
    finally:
        s.add_records(pending)  # scored plans are stored even when stopped


def _exhaustive_loop(
    s: _Search, todo: list[Point], pending: list[Record], done: int, total: int, last: float
) -> None:
    for batch, prec in s.groups():
        group = [p for p in todo if p.batch_size == batch and p.precision == prec]
        for i in range(0, len(group), EXHAUSTIVE_CHUNK):
            s.stop_reason = s.check_stop()
            if s.stop_reason:
                return
            chunk = [p for p in group[i : i + EXHAUSTIVE_CHUNK] if p.key not in s.cache]
            pending.extend(s.score(chunk))
            done += len(chunk)
            if len(pending) >= WRITE_POINTS or time.perf_counter() - last > WRITE_SECONDS:
                s.add_records(pending)
                pending.clear()
                last = time.perf_counter()
            s.report("exhaustive", done, total)


def run_sampled(s: _Search, sampler_name: str) -> None:
    """Run the sampler ``sampler_name`` over the search (``plena_opt.search.run.sampled``)."""
    from plena_opt.search.run.sampled import SampledRun

    SampledRun(s, sampler_name).run()


def exact_records(s: _Search) -> list[Record]:
    """Every legal point scored (cache first); not stored in the study."""
    out = [s.cache[p.key] for p in s.space.points if p.key in s.cache]
    for batch, prec in s.groups():
        todo = [
            p
            for p in s.space.points
            if p.batch_size == batch and p.precision == prec and p.key not in s.cache
        ]
        for i in range(0, len(todo), EXHAUSTIVE_CHUNK):
            out.extend(s.score(todo[i : i + EXHAUSTIVE_CHUNK]))
    return out


def exact_front(s: _Search) -> tuple[list[str], np.ndarray]:
    """The exact front's plan keys and minimised objective values (one row a plan): read from
    the study's ``EXACT_FRONT_ATTR`` when an earlier run of the same search (same fingerprint:
    same space, objectives and SLAs) rated a front, else scored (``exact_records``, not stored as
    trials) and kept there, so a resumed search never scores the rest of the space again."""
    stored = s.study.user_attrs.get(EXACT_FRONT_ATTR)
    if stored is not None:
        return list(stored["keys"]), np.array(stored["minimised"], dtype=float)
    front = s.front_records(exact_records(s))
    keys = [r.point.key for r in front]
    pts = np.array([r.minimised(s.objectives) for r in front], dtype=float)
    if keys:
        s.study.set_user_attr(EXACT_FRONT_ATTR, {"keys": keys, "minimised": pts.tolist()})
    return keys, pts
