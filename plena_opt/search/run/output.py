"""Rendering a ``SearchResult``: text table, JSON, CSV and a matplotlib (Agg) front plot."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plena_opt import metrics
from plena_opt.jsonio import dumps as strict_json
from plena_opt.search.fronts.hypervolume import REFERENCE
from plena_opt.search.result import FrontEntry, SearchResult
from plena_opt.search.serving.serving import BASIS_STATIC
from plena_opt.search.space.misses import miss_text

_E2E = metrics.BY_NAME["e2e_seconds"]  # its column: the declaration's heading and display unit
# The front as CSV: the plan, every registry metric (SI, with its ``_low``/``_high`` when it
# carries an interval; ``plena_opt.metrics``), then the plan's other figures.
CSV_FIELDS = (
    *("label", "tp", "ep", "dp", "pp", "cp", "moe_tp_mode", "comm_overlap", "batch_size"),
    *metrics.columns(),
    *("weight_bytes_per_device", "kv_cache_bytes_per_device", "memory_bytes_per_device"),
    *("fits_in_memory", "bottleneck", "trial_number", "max_batch", "capacity_bound", "precision"),
    *("interval_group", "interval_level", "interval_note", "robust", "cost_note", "key"),
    "moe_tp",  # an explicit MoE split (empty: moe_tp_mode's shorthand)
)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f}"


def _energy(e: float | None) -> str:
    return "n/a" if e is None else f"{e:.4g}"


def _max_batch(e: FrontEntry) -> str:
    if e.max_batch is None:
        return "-"
    return f"{e.max_batch}{'*' if e.capacity_bound else ''}"


def _e2e_cell(e: FrontEntry) -> str:
    """E2E under load in its declared display unit (``-``: the plan has none)."""
    v = _E2E.to_display(e.e2e_seconds)
    return "-" if v is None else f"{v:.2f}"


def _cost_cells(e: FrontEntry | None) -> tuple[str, ...]:
    """The cost columns' head (``e`` None) or cells: $/Mtok output, W per device."""
    if e is None:
        return ("$/Mtok", "W/dev")
    usd, w = e.usd_per_million_output_tokens, e.power_watts_per_device
    return ("-" if usd is None else f"{usd:.4g}", "-" if w is None else f"{w:.4g}")


