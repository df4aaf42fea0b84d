"""GPU chip path speed: plans/s over every legal plan of a 32-GPU cluster (4 x HGX H200).

``python benchmarks/bench_gpu.py`` prints plans/s for llama-3.1-70b and qwen3-235b-a22b, batch
64, 1k/1k, next to the PLENA path on the same NoC and workload (ratios in one run).
"""

from __future__ import annotations

import time

from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.estimate import Evaluator, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.memory import load_memory
from plena_opt.models import load_model


def rate(model: str, chip: str | None) -> tuple[int, float]:
    noc = load_noc_profile("hgx-h200x8@4")
    wl = Workload(batch_size=64, input_seq_len=1024, output_seq_len=1024)
    c = load_chip(chip) if chip else None
    mem = gpu_memory(c) if chip else load_memory("fictional_stacked_dram")
    ev = Evaluator(load_model(model), noc, mem, wl, c)
    plans = ev.legal_plans()
    t = time.perf_counter()
    ev.evaluate_batch(plans)
    return len(plans), len(plans) / (time.perf_counter() - t)


if __name__ == "__main__":
    for model in ("llama-3.1-70b", "qwen3-235b-a22b"):
        n, gpu = rate(model, "h200-sxm")
        _, plena = rate(model, None)
        print(f"{model}: {n} legal plans, GPU {gpu:.0f} plans/s, PLENA {plena:.0f} plans/s")
