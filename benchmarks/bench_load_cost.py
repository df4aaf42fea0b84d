"""A plan priced under a serving workload next to its static evaluation, CPU time (issue 26).

Run: ``.venv/bin/python benchmarks/bench_load_cost.py [--compare DIR] [--rounds N]`` (figures in
benchmarks/README_serving.md, "Pricing a plan under load"). For each case — a dense
(``llama-3.1-70b``, TP 8) and a MoE model (``qwen3-235b-a22b``, attention DP 8 × EP 8) on one
8×H100 node (``hgx-h100x8``, ``h100-sxm``), fp8, vLLM defaults — at concurrency 4, 64, 256 and
input/output 1k/1k and 8k/1k, fixed lengths (``range_ratio`` 0, the lock-step form) and drawn
ones (0.8, InferenceX's ``--random-range-ratio``), "the plan's cost" is, in CPU seconds
(``time.process_time``):

* **static, cold**: ``Evaluator(model, noc, memory, Workload(batch=C, isl, osl), chip)
  .evaluate(plan)`` — a fresh evaluator (no memo) pricing the static batch of ``C``;
* **static, warm**: the same evaluator's ``evaluate(plan)`` again (its memo filled);
* **closed, cold**: ``closed_loop(StepModel.from_problem(...), ServingWorkload(C, isl, osl,
  ratio))`` — a fresh step model on fresh evaluators (every evaluator call it needs included);
* **closed, warm**: ``closed_loop`` again on that step model (step costs cached: the search's
  case once a plan's step costs are priced);
* **open, cold / warm**: ``open_loop`` likewise at a Poisson rate of half the closed loop's
  request throughput at ``C``.

The NoC routes are built and the modules imported before anything is timed (both sides pay
neither). A cold figure is the least CPU time of ``--cold`` calls, a warm one the least of
``--warm`` samples of 20 calls (per call): the work is deterministic, and other processes on
the machine only lengthen a sample. Static, closed and open take turns sample by sample, so a
ratio compares figures taken under the same load. Each ratio is loaded / static of the same
kind (cold / cold, warm / warm). With ``--compare DIR`` the same measurement runs on checkout
``DIR`` ("before") and on this one ("after") in alternating child processes, ``--rounds``
times (each figure: the median over the rounds), and the table shows both; each run prints
its 1-minute load average. ``--json`` prints the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import _compare  # benchmarks/ is the script's folder

CASES = (("dense", "llama-3.1-70b", {"tp": 8}), ("moe", "qwen3-235b-a22b", {"ep": 8}))
CONCURRENCY = (4, 64, 256)
LENGTHS = ((1024, 1024), (8192, 1024))
RATIOS = (0.0, 0.8)
KINDS = ("static", "closed", "open")
TEMPS = ("cold", "warm")
WARM_INNER = 20  # warm calls per timed sample


def _cpu(fns: dict, samples: int, inner: int = 1) -> dict[str, float]:
    """CPU seconds of one call of each of ``fns`` (name → function): the least over
    ``samples`` runs of ``inner`` calls each (the work is deterministic; what other processes
    add only lengthens a sample). The functions take turns, one sample each, so that the
    figures compared in a ratio are sampled under the same load."""
    best = dict.fromkeys(fns, math.inf)
    for _ in range(samples):
        for name, fn in fns.items():
            c = time.process_time()
            for _ in range(inner):
                fn()
            best[name] = min(best[name], (time.process_time() - c) / inner)
    return best


def _row(env: tuple, model: object, plan: object, c: int, isl: int, osl: int, ratio: float,
         cold_n: int, warm_n: int) -> dict:  # fmt: skip
    """Cold and warm CPU seconds of each kind for one (plan, C, lengths, ratio)."""
    from plena_opt.estimate import Evaluator, Workload
    from plena_opt.serving import (
        OpenLoopWorkload,
        ServingWorkload,
        StepModel,
        closed_loop,
        open_loop,
    )

    chip, noc, mem, eng = env
    static_wl = Workload(batch_size=c, input_seq_len=isl, output_seq_len=osl, precision="fp8")
    step_wl = Workload(batch_size=1, input_seq_len=isl, output_seq_len=osl, precision="fp8")

    def static() -> Evaluator:
        return Evaluator(model, noc, mem, static_wl, chip)  # type: ignore[arg-type]

    def fresh() -> StepModel:
        return StepModel.from_problem(model, noc, mem, chip, step_wl, plan, eng, range_ratio=ratio)

    static().evaluate(plan)  # routes built
    closed = ServingWorkload(c, isl, osl, ratio)
    rate = 0.5 * closed_loop(fresh(), closed).request_throughput_per_s
    opened = OpenLoopWorkload(rate, isl, osl, ratio)
    warm_ev, warm_step = static(), fresh()
    warm_ev.evaluate(plan)
    closed_loop(warm_step, closed)
    open_loop(warm_step, opened)
    t = _cpu(
        {
            "static_cold": lambda: static().evaluate(plan),
            "closed_cold": lambda: closed_loop(fresh(), closed),
            "open_cold": lambda: open_loop(fresh(), opened),
        },
        cold_n,
    )
    t |= _cpu(
        {
            "static_warm": lambda: warm_ev.evaluate(plan),
            "closed_warm": lambda: closed_loop(warm_step, closed),
            "open_warm": lambda: open_loop(warm_step, opened),
        },
        warm_n,
        WARM_INNER,
    )
    return {"concurrency": c, "isl": isl, "osl": osl, "range_ratio": ratio, "rate_per_s": rate,
            **t}  # fmt: skip


def measure(cold_n: int, warm_n: int) -> list[dict]:
    """One row per (case, C, lengths, ratio): cold and warm CPU seconds of each kind."""
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Plan
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model
    from plena_opt.serving import engine_model

    chip, noc = load_chip("h100-sxm"), load_noc_profile("hgx-h100x8")
    env = (chip, noc, gpu_memory(chip), engine_model("vllm", float(chip.hbm.capacity_bytes.value)))
    rows = []
    for label, name, fields in CASES:
        model, plan = load_model(name), Plan(**fields)
        for c in CONCURRENCY:
            for isl, osl in LENGTHS:
                for ratio in RATIOS:
                    row = _row(env, model, plan, c, isl, osl, ratio, cold_n, warm_n)
                    rows.append({"case": label, "model": name, **row})
    return rows


def _child(source: str | None, cold_n: int, warm_n: int) -> dict:
    """Run ``measure`` on checkout ``source`` (None: this one) in a child process."""
    args = ["--child", "--cold", str(cold_n), "--warm", str(warm_n)]
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(_compare.command(str(Path(__file__).resolve()), args),
                             env=_compare.env(source), cwd=cwd, capture_output=True, text=True,
                             check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_rows(runs: list[dict]) -> list[dict]:
    """Each timing's median over the runs (rows matched by position)."""
    rows = [dict(r) for r in runs[0]["rows"]]
    for i, row in enumerate(rows):
        for k in row:
            if k.endswith(("_cold", "_warm")):
                row[k] = statistics.median(run["rows"][i][k] for run in runs)
    return rows


