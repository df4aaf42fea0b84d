"""Speed of the chip model: profile loading and the PerfModel operator formulas.

Run: ``.venv/bin/python benchmarks/bench_chip.py`` (figures in benchmarks/README_chip.md).
"""

from __future__ import annotations

import timeit

from plena_opt.chip import PerfModel, load_chip
from plena_opt.models import load_model


def _per_call(stmt, number: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number


def main() -> None:
    t = _per_call(lambda: load_chip({"config": {"BLEN": 64}}), 200)
    print(f"load_chip(dict override):          {t * 1e6:8.1f} us")
    t = _per_call(lambda: load_chip(), 20000)
    print(f"load_chip() (cached built-in):     {t * 1e6:8.2f} us")
    chip = load_chip()
    t = _per_call(lambda: PerfModel(chip), 2000)
    print(f"PerfModel(chip):                   {t * 1e6:8.1f} us")
    p = PerfModel(chip)
    calls = {
        "rms_layer prefill": lambda: p.rms_layer(4096, 2048, 4, "prefill"),
        "projection prefill": lambda: p.projection(4096, 32, 8, 128, 2048, 4, "prefill"),
        "flash_attention prefill": lambda: p.flash_attention(32, 8, 128, 2048, 2048, 4, "prefill"),
        "flash_attention decode": lambda: p.flash_attention(32, 8, 128, 1, 2048, 4, "decode"),
        "flash_attention_decode_tc": lambda: p.flash_attention_decode_tc(32, 8, 128, 4),
        "sliding_window_attention decode": lambda: p.sliding_window_attention(
            64, 8, 64, 1, 2048, 4, 128, 1, "decode"
        ),
        "feed_forward decode": lambda: p.feed_forward(4096, 14336, 1, 4, "decode"),
        "mlp_moe prefill": lambda: p.mlp_moe(2880, 2048, 4, 32, 4, 2880, "prefill"),
        "I('M_MM')": lambda: p.I("M_MM"),
    }
    for name, fn in calls.items():
        print(f"{name + ':':35}{_per_call(fn, 100000) * 1e6:8.2f} us")
    model = load_model("llama-3.1-8b")
    t = _per_call(lambda: load_model("llama-3.1-8b"), 20000)
    print(f"load_model (cached built-in):      {t * 1e6:8.2f} us")
    del model


if __name__ == "__main__":
    main()