def front_table(entries: list[FrontEntry]) -> str:
    """Fixed-width table: plan, batch, precision (when searched), TTFT ms, E2E ms (when any plan
    has it: under load), TPS, TPS/seq, TPS/dev, J/token, $/Mtok output and W/device (when any
    plan has them), GiB/device, the capacity-bound batch (``*``: this batch is
    capacity-bound), bottleneck."""
    with_prec = any("precision" in e.plan for e in entries)
    with_cost = any(e.power_watts_per_device is not None for e in entries)
    with_e2e = any(e.e2e_seconds is not None for e in entries)
    head = (
        "plan",
        "batch",
        *(("precision",) if with_prec else ()),
        "TTFT ms",
        *((_E2E.heading,) if with_e2e else ()),
        "TPS",
        "TPS/seq",
        "TPS/dev",
        "J/token",
        *(_cost_cells(None) if with_cost else ()),
        "GiB/dev",
        "max batch",
        "bottleneck",
        "key (plena-opt export KEY)",
    )
    rows = [
        (
            e.label.rsplit(" b", 1)[0],
            str(e.plan["batch_size"]),
            *((str(e.plan.get("precision", "-")),) if with_prec else ()),
            f"{e.ttft_ms:.2f}",
            *((_e2e_cell(e),) if with_e2e else ()),
            f"{e.tps:.1f}",
            f"{e.tps_per_sequence:.2f}",
            "-" if e.tps_per_device is None else f"{e.tps_per_device:.2f}",
            _energy(e.energy_j_per_token),
            *(_cost_cells(e) if with_cost else ()),
            _gib(e.memory_bytes_per_device),
            _max_batch(e),
            e.bottleneck or "-",
            e.key,
        )
        for e in entries
    ]
    last = len(head) - 1
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, last - 1, last) else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in [head, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if any(e.capacity_bound for e in entries):
        lines.append(
            "* capacity-bound: the next larger batch would not fit weights + KV + activations "
            "in the memory budget"
        )
    return "\n".join(lines)


def render_text(result: SearchResult) -> str:
    """Human summary: header, the front table ordered by TPS, quality and stop notes."""
    out = [
        f"study {result.study_name} ({result.storage}); sampler {result.sampler}; "
        f"{result.legal_points} legal plans, {result.evaluated} scored now, "
        f"{result.reused} reused from the study",
        f"objectives: {', '.join(f'{n} ({d[:3]})' for n, d in zip(result.metric_names, result.directions, strict=True))}; "  # noqa: E501
        f"constraints: {', '.join(result.constraints)}",
    ]
    if result.front:
        basis = BASIS_STATIC if result.under_load is None else _load_line(result.under_load)
        out.append(f"Pareto front ({len(result.front)} plans, by TPS; figures: {basis}):")
        out.append(front_table(result.front))
    if result.hypervolume is not None:
        k = len(result.objectives)
        line = (
            f"hypervolume {result.hypervolume:.4f} of at most {REFERENCE**k:.4f} (objectives "
            f"scaled to [0, 1] by the {result.hv_normalisation}, reference point {REFERENCE} each)"
        )
        if result.hv_ratio is not None:
            line += (
                f"; {100 * result.hv_ratio:.2f} % of the exact front's "
                f"({result.exact_front_size} plans)"
            )
        out.append(line)
    if result.front_recall is not None:
        found = round(result.front_recall * (result.exact_front_size or 0))
        igd = "n/a" if result.igd is None else f"{result.igd:.4f}"
        out.append(
            f"front recall {result.front_recall:.3f} ({found} of the exact front's "
            f"{result.exact_front_size} plans found); IGD {igd} (mean distance of the exact "
            "front to the found one, normalised objectives; 0 = all found)"
        )
    if result.infeasible:
        out.append("infeasible: " + ", ".join(f"{k} {v}" for k, v in result.infeasible.items()))
        out.extend(miss_text(k, m) for k, m in result.nearest_miss.items())
    if not result.front:
        out.append(f"warning: empty front: {no_front_message(result)}")
    if result.partial:
        out.append(f"partial result: search stopped ({result.stop_reason})")
    elif result.stop_reason:
        out.append(f"stopped: {result.stop_reason}")
    out.extend(f"warning: {w}" for w in result.warnings)
    return "\n".join(out)


def no_front_message(result: SearchResult) -> str:
    """Why the front is empty: the constraints and the least-violating plan found."""
    msg = f"no plan meets the constraints ({', '.join(result.constraints)})"
    best = result.best_infeasible
    if best is not None:
        broken = ", ".join(k for k, v in best.constraints.items() if v > 0)
        msg += (
            f"; best plan found: {best.label} (TTFT {best.ttft_ms:.2f} ms, TPS {best.tps:.1f},"
            f" {best.tps_per_sequence:.2f} tokens/s per sequence; violates {broken})"
        )
    return msg


# JSON is SI under the names PlanMetrics and gRPC use (README "Units and names"); the table keeps
# the front's display units (ms, J/token). Key → (JSON key, factor dividing the value): the
# registry's stored names (``plena_opt.metrics``) and the figures beside them.
_SI_KEYS = {
    **{m.field: (m.name, m.scale) for m in metrics.METRICS if m.field != m.name},
    "static_ttft_ms": ("static_ttft_seconds", 1e3),
    "elapsed_s": ("elapsed_seconds", 1.0),
}


def _si(doc: dict) -> dict:
    out = {}
    for key, value in doc.items():
        name, div = _SI_KEYS.get(key, (key, 1.0))
        out[name] = value / div if isinstance(value, float) and div != 1.0 else value
    return out


def result_document(result: SearchResult) -> dict:
    """The ``--json`` document of a search: SI units (seconds, joules per token)."""
    doc = _si(result.model_dump(mode="json"))
    doc["front"] = [_si(e) for e in doc["front"]]
    if doc.get("best_infeasible"):
        doc["best_infeasible"] = _si(doc["best_infeasible"])
    doc["empty_reason"] = None if result.front else no_front_message(result)
    doc["figures_basis"] = BASIS_STATIC  # the front's figures (the serving comparison's differ)
    if result.under_load is not None:  # issue 23: objectives and SLAs read the under-load ones
        doc["figures_basis"] = result.under_load["basis"]
    return doc


def render_json(result: SearchResult) -> str:
    return strict_json(result_document(result), indent=2)


def write_csv(result: SearchResult, path: str | Path) -> None:
    """The front as CSV (``CSV_FIELDS``, SI under the JSON's names, interval ends included), by
    TPS."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for e in result.front:
            row = {**e.plan, **_si(e.model_dump(exclude={"plan", "constraints", "warnings"}))}
            w.writerow({k: row.get(k) for k in CSV_FIELDS})


def write_csv_all(result: SearchResult, path: str | Path) -> int:
    """Every plan the search scored or reused, with ``feasible`` and ``on_front``; rows written."""
    front = {e.label for e in result.front}
    fields = (*CSV_FIELDS, "feasible", "on_front")
    rows = sorted(result.scored, key=lambda e: (-e.tps, e.label))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for e in rows:
            row = {**e.plan, **_si(e.model_dump(exclude={"plan", "constraints", "warnings"}))}
            row.update(feasible=e.feasible, on_front=e.label in front)
            w.writerow({k: row.get(k) for k in fields})
    return len(rows)


PLOT_FORMATS = ("png", "svg", "pdf")


def _plot_axes(result: SearchResult) -> tuple[Callable[[FrontEntry], Any], ...]:
    """(x of an entry, y of an entry, x label, y label): TTFT against TPS, or with a serving SLA
    speed per user against throughput per device."""
    sla = bool(result.serving.get("sla")) and all(
        e.tps_per_device is not None for e in result.front
    )
    if sla:
        return (
            lambda e: e.tps_per_sequence,
            lambda e: e.tps_per_device,
            "tokens/s per user (1 / TPOT s)",
            "tokens/s per device",
        )
    return (lambda e: e.ttft_ms, lambda e: e.tps, "TTFT [ms]", "decode throughput [tokens/s]")


def plot_front(result: SearchResult, path: str | Path, title: str | None = None) -> None:
    """Write ``draw_front``'s figure to ``path`` (png, svg or pdf)."""
    fig, _ = draw_front(result, title)  # selects the Agg backend before pyplot is imported
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=fig.dpi)
    plt.close(fig)


