"""Print the markdown tables of benchmarks/README_gpu.md: scorecard and fitted constants.

``python benchmarks/scorecard_tables.py`` — regenerate after a recalibration.
"""

from __future__ import annotations

import re

from plena_opt.chip import load_chip
from plena_opt.validate import run_scorecard

TITLES = {
    "fig09": "fig09 (vLLM, 8x B200, TP 8, 1k/1k, BS 1–512, decode tokens/s)",
    "fig09_prefill": "fig09 prefill (same runs, `System Prefill TPS`, chunked-prefill replay)",
    "fig09_ttft": "fig09 TTFT (same runs, `User Prefill Speed` = mean 1,024 / TTFT)",
    "fig09_tpot": "fig09 TPOT (same runs, 1 / `User Decode Speed`, burst replay to the end)",
    "fig08": "fig08 (fused kernels, 8x H100)",
}


def scorecard_table() -> str:
    card = run_scorecard()
    out = ["| dataset | model / kernel | points | MAPE % | bias % | worst % |"]
    out.append("| --- | --- | --- | --- | --- | --- |")
    for ds in dict.fromkeys(p.dataset for p in card.points):
        where = "BS" if ds.startswith("fig09") else "row"
        first = True
        for s in [s for s in card.by_model() if s.dataset == ds] + [card.overall(ds)]:
            name = f"**{s.model}**" if s.model == "all" else s.model
            mape = f"**{s.mape:.2f}**" if s.model == "all" else f"{s.mape:.2f}"
            label = TITLES[ds] if first else ""
            first = False
            out.append(
                f"| {label} | {name} | {s.points} | {mape} | {s.bias:+.2f} | "
                f"{s.worst:+.1f} ({where} {s.worst_batch}) |"
            )
        for key, why in card.skipped.items():
            if key.startswith(ds + "/"):
                out.append(f"| | {key.split('/', 1)[1]} | — | skipped: {why} | | |")
    return "\n".join(out)


def _fmt(k: str, v: float) -> str:
    if k == "fixed_seconds":
        return f"{k} {v * 1e6:.3g} µs"
    if k.startswith("seconds_per"):
        return f"{k} {v * 1e9:.3g} ns"
    return f"{k} {v:.4g}"


def constants_table() -> str:
    out = ["| chip | curve | fitted constants | fitted on (rows; per-kernel MAPE) |"]
    out.append("| --- | --- | --- | --- |")
    for name in ("h100-sxm", "h200-sxm", "b200"):
        d = load_chip(name).describe()
        curves = [(f"gemm.{f}", c) for f, c in d["gemm"].items()]
        curves += [(f"moe.{f}", c) for f, c in d["moe"].items()]
        curves += [(f"moe_prefill.{f}", c) for f, c in d["moe_prefill"].items()]
        curves += [(k, d[k]) for k in ("attention_decode", "attention_prefill")]
        for cname, c in curves:
            src = next(v for v in c.values() if v is not None)["source"]
            m = re.search(r"fitted on (\S+)(.*?)\((\d+) rows; per-kernel MAPE ([\d.]+) %", src)
            consts = ", ".join(_fmt(k, v["value"]) for k, v in c.items() if v is not None)
            out.append(
                f"| {name} | {cname} | {consts} | `{m.group(1)}` {m.group(2).strip()} "
                f"({m.group(3)}; {m.group(4)} %) |"
            )
    return "\n".join(out)


if __name__ == "__main__":
    print(scorecard_table())
    print()
    print(constants_table())
