"""Time of one single-chip estimate (llama-3.1-70b, fictional stacked DRAM, batch 4, input 2048)
at output lengths 16, 1024 and 32768 (issue 2): decode is summed with numpy over the steps, so
the cost grows far slower than the output length.

``python benchmarks/bench_single_chip.py [--json]``; each figure is the median of 7 runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from plena_opt.estimate import estimate_decoder_latency
from plena_opt.memory import load_memory
from plena_opt.models import load_model

OUTPUTS = (16, 1024, 32768)


def time_estimate(output_seq_len: int, runs: int = 7) -> float:
    model, memory = load_model("llama-3.1-70b"), load_memory("fictional_stacked_dram")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        estimate_decoder_latency(
            model, memory, batch_size=4, input_seq_len=2048, output_seq_len=output_seq_len
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {f"seconds_output_{n}": time_estimate(n) for n in OUTPUTS}
    result["ratio_32768_over_16"] = result["seconds_output_32768"] / result["seconds_output_16"]
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:24} {v:.6f}")


if __name__ == "__main__":
    main()
