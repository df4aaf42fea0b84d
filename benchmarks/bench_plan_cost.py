"""CPU time per plan on a PLENA chip and on a GPU chip, side by side (issue 26).

What ``auto`` (``plena_opt.search.run.modes``) models per plan: a fresh evaluator scoring every
legal plan of the default workload, NoC routes already built by a first evaluator
(``evaluator_ms``), and what the search pays per plan it scores, metrics summary, cost and
record included (``score_ms``: an exhaustive ``run_search`` in memory, CPU spent in
``_Search.score`` over the plans scored). ``time.process_time``; the cases alternate, ``--rounds``
times, and each row prints the 1-minute load average; the summary is the median over rounds and
cases of each chip kind, and the GPU/PLENA ratio.

Cases: ``llama-3.1-70b`` (dense) and ``qwen3-235b-a22b`` (MoE) on ``illustrative_gpu_cluster_32``
with the default PLENA chip and memory, on ``h200x32`` with ``h200-sxm``, and ``llama-3.1-70b``
on the 8-GPU nodes ``hgx-h100x8`` (``h100-sxm``) and ``hgx-h200x8`` (``h200-sxm``). Prints a text
table, then one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

CASES = (
    ("plena", "llama-3.1-70b", "illustrative_gpu_cluster_32", None),
    ("plena", "qwen3-235b-a22b", "illustrative_gpu_cluster_32", None),
    ("gpu", "llama-3.1-70b", "h200x32", "h200-sxm"),
    ("gpu", "qwen3-235b-a22b", "h200x32", "h200-sxm"),
    ("gpu", "llama-3.1-70b", "hgx-h100x8", "h100-sxm"),
    ("gpu", "llama-3.1-70b", "hgx-h200x8", "h200-sxm"),
)


def evaluator_ms(model: str, noc: str, chip: str | None) -> tuple[int, float]:
    """(legal plans, CPU ms per plan of a fresh evaluator with the routes built)."""
    from plena_opt.estimate.evaluator import Evaluator
    from plena_opt.estimate.problem import ProblemSpec

    inp = ProblemSpec(model=model, noc=noc, chip=chip).load()

    def make() -> Evaluator:
        return Evaluator(inp.model, inp.noc, inp.memory, inp.workload, chip=inp.chip)

    first = make()
    plans = first.legal_plans()
    first.evaluate_batch(plans)  # routes built
    fresh = make()
    c = time.process_time()
    fresh.evaluate_batch(plans)
    return len(plans), 1e3 * (time.process_time() - c) / len(plans)


def score_ms(model: str, noc: str, chip: str | None) -> float:
    """CPU ms per plan the exhaustive search spends in ``_Search.score`` (a fresh problem)."""
    from plena_opt.estimate.problem import ProblemSpec
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.run import session
    from plena_opt.search.run.runner import run_search

    spent = [0.0]
    real = session._Search.score

    def score(self, points):
        c = time.process_time()
        try:
            return real(self, points)
        finally:
            spent[0] += time.process_time() - c

    session._Search.score = score
    try:
        req = SearchRequest(
            problem=ProblemSpec(model=model, noc=noc, chip=chip),
            sampler="exhaustive",
            storage=":memory:",
        )
        res = run_search(req)
    finally:
        session._Search.score = real
    return 1e3 * spent[0] / res.evaluated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="times each case is measured")
    args = ap.parse_args()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    for _kind, model, noc, chip in CASES:  # warm imports and one-time tables, not counted
        evaluator_ms(model, noc, chip)
    rows = []
    print(f"{'kind':<6}{'model':<17}{'noc':<28}{'plans':>6}{'eval ms':>9}{'score ms':>9}  load 1m")
    for r in range(args.rounds):
        for kind, model, noc, chip in CASES:
            n, ev = evaluator_ms(model, noc, chip)
            sc = score_ms(model, noc, chip)
            load = round(os.getloadavg()[0], 2)
            rows.append(
                {"round": r, "kind": kind, "model": model, "noc": noc, "chip": chip,
                 "plans": n, "evaluator_ms": round(ev, 4), "score_ms": round(sc, 4),
                 "load": load}
            )  # fmt: skip
            print(f"{kind:<6}{model:<17}{noc:<28}{n:>6}{ev:>9.3f}{sc:>9.3f}  {load}", flush=True)
    summary = {}
    for kind in ("plena", "gpu"):
        mine = [x for x in rows if x["kind"] == kind]
        summary[kind] = {
            "evaluator_ms": round(statistics.median(x["evaluator_ms"] for x in mine), 4),
            "score_ms": round(statistics.median(x["score_ms"] for x in mine), 4),
        }
    ratio = {
        k: round(summary["gpu"][k] / summary["plena"][k], 2) for k in ("evaluator_ms", "score_ms")
    }
    print("median per kind:", summary, "gpu/plena:", ratio, "load:", os.getloadavg())
    print(json.dumps({"rows": rows, "median": summary, "gpu_over_plena": ratio}))


if __name__ == "__main__":
    main()
