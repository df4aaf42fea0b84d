"""Speed of the memory model's hot paths: profile loading, price_stage, PhaseTotals, quantize.

Run: ``.venv/bin/python benchmarks/bench_memory.py`` (figures in benchmarks/README_memory.md).
"""

from __future__ import annotations

import timeit

import numpy as np

from plena_opt.memory import PhaseTotals, load_memory, price_stage


def _per_call(stmt, number: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number


def main() -> None:
    stacked = load_memory("fictional-stacked-dram")
    fixed = load_memory("fictional-fixed-bandwidth")
    reads = {"weights": 2.3e8, "kv_cache": 4.7e7, "activation_spill": 0.0}
    writes = {"kv_cache": 3.1e4}
    t_load = _per_call(lambda: load_memory("fictional-stacked-dram"), 200)
    print(f"load_memory(stacked builtin): {t_load * 1e6:8.1f} us")
    t_layers = _per_call(lambda: stacked.with_layers(12), 2000)
    print(f"with_layers(12):              {t_layers * 1e6:8.1f} us")
    for name, memory in (("stacked", stacked), ("fixed", fixed)):
        t = _per_call(lambda m=memory: price_stage(1.2e6, reads, writes, m, 1e9), 20000)
        print(f"price_stage ({name:7}):        {t * 1e6:8.2f} us")
    stage = price_stage(1.2e6, reads, writes, stacked, 1e9)

    def totals() -> None:
        phase = PhaseTotals.for_memory(stacked)
        for _ in range(100):
            phase.add(stage, 32)
        phase.freeze()

    print(f"PhaseTotals 100 adds+freeze:  {_per_call(totals, 2000) * 1e6:8.1f} us")
    values = np.random.default_rng(0).uniform(0, 1e9, 1_000_000)
    t_vec = _per_call(lambda: stacked.quantize_array(values), 20)
    t_loop = _per_call(lambda: [stacked.quantize_bytes(v) for v in values[:10000]], 5) * 100
    print(f"quantize 1e6 transfers:       numpy {t_vec * 1e3:6.2f} ms, loop {t_loop * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
