"""Co-design (issue 17): a TPE outer search over the hardware points of a design space against
the exhaustive joint front (hypervolume ratio on the exhaustive front's normalisation).

Run: ``.venv/bin/python benchmarks/bench_codesign.py [--trials 20 --seeds 3]``; figures in
benchmarks/README.md ("co-design").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.codesign.codesign import run_codesign
from plena_opt.search.codesign.design_space import load_design_space
from plena_opt.search.fronts.hypervolume import Normaliser
from plena_opt.search.request import SearchRequest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--design-space", default="plena-stacked-dram")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    problem = ProblemSpec(
        model="llama-3.1-8b",
        noc="illustrative_ring_switch_32",
        memory="fictional_stacked_dram",
        input_seq=512,
        output_seq=64,
    )
    req = SearchRequest(problem=problem, batch_sizes=[1, 4, 16, 32])
    space = load_design_space(args.design_space)
    t = time.perf_counter()
    full = run_codesign(req, space)
    t_full = time.perf_counter() - t
    pts = np.array([e.values for e in full.front])
    norm = Normaliser.from_points(pts)
    hv_full = norm.hypervolume(pts)
    print(f"exhaustive: {full.evaluated_points} buildable of {space.size()} hardware points, "
          f"{full.plans_scored} (hardware, plan) pairs scored, front {len(full.front)}, "
          f"{t_full:.1f} s")  # fmt: skip
    for seed in range(args.seeds):
        t = time.perf_counter()
        r = run_codesign(req, space, sampler="tpe", trials=args.trials, seed=seed)
        hv = norm.hypervolume(np.array([e.values for e in r.front])) if r.front else 0.0
        print(f"tpe seed {seed}: {args.trials} outer trials, {r.evaluated_points} points, "
              f"{r.plans_scored} pairs, hv ratio {hv / hv_full:.4f}, "
              f"{time.perf_counter() - t:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