def draw_front(result: SearchResult, title: str | None = None) -> tuple[Any, list[Any]]:
    """(figure, label boxes in display pixels): TTFT (ms) vs TPS of every scored plan (with a
    serving SLA: tokens/s per user vs tokens/s per device), Agg backend, no display needed.

    Infeasible plans grey crosses, dominated feasible plans light dots, the front large and
    coloured by J/token (when known) with labels that avoid each other; an axis is logarithmic
    when its values span more than 10×. ``title`` (default: the study) names the problem.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fx, fy, xlabel, ylabel = _plot_axes(result)
    front = {e.label for e in result.front}
    rest = [e for e in result.scored if e.label not in front and fy(e) is not None]
    infeasible = [e for e in rest if not e.feasible]
    dominated = [e for e in rest if e.feasible]
    fig, ax = plt.subplots(figsize=(9, 6))
    if infeasible:
        ax.scatter([fx(e) for e in infeasible], [fy(e) for e in infeasible], marker="x", s=14,
                   c="0.75", linewidths=0.8, label=f"infeasible ({len(infeasible)})")  # fmt: skip
    if dominated:
        ax.scatter([fx(e) for e in dominated], [fy(e) for e in dominated], s=12,
                   c="tab:blue", alpha=0.25, label=f"dominated ({len(dominated)})")  # fmt: skip
    xs = [fx(e) for e in result.front]
    ys = [fy(e) for e in result.front]
    energies = [e.energy_j_per_token for e in result.front]
    if result.front and all(v is not None for v in energies):
        sc = ax.scatter(xs, ys, c=energies, cmap="viridis", s=60, edgecolors="k", zorder=3,
                        label=f"Pareto front ({len(xs)})")  # fmt: skip
        fig.colorbar(sc, ax=ax, label="energy per token [J] (front)")
    elif result.front:
        ax.scatter(xs, ys, s=60, c="tab:red", edgecolors="k", zorder=3, label="Pareto front")
    everything = [*rest, *result.front]
    for axis, values in (("x", [fx(e) for e in everything]), ("y", [fy(e) for e in everything])):
        pos = [v for v in values if v > 0]
        if pos and max(pos) > 10 * min(pos):
            (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or f"Pareto front: {result.study_name}", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig, _label_front(ax, result.front, fx, fy)  # after the layout: in figure pixels


LABEL_OFFSETS_PX = tuple(
    (dx * k, dy * k)
    for k in (1.0, 2.0, 3.0, 4.5)
    for dx, dy in ((10, 0), (-10, 0), (8, 9), (8, -9), (-8, 9), (-8, -9), (0, 12), (0, -12))
)
MARKER_CLEARANCE_PX = 7.0  # half the box around a front marker that no label may cover


def _label_front(
    ax: Any,
    front: list[FrontEntry],
    fx: Callable[[FrontEntry], Any],
    fy: Callable[[FrontEntry], Any],
) -> list[Any]:
    """Label front points; their boxes (display pixels). Each label takes the first position of
    a widening ring around its point (``LABEL_OFFSETS_PX``) whose box covers no earlier label and
    no front marker and lies inside the axes; failing that, the first position inside the axes."""
    if not front:
        return []
    from matplotlib.lines import Line2D
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox, IdentityTransform

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    pts = [(tuple(ax.transData.transform((fx(e), fy(e)))), e.label) for e in front]
    r = MARKER_CLEARANCE_PX
    blocked = [Bbox.from_extents(x - r, y - r, x + r, y + r) for (x, y), _ in pts]
    frame = ax.bbox
    boxes = []
    px_t = IdentityTransform()  # display pixels (the figure is saved at its own dpi)

    def inside(b: Bbox) -> bool:
        return frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1

    for (px, py), label in sorted(pts, key=lambda t: -t[0][1]):
        fallback = None
        for dx, dy in LABEL_OFFSETS_PX:
            text = ax.text(px + dx, py + dy, label, transform=px_t, fontsize=6.5,
                           ha="left" if dx >= 0 else "right", va="center")  # fmt: skip
            box = Text.get_window_extent(text, renderer)
            free = not any(box.overlaps(b) for b in blocked)
            if inside(box) and free:
                break
            if fallback is None and inside(box):
                fallback = (dx, dy, box)
            text.remove()
        else:
            dx, dy, box = fallback or (LABEL_OFFSETS_PX[0][0], 0.0, None)
            text = ax.text(px + dx, py + dy, label, transform=px_t, fontsize=6.5,
                           ha="left" if dx >= 0 else "right", va="center")  # fmt: skip
            box = Text.get_window_extent(text, renderer)
        blocked.append(box)
        boxes.append(box)
        if abs(dx) > LABEL_OFFSETS_PX[0][0] or abs(dy) > 0:  # moved away: a leader line back
            fig.add_artist(Line2D([px, px + dx], [py, py + dy], transform=px_t, lw=0.4, c="0.5"))
    return boxes


def _load_line(load: dict) -> str:
    """The front's basis under a serving workload (issue 23)."""
    what = (f"{load['concurrency']} concurrent clients" if load["concurrency"] is not None
            else f"Poisson {load['request_rate_per_s']:g} requests/s")  # fmt: skip
    return (f"under load ({what}, {load['engine']} {load['engine_version']}, TTFT and TPOT at "
            f"{load['percentile']}; {load['basis']}; static batch figures: static_* in "
            "--json)")  # fmt: skip