def _x(row: dict, kind: str, temp: str) -> float:
    """Loaded / static CPU time of one row (``temp``: cold or warm)."""
    return row[f"{kind}_{temp}"] / row[f"static_{temp}"]


def _table(sides: dict[str, list[dict]]) -> None:
    head = "case  C    isl/osl  rr  | " + " | ".join(
        f"{side}: static ms cold/warm, closed x cold/warm, open x cold/warm" for side in sides
    )
    print(head)  # fmt: skip
    names = list(sides)
    for i, row in enumerate(sides[names[0]]):
        cells = []
        for side in names:
            r = sides[side][i]
            cells.append(
                f"{r['static_cold'] * 1e3:6.3f}/{r['static_warm'] * 1e3:6.3f}  "
                + "  ".join(f"{_x(r, k, 'cold'):5.2f}/{_x(r, k, 'warm'):5.2f}" for k in KINDS[1:])
            )
        print(f"{row['case']:5} {row['concurrency']:<4} {row['isl'] // 1024}k/{row['osl'] // 1024}k"
              f"    {row['range_ratio']:.1f} | " + " | ".join(cells))  # fmt: skip
    for side in names:
        rs = sides[side]
        worst = {f"{k} {t}": max(_x(r, k, t) for r in rs) for k in KINDS[1:] for t in TEMPS}
        print(
            f"{side}: worst loaded/static " + ", ".join(f"{k} {v:.2f}x" for k, v in worst.items())
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", help="also measure this checkout, as 'before'")
    ap.add_argument("--rounds", type=int, default=1, help="alternating runs per side")
    ap.add_argument("--cold", type=int, default=7, help="cold calls per figure (least)")
    ap.add_argument("--warm", type=int, default=7,
                    help=f"warm samples of {WARM_INNER} calls per figure (least)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        load = os.getloadavg()[0]
        rows = measure(a.cold, a.warm)
        print(json.dumps({"rows": rows, "load": [load, os.getloadavg()[0]],
                          "source": _compare.source_of()}))  # fmt: skip
        return
    sources = {"before": a.compare, "after": None} if a.compare else {"this": None}
    runs: dict[str, list[dict]] = {side: [] for side in sources}
    for _ in range(a.rounds):
        for side, src in sources.items():
            runs[side].append(_child(src, a.cold, a.warm))
    sides = {side: _median_rows(rs) for side, rs in runs.items()}
    if a.json:
        print(json.dumps({s: {"rows": sides[s], "loads": [r["load"] for r in runs[s]]}
                          for s in sides}))  # fmt: skip
        return
    _table(sides)
    for side, rs in runs.items():
        loads = ", ".join(f"{lo:.2f}-{hi:.2f}" for lo, hi in (r["load"] for r in rs))
        print(f"{side} ({rs[0]['source']}): load average (1 min, start-end of each run) {loads}")


if __name__ == "__main__":
    main()
