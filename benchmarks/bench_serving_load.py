"""Cost of pricing a plan under a serving workload next to the static evaluator.

Run: ``.venv/bin/python benchmarks/bench_serving_load.py`` (figures in benchmarks/README_gpu.md,
"Serving under load"). One plan (Llama-3.1-70B, TP 8, fp8, 8x H100, vLLM defaults, 1k/1k):

* static: ``Evaluator(...).evaluate(plan)`` (one static-batch estimate, batch 64), a fresh
  evaluator each call (cold) and the same evaluator again (warm, its memo filled);
* steady: ``closed_loop`` at concurrency 64 on a fresh ``StepModel`` (cold: its evaluator calls
  included) and on the same one (warm: the search's case, step costs cached per plan);
* benchmark: ``benchmark_run`` (steady state + the start burst's replay), warm;
* replay: ``replay_closed_loop`` (discrete-event, 64 clients, 256 measured requests), warm.
Each figure is the best of 5 repeats; the load average is printed beside them.
"""

from __future__ import annotations

import os
import timeit

from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.models import load_model
from plena_opt.serving import (
    ServingWorkload,
    StepModel,
    benchmark_run,
    closed_loop,
    engine_model,
    replay_closed_loop,
)


def _best(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def main() -> None:
    chip, model = load_chip("h100-sxm"), load_model("llama-3.1-70b")
    noc, mem = load_noc_profile("hgx-h100x8"), gpu_memory(chip)
    plan = Plan(tp=8)
    static_wl = Workload(batch_size=64, input_seq_len=1024, output_seq_len=1024, precision="fp8")
    step_wl = Workload(batch_size=1, input_seq_len=1024, output_seq_len=1024, precision="fp8")
    eng = engine_model("vllm", float(chip.hbm.capacity_bytes.value))
    serving = ServingWorkload(64, 1024, 1024)

    def fresh_step() -> StepModel:
        return StepModel.from_problem(model, noc, mem, chip, step_wl, plan, eng)

    warm_eval = Evaluator(model, noc, mem, static_wl, chip)
    warm_step = fresh_step()
    closed_loop(warm_step, serving)
    benchmark_run(warm_step, serving)
    rows = {
        "static evaluate, cold": _best(
            lambda: Evaluator(model, noc, mem, static_wl, chip).evaluate(plan), 3),
        "static evaluate, warm": _best(lambda: warm_eval.evaluate(plan), 200),
        "steady closed_loop, cold": _best(lambda: closed_loop(fresh_step(), serving), 3),
        "steady closed_loop, warm": _best(lambda: closed_loop(warm_step, serving), 200),
        "benchmark_run (burst), warm": _best(lambda: benchmark_run(warm_step, serving), 20),
        "replay_closed_loop, warm": _best(
            lambda: replay_closed_loop(warm_step, serving, measured=256), 1),
    }  # fmt: skip
    base = rows["static evaluate, warm"]
    for name, t in rows.items():
        print(f"{name:30} {t * 1e3:10.3f} ms   {t / base:8.1f} x static warm")
    print("load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
