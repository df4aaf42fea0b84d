"""How measured TTFT grows with the output length, and what prefill the drawn-length rows imply.

Usage::

    plena-opt validate --measurements shipped --json > v.json
    python benchmarks/ttft_output_slope.py v.json

Part 1 (fixed-length grids): for each (model, engine, version, TP, ISL, C) with three output
lengths, the least-squares slope ``b`` of measured TTFT against the measured decode time
``osl × TPOT`` (ms/ms), printed as ``b·C``: 1 means a request waits one completion interval
(``E2E / C``) more per unit of output, 0 means TTFT does not depend on the output length.
Part 2 (drawn lengths, C ≤ 8): the prefill each row implies if everything else we price is right,
``measured − (predicted − p1)``, over one prompt's predicted prefill ``p1``
(``StepModel.prefill_seconds(isl)``), medians by (model, GPU, engine, ISL, TP).
benchmarks/README_serving.md, r10ttft2.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ttft_gap_decomposition import add_prefill, rows_of  # noqa: E402


def slopes(rows: list[dict]) -> None:
    """Part 1: ``b·C`` per fixed-length group, then its median per (model, C band)."""
    import csv

    from plena_opt.validate.serving_score import shipped_serving_csv

    ver = {r["id"]: r["backend_version"] for r in csv.DictReader(open(shipped_serving_csv()))}
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if not r["drawn"] and r["mode"] == "agg":
            key = (r["short"], r["backend"], ver[r["id"]], r["tp"], int(r["isl"]), r["c"])
            groups[key].append((int(r["osl"]) * r["measured_tpot_ms"], r["measured_ttft_ms"]))
    summary: dict[tuple, list] = defaultdict(list)
    print("model engine version TP ISL C: b*C, intercept ms, measured TTFT by osl")
    for key in sorted(groups):
        pts = sorted(groups[key])
        if len(pts) < 3:
            continue
        b, a = np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)
        print(*key, f": {b * key[5]:+.2f} {a:.0f}", " ".join(f"{p[1]:.0f}" for p in pts))
        band = "<=8" if key[5] <= 8 else "9-32" if key[5] <= 32 else ">32"
        summary[(key[0], key[1], key[2], band)].append(b * key[5])
    print("\nmedian b*C (groups):")
    for k in sorted(summary):
        print(*k, f"{statistics.median(summary[k]):+.2f} ({len(summary[k])})")


def implied_prefill(rows: list[dict]) -> None:
    """Part 2: implied / predicted one-prompt prefill, drawn-length rows at C ≤ 8."""
    rs = [r for r in rows if r["mode"] == "agg" and r["drawn"] and r["c"] <= 8 and r["gap"] < 1e3]
    add_prefill(rs)
    groups: dict[tuple, list] = defaultdict(list)
    for r in rs:
        if "p1" in r:
            implied = r["measured_ttft_ms"] - (r["ttft_ms"] - r["p1"])
            groups[(r["short"], r["gpu"], r["backend"], int(r["isl"]), r["tp"])].append(
                (implied / r["p1"], r["p1"], r["measured_ttft_ms"], r["ttft_ms"])
            )
    print("\nmodel GPU engine ISL TP rows: implied/p1, p1, measured, predicted (ms, medians)")
    for k in sorted(groups):
        v = groups[k]
        med = [statistics.median(x[i] for x in v) for i in range(4)]
        print(*k, len(v), ": {:.2f} {:.0f} {:.0f} {:.0f}".format(*med))


if __name__ == "__main__":
    rows = rows_of(sys.argv[1])
    slopes(rows)
    implied_prefill(rows)
