"""Check (not a fit) of the Llama-3.1-8B TensorRT-LLM grid's TTFT against "one slot short".

Run ``plena-opt validate --measurements shipped --json > v.json`` and then
``python benchmarks/ttft_one_slot_check.py v.json``. For the undated (AIConfigurator-generated)
TensorRT-LLM rows on H100 of Llama-3.1-8B-Instruct and Qwen3-32B it prints TTFT MAPE / bias (%)
by concurrency band as priced, and with ``osl × TPOT / (C − 1)`` added to each prediction (the
wait for the next completion when a server runs C − 1 of C closed-loop clients at a time; TPOT
the predicted one). Numbers only; nothing here is shipped in the model.
"""

from __future__ import annotations

import csv
import json
import sys

from plena_opt.validate.serving_score import shipped_serving_csv

BANDS = ((1, 8), (9, 16), (17, 64), (65, 1 << 20))
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B")


def _stats(errs: list[float]) -> str:
    return f"{100 * sum(map(abs, errs)) / len(errs):.1f} / {100 * sum(errs) / len(errs):+.1f}"


def main(path: str) -> int:
    with open(path) as f:
        rows = json.load(f)["rows"]
    with open(shipped_serving_csv()) as f:
        dated = {r["id"]: bool(r["measured_on"]) for r in csv.DictReader(f)}
    print("| model | C | rows | TTFT as priced | + osl × TPOT / (C − 1) |")
    print("| --- | --- | ---: | --- | --- |")
    for model in MODELS:
        for lo, hi in BANDS:
            now, slot = [], []
            for r in rows:
                ok = r["status"] == "priced" and r["model"] == model and not dated[r["id"]]
                if not (ok and r["system"] == "h100_sxm" and r["backend"] == "trtllm"):
                    continue
                c = int(r["concurrency"])
                if lo <= c <= hi and r["measured_ttft_ms"]:
                    wait = int(r["osl"]) * r["tpot_ms"] / (c - 1) if c > 1 else 0.0
                    now.append(r["ttft_ms"] / r["measured_ttft_ms"] - 1)
                    slot.append((r["ttft_ms"] + wait) / r["measured_ttft_ms"] - 1)
            if now:
                print(f"| {model} | {lo}–{hi} | {len(now)} | {_stats(now)} | {_stats(slot)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
