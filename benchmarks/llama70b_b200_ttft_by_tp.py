"""Where the Llama-3.1-70B B200 vLLM TTFT gap grows with TP (issue 23; numbers only, no fit).

Run ``python benchmarks/llama70b_b200_ttft_by_tp.py [ISL [CONC]]`` (default 1024, 4). For each
InferenceX row of the shipped file with that prompt length and concurrency (fp8 and fp4, TP 1–8;
output lengths 1k and 8k), it prints measured and predicted TTFT (ms), the predicted prefill of
one prompt (``StepModel.prefill_seconds``), the prefill's eager floor (one token), and its TP
all-reduces priced two ways: as the evaluator prices them (the node profile's lower envelope of
vLLM's CUDA-graph custom all-reduce and NCCL, ``estimate.engine_network``) and from the eager
rows of the same AIConfigurator table (``vLLM_custom_eager``: what a prefill outside CUDA graphs
would run), 2 all-reduces per layer of ``ISL × hidden × 2 B`` each. The last column is the gap
(measured − predicted TTFT) the all-reduce difference would have to explain.
"""

from __future__ import annotations

import csv
import gzip
import sys
from pathlib import Path

from plena_opt.validate.serving_rows import read_rows, resolve
from plena_opt.validate.serving_score import shipped_serving_csv, step_model

TABLE = "tests/shared/data/kernels/b200_sxm_custom_allreduce_vllm-0.19.0.csv.gz"


def eager_seconds(devices: int, elements: int, backend: str) -> float:
    """Seconds of one bf16 all-reduce of ``elements`` over ``devices`` B200s from the table's
    ``backend`` rows (``vllm_graph`` or ``vllm_eager``), the next measured size up."""
    path = Path(__file__).resolve().parent.parent / TABLE
    with gzip.open(path, "rt") as f:
        rows = [r for r in csv.DictReader(f)
                if r["backend"] == backend and int(r["num_gpus"]) == devices]  # fmt: skip
    sizes = sorted((int(r["message_size"]), float(r["latency"]) / 1e3) for r in rows)
    return next((s for n, s in sizes if n >= elements), sizes[-1][1])


def main(isl: str = "1024", conc: str = "4") -> int:
    key = f"_{isl}x"
    rows = [r for r in read_rows(shipped_serving_csv())
            if "llama_3_1_70b_b200_sxm_vllm" in r.id and key in r.id
            and f"_c{conc}_" in r.id]  # fmt: skip
    print(
        "| row | TP | measured TTFT | predicted | prefill(ISL) | prefill(1) | AR graph | "
        "AR eager | gap |"
    )
    print("| --- " * 9 + "|")
    steps: dict = {}
    for r in sorted(rows, key=lambda r: (r.get("precision"), int(r.get("tp_size")), r.id)):
        d = resolve(r)
        s = steps.setdefault((d.precision, d.tp), step_model(d))
        pred = predicted_ttft(s, d)
        n_ar = 2 * 80  # Llama-3.1-70B: 80 layers, an all-reduce after attention and after the MLP
        elems = d.input_len * 8192
        ar_g = n_ar * eager_seconds(d.tp, elems, "vllm_graph") if d.tp > 1 else 0.0
        ar_e = n_ar * eager_seconds(d.tp, elems, "vllm_eager") if d.tp > 1 else 0.0
        meas = r.measured_ms("ttft_ms") or 0.0
        print(f"| {r.id[11:60]} | {d.tp} | {meas:.1f} | {pred:.1f} | "
              f"{1e3 * s.prefill_seconds(d.input_len):.1f} | {1e3 * s.prefill_seconds(1):.1f} | "
              f"{1e3 * ar_g:.1f} | {1e3 * ar_e:.1f} | {meas - pred:.1f} |")  # fmt: skip
    return 0


def predicted_ttft(step, d) -> float:
    """The row's predicted TTFT (ms), as ``validate --measurements`` prices it."""
    from plena_opt.serving import ServingWorkload
    from plena_opt.serving.benchmark import fixed_length_run

    wl = ServingWorkload(d.concurrency, d.input_len, d.output_len, 0.8)
    return 1e3 * fixed_length_run(step.with_spread(0.8), wl).ttft_seconds


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
