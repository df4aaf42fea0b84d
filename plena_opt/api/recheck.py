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
from plena_opt.search.space import Point
from plena_opt.simulator.engine import RecheckResult, recheck_plans
from plena_opt.stop import StopToken

DEFAULT_RECHECK = 5
DEFAULT_SAMPLES = 1000
# Lognormal op jitter σ 5 %, persistent per-rank speed σ 3 %, 0.1 % stragglers at 1.2–2× slower.
DEFAULT_NOISE = "sigma=0.05,rank=0.03,straggler_p=0.001"


def recheck_front(
    result: SearchResult,
    inputs: EvaluatorInputs,
    *,
    top_k: int = DEFAULT_RECHECK,
    samples: int = DEFAULT_SAMPLES,
    noise: Any = DEFAULT_NOISE,
    seed: int = 0,
    trace_dir: str | Path | None = None,
    should_stop: Callable[[], bool] | None = None,
    stop: StopToken | None = None,
    windows: str = "auto",
) -> list[RecheckResult]:
    """Re-check the first ``top_k`` front plans (``RecheckResult`` list, front order).
    ``windows`` (``auto``/``full``/``short``, see ``simulate_serving``): by default a long serving
    window is simulated as the closed-form steady state plus a short sampled window.

    ``stop`` (deadline / cancel token) is checked between estimates, between plans and inside
    the Monte Carlo: fewer plans come back, the last possibly ``partial``; ``should_stop`` is an
    older, coarser hook (checked between estimates only)."""
    estimates = []
    for entry in result.front[: max(top_k, 0)]:
        if (should_stop is not None and should_stop()) or (stop is not None and stop.is_set()):
            break
        plan = Plan.from_dict(entry.plan)
        ev = inputs.evaluator(entry.plan.get("batch_size"), entry.plan.get("precision"))
        estimates.append(ev.estimate(plan))
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


def _name_after_plan(path: str, plan: dict[str, Any]) -> str:
    """Rename ``plan<i>_<sample>.json`` after the plan, e.g. ``tp8-ep1-…-b16_p50.json``."""
    old = Path(path)
    sample = old.stem.split("_", 1)[1] if "_" in old.stem else old.stem
    key = Point.from_dict(plan).key
    new = old.with_name(f"{key}_{sample}{old.suffix}")
    os.replace(old, new)
    return str(new)


def render_recheck(result: SearchResult, checks: list[Any], samples: int, noise: Any) -> str:
    """Text table: analytic vs p50/p99 TTFT (ms) and TPS; ``*`` marks a rank change."""
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
    return "\n".join(lines)
