"""Decompose measured − predicted TTFT of ``plena-opt validate --measurements shipped --json``.

Usage::

    plena-opt validate --measurements shipped --json > v.json
    python benchmarks/ttft_gap_decomposition.py v.json [--max-concurrency 8]

Prints, for the aggregated rows at concurrency ≤ the bound (rows whose gap exceeds 1 s left
out: the DeepSeek-R1 SGLang FP4 stalls), the median gap per (model, GPU, engine, lengths) beside
the predicted TPOT and one prompt's predicted prefill (``StepModel.prefill_seconds(isl)``); the
least-squares fits of the gap (weighted by 1 / measured TTFT) on the drawn-length rows per GPU
against (1, TPOT), (1, TPOT, prefill) and (1, TPOT, prefill, TP); and a per-engine request-path
constant (the 1/measured-weighted median of the gap) fitted on one GPU or all models but one and
scored on the rest (benchmarks/README_serving.md, r10ttft).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

ENGINES = ("vllm", "sglang", "trtllm")


def rows_of(path: str) -> list[dict]:
    """Priced rows with a measured TTFT, joined with the CSV's columns."""
    from plena_opt.validate.serving_score import shipped_serving_csv

    meta = {r["id"]: r for r in csv.DictReader(open(shipped_serving_csv()))}
    out = []
    for r in json.load(open(path))["rows"]:
        if r["status"] != "priced" or not r["measured_ttft_ms"]:
            continue
        m = meta[r["id"]]
        r = dict(r, c=int(r["concurrency"]), tp=int(m["tp_size"] or 0),
                 drawn=bool(m["measured_on"]), gpu=r["system"][:4],
                 short=r["model"].split("/")[-1])  # fmt: skip
        r["gap"] = r["measured_ttft_ms"] - r["ttft_ms"]
        r["err"] = r["ttft_ms"] / r["measured_ttft_ms"] - 1
        out.append(r)
    return out


def add_prefill(rows: list[dict]) -> None:
    """Each aggregated row's one-prompt prefill (ms) from its step model."""
    from plena_opt.validate.aic_deploy import generated_batch
    from plena_opt.validate.serving_rows import read_rows, resolve
    from plena_opt.validate.serving_score import cached_step, shipped_serving_csv

    want, steps = {r["id"]: r for r in rows if r["mode"] == "agg"}, {}
    for row in read_rows(shipped_serving_csv()):
        if row.id in want:
            d = replace(resolve(row), generated_batch=generated_batch(row))
            if d.pp == 1:
                want[row.id]["p1"] = 1e3 * cached_step(d, steps, {}).prefill_seconds(d.input_len)


def fit(rows: list[dict], cols: list) -> np.ndarray:
    x = np.array([[c(r) for c in cols] for r in rows])
    y, w = np.array([r["gap"] for r in rows]), 1 / np.array([r["measured_ttft_ms"] for r in rows])
    return np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0]


def constant(rows: list[dict]) -> dict[str, float]:
    """Per engine: the 1/measured-weighted median of the gap, at least 0 (ms)."""
    out = {}
    for eng in ENGINES:
        rs = sorted((r for r in rows if r["backend"] == eng), key=lambda r: r["gap"])
        w = np.cumsum([1 / r["measured_ttft_ms"] for r in rs])
        out[eng] = max(0.0, rs[int(np.searchsorted(w, w[-1] / 2))]["gap"]) if rs else 0.0
    return out


def mape(rows: list[dict], add: dict[str, float]) -> str:
    e = [(r["ttft_ms"] + add.get(r["backend"], 0.0)) / r["measured_ttft_ms"] - 1 for r in rows]
    return f"{100 * np.mean(np.abs(e)):.1f} / {100 * np.mean(e):+.1f}"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("validate_json")
    ap.add_argument("--max-concurrency", type=int, default=8)
    a = ap.parse_args(argv)
    rows = rows_of(a.validate_json)
    add_prefill(rows)
    low = [r for r in rows if r["c"] <= a.max_concurrency and r["gap"] < 1000 and "p1" in r]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in low:
        groups[(r["short"], r["gpu"], r["backend"], "drawn" if r["drawn"] else "fixed")].append(r)
    print("model gpu engine lengths | rows | gap | TPOT | p1 | gap/p1 | gap/TPOT (medians, ms)")
    for k, rs in sorted(groups.items()):
        med = lambda f, rs=rs: statistics.median(f(r) for r in rs)  # noqa: E731
        print(" ".join(k), f"| {len(rs)} | {med(lambda r: r['gap']):.1f} | "
              f"{med(lambda r: r['tpot_ms']):.1f} | {med(lambda r: r['p1']):.1f} | "
              f"{med(lambda r: r['gap'] / r['p1']):.2f} | "
              f"{med(lambda r: r['gap'] / r['tpot_ms']):.2f}")  # fmt: skip
    one, tpot = (lambda r: 1.0), (lambda r: r["tpot_ms"])
    p1, tp = (lambda r: r["p1"]), (lambda r: r["tp"])
    for gpu in ("b200", "h100"):
        rs = [r for r in low if r["drawn"] and r["gpu"] == gpu]
        for cols, name in (([one, tpot], "1, TPOT"), ([one, tpot, p1], "1, TPOT, p1"),
                           ([one, tpot, p1, tp], "1, TPOT, p1, TP")):  # fmt: skip
            print(f"{gpu} drawn c<={a.max_concurrency} ({len(rs)} rows) gap on {name}:",
                  np.round(fit(rs, cols), 3))  # fmt: skip
    agg = [r for r in rows if r["mode"] == "agg"]
    c = constant(agg)
    print(f"request-path constant fitted on all rows (ms): {c}: {mape(agg, {})} -> {mape(agg, c)}")
    for key, values in (("gpu", ("h100", "b200")), ("short", sorted({r["short"] for r in agg}))):
        for v in values:
            train = [r for r in agg if r[key] != v]
            test = [r for r in agg if r[key] == v]
            c = constant(train)
            print(f"held out {v}: fitted {({k: round(x, 1) for k, x in c.items()})} "
                  f"TTFT MAPE / bias {mape(test, {})} -> {mape(test, c)}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
