"""``plena-opt search --design-space``: run the co-design and print its joint front."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from plena_opt.errors import PlenaInputError


def render(res: Any) -> str:
    """The joint front (hardware knobs, plan, metrics, cost), knob importances, points."""
    knobs = list(res.front[0].hardware) if res.front else []
    head = [*knobs, "plan", "batch", "TTFT ms", "TPS", "J/token", "cost"]
    rows = [
        [*(str(j.hardware[k]) for k in knobs), j.plan.label, str(j.plan.plan["batch_size"]),
         f"{j.plan.ttft_ms:.2f}", f"{j.plan.tps:.1f}",
         "-" if j.plan.energy_j_per_token is None else f"{j.plan.energy_j_per_token:.4g}",
         f"{j.cost:g}"]
        for j in res.front
    ]  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)] if rows else []
    lines = [
        f"design space {res.design_space}: {res.evaluated_points} of {res.hardware_points} "
        f"hardware points searched ({len(res.refused)} refused, {res.over_budget} over "
        f"--max-cost), {res.plans_scored} plans scored; objectives {', '.join(res.objectives)}",
        f"joint Pareto front ({len(res.front)} (hardware, plan) pairs, by TPS):",
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
        "  ".join("-" * w for w in widths),
        *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows),
    ]
    for obj, imp in res.importances.items():
        ranked = ", ".join(f"{k} {v:.2f}" for k, v in imp.items())
        lines.append(f"knob importance for {obj}: {ranked}")
    for point, why in res.refused[:5]:
        lines.append(f"refused {point}: {why}")
    return "\n".join(lines)


def run(args: argparse.Namespace, request: Any) -> int:
    from plena_opt import api

    if args.max_cost is not None and args.max_cost < 0:
        raise PlenaInputError("max_cost", "--max-cost must be at least 0")
    if args.workers is not None:
        return _with_workers(args, request)
    trials = args.trials if args.sampler != "exhaustive" else None
    sampler = "exhaustive" if args.sampler == "exhaustive" else args.sampler
    res = api.search_codesign(
        request, args.design_space, sampler=sampler, trials=trials, max_cost=args.max_cost,
        seed=args.seed,
    )  # fmt: skip
    return _print(args, res)


def _with_workers(args: argparse.Namespace, request: Any) -> int:
    """``--design-space --workers N``: every allowed hardware point, scored by N local worker
    processes on ``--storage`` (N = 0: only queue the points for remote workers)."""
    from plena_opt import api

    if args.sampler not in ("exhaustive", "auto"):
        raise PlenaInputError(
            "sampler", "--workers with --design-space scores every hardware point (exhaustive)"
        )
    if args.workers < 0:
        raise PlenaInputError("workers", "--workers must be at least 0")
    if args.workers == 0:
        info = api.prepare_codesign_workers(request, args.design_space, args.max_cost)
        print(
            f"co-design study {info.study}: {info.enqueued} hardware points queued of "
            f"{info.legal_points}; start workers with: plena-opt worker --storage "
            f"{request.storage} --study {info.study}"
        )
        return 0
    res, reports = api.run_codesign_workers(
        request, args.design_space, args.workers, max_cost=args.max_cost
    )
    from plena_opt.cli.worker_cmd import report_dead_workers

    report_dead_workers(reports, args.workers)
    if not args.quiet:
        done = sum(r["chunks"] for r in reports)
        print(f"{args.workers} workers scored {done} hardware points", file=sys.stderr)
    return _print(args, res)


def _print(args: argparse.Namespace, res: Any) -> int:
    if args.json:
        print(json.dumps(asdict(res), default=str, indent=2))
    else:
        print(render(res))
    if not res.front:
        print("error: no hardware point has a feasible plan", file=sys.stderr)
        return 2
    return 0
