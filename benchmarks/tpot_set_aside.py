"""TPOT / TTFT error of ``validate --measurements shipped``, known non-engine causes set aside.

Run ``plena-opt validate --measurements shipped --json > A.json`` (on each checkout to compare),
then ``python benchmarks/tpot_set_aside.py A.json [B.json ...]``. It prints MAPE / bias (%) of
the priced rows overall and by GPU, engine, model, concurrency band and (model, GPU, engine),
first over every row, then with three row sets aside that the engine model is not meant to
price (they are kept in ``validate``; nothing is refused on a measured value):

* ``client``: gpt-oss-120b on H100 vLLM at 512 clients (TTFT ~20 s, TPOT at the 4-client value:
  the benchmark client, not the engine, set the load);
* ``mtp-image``: DeepSeek-R1 TensorRT-LLM rows of the 1.2.0rc6.post3 image (InferenceX's
  2026-02-05/06 runs: the same deployments as the post2 rows at 1.6–2.2x lower TPOT, the mark of
  speculative decoding, which the file does not record);
* ``mtp-twin``: a DeepSeek-R1 row whose identical deployment (every size field, lengths,
  concurrency) has another row with a TPOT at least 1.2x higher (the faster run of a pair).

Numbers only; nothing is fitted here.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from plena_opt.validate.serving_score import shipped_serving_csv

DEPLOYMENT = ("model_path", "system", "backend", "precision", "gemm_quant_mode",
              "moe_quant_mode", "isl", "osl", "tp_size", "attention_dp_size", "moe_tp_size",
              "moe_ep_size", "concurrency", "batch_size")  # fmt: skip


def set_aside(src: dict[str, dict]) -> dict[str, str]:
    """Row id → why it is set aside (the module docstring's three sets)."""
    twins: dict[tuple, list[float]] = defaultdict(list)
    for s in src.values():
        if s["tpot_ms"]:
            twins[tuple(s[c] for c in DEPLOYMENT)].append(float(s["tpot_ms"]))
    out = {}
    for i, s in src.items():
        if "gpt-oss" in s["model_path"] and s["system"] == "h100_sxm" and s["concurrency"] == "512":
            out[i] = "client"
        elif "DeepSeek-R1" in s["model_path"] and s["tpot_ms"]:
            if s["backend"] == "trtllm" and s["backend_version"] == "1.2.0rc6.post3":
                out[i] = "mtp-image"
            elif 1.2 * float(s["tpot_ms"]) < max(twins[tuple(s[c] for c in DEPLOYMENT)]):
                out[i] = "mtp-twin"
    return out


def band(c: str) -> str:
    n = int(c)
    return "2-8" if n <= 8 else "9-32" if n <= 32 else "33-128" if n <= 128 else ">128"


def main(*files: str) -> int:
    with shipped_serving_csv().open(newline="") as fh:
        src = {r["id"]: r for r in csv.DictReader(fh)}
    aside = set_aside(src)
    runs = [{r["id"]: r for r in json.loads(Path(f).read_text())["rows"]
             if r["status"] == "priced"} for f in files]  # fmt: skip
    keys = {"all": lambda s: "all", "gpu": lambda s: s["system"], "engine": lambda s: s["backend"],
            "model": lambda s: s["model_path"], "band": lambda s: band(s["concurrency"]),
            "group": lambda s: " ".join((s["model_path"].split("/")[-1], s["system"],
                                         s["backend"]))}  # fmt: skip
    for title, skip in (("every priced row", set()), ("known causes set aside", set(aside))):
        print(f"== {title}  (per file: rows, TPOT MAPE / bias, TTFT MAPE / bias, %)")
        for name, key in keys.items():
            groups: dict[str, list[list]] = defaultdict(lambda: [[] for _ in runs])
            for j, rows in enumerate(runs):
                for i, r in rows.items():
                    if i not in skip:
                        groups[key(src[i])][j].append(r)
            for g in sorted(groups):
                cells = []
                for rows in groups[g]:
                    t = [r["tpot_ms"] / r["measured_tpot_ms"] - 1 for r in rows]
                    f = [r["ttft_ms"] / r["measured_ttft_ms"] - 1 for r in rows]
                    cells.append(f"{len(t):4d} {100 * statistics.mean(map(abs, t)):5.1f} "
                                 f"{100 * statistics.mean(t):+6.1f} "
                                 f"{100 * statistics.mean(map(abs, f)):5.1f} "
                                 f"{100 * statistics.mean(f):+6.1f}")  # fmt: skip
                print(f"{name:6s} {g:45s} | " + " | ".join(cells))
    counts: dict[str, int] = defaultdict(int)
    for i in runs[0]:
        counts[aside.get(i, "kept")] += 1
    print("priced rows by set:", dict(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
