"""``plena-opt capacity --plot``: replicas per interval per GPU type, and cost per day."""

from __future__ import annotations

from typing import Any


def write_plot(plan: Any, path: str) -> None:
    """Two panels (matplotlib, Agg): top, the chosen deployment's GPUs per interval stacked by
    GPU type, with the request rate; bottom, $/day of every priced candidate, planned scaling
    against a fixed fleet for the peak."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = plan.chosen
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7.5))
    starts = [iv["start_hour"] for iv in plan.intervals]
    widths = [iv["hours"] for iv in plan.intervals]
    types = list(dict.fromkeys(t for i in range(len(starts)) for t in c.gpus_at(i)))
    base = [0] * len(starts)
    for t in types:
        heights = [c.gpus_at(i).get(t, 0) for i in range(len(starts))]
        top.bar(starts, heights, width=widths, bottom=base, align="edge", alpha=0.75,
                label=f"{t} GPUs")  # fmt: skip
        base = [b + h for b, h in zip(base, heights, strict=True)]
    top.set_xlabel("hour")
    top.set_ylabel(f"GPUs ({c.name})")
    top.set_xlim(0, plan.period_hours)
    rate_ax = top.twinx()
    rate_ax.step(
        starts + [plan.period_hours],
        [iv["requests_per_second"] for iv in plan.intervals]
        + [plan.intervals[-1]["requests_per_second"]],
        where="post",
        color="tab:red",
        label="requests/s",
    )
    rate_ax.set_ylabel("requests/s")
    rate_ax.set_ylim(bottom=0)
    h1, l1 = top.get_legend_handles_labels()
    h2, l2 = rate_ax.get_legend_handles_labels()
    top.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    top.set_title(
        f"{plan.request.model}: cheapest deployment {c.name}, ${c.usd_per_day:,.0f}/day",
        fontsize=10,
    )
    priced = [k for k in plan.candidates if k.priced]
    priced += [plan.mix] if plan.mix is not None and plan.mix.priced else []
    xs = range(len(priced))
    bottom.bar(
        [x - 0.2 for x in xs],
        [k.usd_per_day for k in priced],
        width=0.4,
        label="scaled per interval",
    )
    bottom.bar(
        [x + 0.2 for x in xs],
        [k.fixed_fleet_usd_per_day for k in priced],
        width=0.4,
        label="fixed fleet for the peak",
    )
    bottom.set_xticks(list(xs), [k.name for k in priced], rotation=30, ha="right", fontsize=8)
    bottom.set_ylabel("$ per day")
    bottom.set_yscale("log")
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
