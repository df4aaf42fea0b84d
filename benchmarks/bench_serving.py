"""Disaggregated serving benchmarks (issue 16).

Run: ``.venv/bin/python benchmarks/bench_serving.py [--part exact|sampled|optuna|all]``.

* exact: the exact disaggregated front (pool shapes × batches × rate-matched ratios) of
  llama-3.1-8b on a 64-device two-level switch (``switch_noc(64, 8)``), batches 8,32,128,
  objectives TTFT, tokens/s/device, tokens/s/user; wall time of workers + pairs + front.
* sampled: the same on 1,024 devices (``switch_noc(1024, 128)``, batches 32,128, pools of
  8–512 devices): the role-front
  sampler (only workers on their role's own front are paired) against exhaustive pairing —
  hypervolume normalised by the exact front and the share of pair evaluations.
* optuna: the 64-device space of ``exact``: the Optuna pair search (``--serving-sampler optuna``,
  NSGA-II with budgets of 500, 2,000 and 5,000 deployments, multivariate TPE with 500) against
  the role-front
  sampler and the exact front — hypervolume ratio, deployments scored, wall time.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from deepstack import switch_noc

from plena_opt.estimate import Workload
from plena_opt.estimate.problem import EvaluatorInputs
from plena_opt.memory import FixedBandwidthMemory
from plena_opt.models import load_model
from plena_opt.search.fronts.hypervolume import Normaliser
from plena_opt.search.serving.disaggregated import ServingSpace
from plena_opt.search.serving.serving_compare import front_of

OBJ = ["ttft", "tps-per-device", "tps-per-user"]
SLA = {"max_ttft_seconds": None, "max_tpot_seconds": None, "min_tps_per_seq": None}


def _inputs(n: int, groups: int) -> EvaluatorInputs:
    return EvaluatorInputs(
        load_model("llama-3.1-8b"),
        switch_noc(n, groups=groups),
        FixedBandwidthMemory(2e12, 80 * 2**30, name="fixed-2000GBps-80GiB"),
        Workload(batch_size=8, input_seq_len=2048, output_seq_len=256),
    )


def exact() -> dict:
    t0 = time.perf_counter()
    space = ServingSpace.build(_inputs(64, 8), [8, 32, 128], SLA)
    t1 = time.perf_counter()
    pts = space.disaggregated_points("exhaustive", OBJ)
    front = front_of(pts, OBJ)
    t2 = time.perf_counter()
    return {
        "devices": 64,
        "workers": len(space.workers),
        "pairs": pts.evaluated,
        "front": len(front),
        "workers_s": t1 - t0,
        "pairs_and_front_s": t2 - t1,
        "total_s": t2 - t0,
    }


def sampled() -> dict:
    t0 = time.perf_counter()
    space = ServingSpace.build(_inputs(1024, 128), [32, 128], SLA, min_pool=8)
    t1 = time.perf_counter()
    ex = space.disaggregated_points("exhaustive", OBJ)
    ex_front = front_of(ex, OBJ)
    t2 = time.perf_counter()
    rf = space.disaggregated_points("role-front", OBJ)
    rf_front = front_of(rf, OBJ)
    t3 = time.perf_counter()
    exact_pts = ex.minimised(OBJ)[ex_front]
    norm = Normaliser.from_points(exact_pts)
    hv_exact = norm.hypervolume(exact_pts)
    hv_rf = norm.hypervolume(rf.minimised(OBJ)[rf_front])
    return {
        "devices": 1024,
        "workers": len(space.workers),
        "exhaustive_pairs": ex.evaluated,
        "role_front_pairs": rf.evaluated,
        "evaluation_share": rf.evaluated / ex.evaluated,
        "hv_ratio": hv_rf / hv_exact,
        "exact_front": len(ex_front),
        "role_front_front": len(rf_front),
        "workers_s": t1 - t0,
        "exhaustive_s": t2 - t1,
        "role_front_s": t3 - t2,
    }


def _hv_ratio(points, exact_pts) -> float:
    norm = Normaliser.from_points(exact_pts)
    return norm.hypervolume(points.minimised(OBJ)[front_of(points, OBJ)]) / norm.hypervolume(
        exact_pts
    )


# TPE (multivariate) costs grow with the trials told: 500 took 24 s here, 2,000 over 14 min.
OPTUNA_RUNS = (("nsga2", 500), ("nsga2", 2000), ("nsga2", 5000), ("tpe", 500))


def optuna_vs_role_front(runs=OPTUNA_RUNS) -> dict:
    space = ServingSpace.build(_inputs(64, 8), [8, 32, 128], SLA)
    ex = space.disaggregated_points("exhaustive", OBJ)
    exact_pts = ex.minimised(OBJ)[front_of(ex, OBJ)]
    t0 = time.perf_counter()
    rf = space.disaggregated_points("role-front", OBJ)
    out = {
        "exhaustive_pairs": ex.evaluated,
        "role_front": {"pairs": rf.evaluated, "hv_ratio": _hv_ratio(rf, exact_pts),
                       "s": time.perf_counter() - t0},
    }  # fmt: skip
    print(out, flush=True)
    for sampler, budget in runs:
        space.optuna_sampler, space.budget = sampler, budget
        t0 = time.perf_counter()
        pts = space.disaggregated_points("optuna", OBJ)
        out[f"optuna_{sampler}_{budget}"] = {
            "scored": pts.evaluated,
            "trials": space.optuna.suggested,
            "hv_ratio": _hv_ratio(pts, exact_pts),
            "s": time.perf_counter() - t0,
        }
        print(f"optuna_{sampler}_{budget}", out[f"optuna_{sampler}_{budget}"], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("exact", "sampled", "optuna", "all"), default="all")
    args = ap.parse_args()
    out = {}
    if args.part in ("exact", "all"):
        out["exact"] = exact()
    if args.part in ("sampled", "all"):
        out["sampled"] = sampled()
    if args.part in ("optuna", "all"):
        out["optuna"] = optuna_vs_role_front()
    print(json.dumps(out, indent=2, default=lambda v: float(np.asarray(v))))


if __name__ == "__main__":
    main()
