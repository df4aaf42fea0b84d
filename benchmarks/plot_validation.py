"""Plot the accuracy scorecard: predicted vs measured, log-log, with the ±10 % band.

Run ``python benchmarks/plot_validation.py [docs/validation.png]`` (writes the PNG and prints
the per-model MAPE). Uses ``plena_opt.validate.run_scorecard``; matplotlib is a dependency.
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from plena_opt.validate import run_scorecard  # noqa: E402


def _tick(value: float, _pos: int) -> str:
    """A log-axis tick in plain numbers: 0.2, 5, 1,000, 20,000."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def main(out: str = "docs/validation.png") -> int:
    card = run_scorecard()
    scores = {(s.dataset, s.model): s for s in card.by_model()}
    fig, grid = plt.subplots(2, 3, figsize=(18, 11))
    axes = list(grid.flat)
    axes[-1].axis("off")
    panels = (
        ("fig09", "fig09: vLLM decode tokens/s, 8x B200, TP 8 (tokens/s)", 1.0),
        ("fig09_tpot", "fig09: time per output token under a burst of BS requests (ms)", 1e3),
        ("fig09_ttft", "fig09: per-request prompt tokens / TTFT under a burst (tokens/s)", 1.0),
        ("fig09_prefill", "fig09: system prefill tokens/s under a burst of BS requests", 1.0),
        ("fig08", "fig08: fused GEMM + collective kernels, 8x H100 (ms)", 1e3),
    )
    for ax, (ds, title, scale) in zip(axes, panels, strict=False):
        pts = [p for p in card.points if p.dataset == ds]
        lo = min(min(p.measured, p.predicted) for p in pts) * scale / 1.5
        hi = max(max(p.measured, p.predicted) for p in pts) * scale * 1.5
        x = np.geomspace(lo, hi, 50)
        ax.fill_between(x, x / 1.1, x * 1.1, color="0.85", label="±10 %")
        ax.plot(x, x, color="0.4", lw=1)
        for model in dict.fromkeys(p.model for p in pts):
            mp = [p for p in pts if p.model == model]
            s = scores[(ds, model)]
            ax.scatter(
                [p.measured * scale for p in mp],
                [p.predicted * scale for p in mp],
                label=f"{model} (MAPE {s.mape:.1f} %)",
                s=22,
            )
        overall = card.overall(ds)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
        for axis in (ax.xaxis, ax.yaxis):  # 1-2-5 labels in plain numbers (minor labels collided)
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(_tick))
            axis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{title}\nall {overall.points} points: MAPE {overall.mape:.1f} %", fontsize=9)
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted (plena-opt)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    for s in card.by_model():
        print(f"{s.dataset} {s.model}: {s.points} points, MAPE {s.mape:.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
