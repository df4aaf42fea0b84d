"""Time of ``plena-opt capacity`` on the shipped diurnal example (issue 30: under 5 s).

Run: ``.venv/bin/python benchmarks/bench_capacity.py``. Llama-3.1-70B over H100, H200 and B200
(TP 1, 2, 4, 8 each; 24 hourly intervals), p90 TTFT <= 2 s and TPOT <= 50 ms, vLLM defaults:
``plan_capacity`` in a fresh process (cold: every evaluator call included) and again in the same
process, single deployments and with ``--mixed``. Each figure is the best of 3 repeats; the load
average is printed beside them.
"""

from __future__ import annotations

import os
import time

from plena_opt.api.capacity import CapacityRequest, plan_capacity
from plena_opt.serving.load_curve import example_curve_path


def _request(mixed: bool) -> CapacityRequest:
    return CapacityRequest(
        model="llama-3.1-70b",
        load=example_curve_path(),
        gpus=("h100-sxm", "h200-sxm", "b200"),
        max_ttft_ms=2000.0,
        max_tpot_ms=50.0,
        percentile="p90",
        scale_up_delay_min=10.0,
        mixed=mixed,
    )


def _seconds(mixed: bool) -> float:
    t = time.perf_counter()
    plan_capacity(_request(mixed))
    return time.perf_counter() - t


def main() -> None:
    cold = _seconds(False)
    warm = min(_seconds(False) for _ in range(3))
    mixed = min(_seconds(True) for _ in range(3))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"capacity, first call (cold)   {cold:.2f} s")
    print(f"capacity, again (best of 3)   {warm:.2f} s")
    print(f"capacity --mixed (best of 3)  {mixed:.2f} s")


if __name__ == "__main__":
    main()
