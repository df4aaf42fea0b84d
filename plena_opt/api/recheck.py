"""Use case: Monte Carlo re-check of the best plans of a search (the search → re-check stage).

The top ``k`` plans of the front (by TPS) are re-estimated in full and simulated under the same
noise and seed (common random numbers, so rank changes come from the plans, not the draws);
each gets p50/p99 TTFT and TPS beside its analytic figures and, optionally, Perfetto traces.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plena_opt.estimate.plan import Plan
from plena_opt.estimate.problem import EvaluatorInputs
from plena_opt.search.result import SearchResult
from plena_opt.search.space.space import Point
from plena_opt.simulator.engine import RecheckResult, recheck_plans
from plena_opt.stop import StopToken

DEFAULT_RECHECK = 5
DEFAULT_SAMPLES = 1000
# Sizing the default re-check (``top_k=None``, issue 26): front plans are re-checked in order,
# up to ``DEFAULT_RECHECK``, while the modelled re-check CPU stays within ``RECHECK_SHARE`` of
# the modelled search CPU (the first plan always); counts only, never a clock. A re-checked
# plan costs ``RECHECK_CPU_SECONDS_PER_PLAN`` + ``…_PER_BUILT_OP`` × the ops of the windows it
# builds + samples × (``…_PER_SAMPLE`` + ``…_PER_OP_SAMPLE`` × the ops a sample simulates)
# (``simulator.engine.serving.recheck_ops``). Measured by ``python benchmarks/bench_growth.py
# --recheck-cost`` on 2026-12-06, the 2-core VM at load 1.8–1.9 (other sessions running), the
# top 5 front plans of the default search of llama-3.1-70b and qwen3-235b-a22b on 32, 1,024 and
# 8,192 switch devices (25 plans, 78–12,544 built ops): fixed 1.2 ms (estimate + runs of the
# 78-op plans), per built op 16.6–25.8 µs over the 5 plans of ≥ 1,000 ops (median 18.8 µs; the
# largest, 25.8 µs, is taken: the first windows built in a process cost the most and a search
# command re-checks in a fresh one, so the model errs towards re-checking fewer plans),
# 1.7 µs per sample (78-op plans) and 4.4 ns per op and sample (the same 5 plans, 0–7.3 ns).
RECHECK_SHARE = 0.3
RECHECK_CPU_SECONDS_PER_PLAN = 1.2e-3
RECHECK_CPU_SECONDS_PER_BUILT_OP = 25.8e-6
RECHECK_CPU_SECONDS_PER_SAMPLE = 1.7e-6
RECHECK_CPU_SECONDS_PER_OP_SAMPLE = 4.4e-9
# SEARCH_CPU_SECONDS_FIXED: what a search command costs beyond scoring its plans (study, journal,
# summaries, front), so that a tiny search's re-check is not cut to nothing: the default-search
# rows of ``benchmarks/bench_growth.py`` at 32–256 devices (same VM, load 2.0–2.3), command CPU
# less re-check less plans × ``modes.plan_cpu_seconds``: 0.13, 0.21, 0.22 s; 0.15 s taken.
SEARCH_CPU_SECONDS_FIXED = 0.15
# Lognormal op jitter σ 5 %, persistent per-rank speed σ 3 %, 0.1 % stragglers at 1.2–2× slower.
DEFAULT_NOISE = "sigma=0.05,rank=0.03,straggler_p=0.001"


def recheck_front(
    result: SearchResult,
    inputs: EvaluatorInputs,
    *,
    top_k: int | None = DEFAULT_RECHECK,
    samples: int = DEFAULT_SAMPLES,
    noise: Any = DEFAULT_NOISE,
    seed: int = 0,
    trace_dir: str | Path | None = None,
    should_stop: Callable[[], bool] | None = None,
    stop: StopToken | None = None,
    windows: str = "auto",
) -> list[RecheckResult]:
    """Re-check the first ``top_k`` front plans (``RecheckResult`` list, front order); with
    ``top_k=None`` as many of the first ``DEFAULT_RECHECK`` as fit ``RECHECK_SHARE`` of the
    search's modelled CPU (``sized_top_k``).
    ``windows`` (``auto``/``full``/``short``, see ``simulate_serving``): by default a long serving
    window is simulated as the closed-form steady state plus a short sampled window.

    ``stop`` (deadline / cancel token) is checked between estimates, between plans and inside
    the Monte Carlo: fewer plans come back, the last possibly ``partial``; ``should_stop`` is an
    older, coarser hook (checked between estimates only)."""
    estimates = []
    for entry in result.front[: DEFAULT_RECHECK if top_k is None else max(top_k, 0)]:
        if (should_stop is not None and should_stop()) or (stop is not None and stop.is_set()):
            break
        plan = Plan.from_dict(entry.plan)
        ev = inputs.evaluator(entry.plan.get("batch_size"), entry.plan.get("precision"))
        estimates.append(ev.estimate(plan))
    if top_k is None:
        estimates = estimates[: sized_top_k(result, inputs, estimates, samples)]
    if not estimates:
        return []
    checks = recheck_plans(
        estimates,
        samples=samples,
        noise=noise,
        seed=seed,
        trace_dir=trace_dir,
        stop=stop,
        windows=windows,
    )
    for entry, rc in zip(result.front, checks, strict=False):
        rc.trace_paths = [_name_after_plan(path, entry.plan) for path in rc.trace_paths]
    return checks


def default_top_k(top_k: int | None, request: Any) -> int | None:
    """``top_k`` as asked; unset (None: sized by ``sized_top_k``) unless ``request`` judges an
    SLA or a percentile on the re-check (goodput), which then re-checks ``DEFAULT_RECHECK``."""
    if top_k is not None:
        return top_k
    slas = (request.max_ttft_ms, request.max_tpot_ms, request.min_tps_per_seq)
    judged = any(v is not None for v in slas) or request.percentile != "p50"
    return DEFAULT_RECHECK if judged else None


def modelled_search_cpu_seconds(result: SearchResult, inputs: EvaluatorInputs) -> float:
    """The search's CPU seconds by the cost model: ``SEARCH_CPU_SECONDS_FIXED`` plus every plan
    it holds (scored now or stored before) at ``modes.plan_cpu_seconds`` of its chip kind."""
    from plena_opt.estimate.pricer import chip_kind
    from plena_opt.search.run.modes import plan_cpu_seconds

    devices = inputs.noc.num_devices if inputs.noc is not None else 1
    per_plan = plan_cpu_seconds(devices, chip_kind(inputs.chip))
    return SEARCH_CPU_SECONDS_FIXED + (result.evaluated + result.reused) * per_plan


def recheck_cpu_seconds(estimate: Any, samples: int) -> float:
    """Modelled CPU seconds to re-check one estimate with ``samples`` samples (constants above)."""
    from plena_opt.simulator.engine.serving import recheck_ops
    from plena_opt.simulator.scheduler.inference import stage_times_from_estimate

    built, sampled = recheck_ops(stage_times_from_estimate(estimate, max_decode_steps=64))
    per_sample = RECHECK_CPU_SECONDS_PER_SAMPLE + RECHECK_CPU_SECONDS_PER_OP_SAMPLE * sampled
    return (
        RECHECK_CPU_SECONDS_PER_PLAN
        + RECHECK_CPU_SECONDS_PER_BUILT_OP * built
        + (max(samples, 0) * per_sample)
    )


def sized_top_k(
    result: SearchResult, inputs: EvaluatorInputs, estimates: list[Any], samples: int
) -> int:
    """How many of ``estimates`` (front order) the default re-check takes: the first, then each
    next one while the modelled re-check CPU stays within ``RECHECK_SHARE`` of the modelled
    search CPU (``modelled_search_cpu_seconds``)."""
    budget = RECHECK_SHARE * modelled_search_cpu_seconds(result, inputs)
    spent = 0.0
    for k, est in enumerate(estimates):
        spent += recheck_cpu_seconds(est, samples)
        if k and spent > budget:
            return k
    return len(estimates)


def _name_after_plan(path: str, plan: dict[str, Any]) -> str:
    """Rename ``plan<i>_<sample>.json`` after the plan, e.g. ``tp8-ep1-…-b16_p50.json``."""
    old = Path(path)
    sample = old.stem.split("_", 1)[1] if "_" in old.stem else old.stem
    key = Point.from_dict(plan).key
    new = old.with_name(f"{key}_{sample}{old.suffix}")
    os.replace(old, new)
    return str(new)


def render_recheck(
    result: SearchResult, checks: list[Any], samples: int, noise: Any, top_k: int | None = 0
) -> str:
    """Text table: analytic vs p50/p99 TTFT (ms) and TPS; ``*`` marks a rank change; with
    ``top_k=None`` (the sized default) a note says when plans were left out by the cost model."""
    if not checks:
        return ""
    pairs = list(zip(result.front, checks, strict=False))
    w = max([4] + [len(e.label) + (2 if rc.rank_changed else 0) for e, rc in pairs]) + 2
    lines = [
        f"Monte Carlo re-check of the top {len(checks)} plans ({samples} samples, noise {noise};"
        " * = rank changes under noise; p99 slow = TTFT's slow tail, p1 slow = TPS's):",
        "(TTFT ms and TPS: model, static batch; p50/p99/p1: Monte Carlo samples)",
        f"{'plan':<{w}}{'TTFT ms':>10}{'MC p50':>10}{'p99 slow':>10}{'TPS':>10}{'MC p50':>10}"
        f"{'p1 slow':>10}",
    ]
    for entry, rc in pairs:
        mark = " *" if rc.rank_changed else ""
        lines.append(
            f"{(entry.label + mark):<{w}}{rc.analytic_ttft_seconds * 1e3:>10.2f}"
            f"{rc.ttft_p50_seconds * 1e3:>10.2f}{rc.ttft_p99_seconds * 1e3:>10.2f}"
            f"{rc.analytic_tps:>10.1f}"
            f"{rc.tps_p50:>10.1f}{rc.tps_p01:>10.1f}"
        )
        for cause in getattr(rc.serving, "causes", []) or []:
            lines.append(f"{'':<4}note: {cause}")
        if rc.trace_paths:
            lines.append(f"{'':<4}traces: {', '.join(rc.trace_paths)}")
    left = min(DEFAULT_RECHECK, len(result.front)) - len(checks)
    if top_k is None and left > 0 and not any(getattr(rc, "partial", False) for rc in checks):
        lines.append(
            f"({left} more front plan(s) not re-checked: by the cost model they would take the "
            f"re-check over {RECHECK_SHARE:.0%} of the search's CPU; --recheck K re-checks K)"
        )
    return "\n".join(lines)
