"""Rendering a ``SearchResult``: text table, JSON, CSV and a matplotlib (Agg) front plot."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from plena_opt.search.hypervolume import REFERENCE
from plena_opt.search.result import FrontEntry, SearchResult

CSV_FIELDS = (
    "label",
    "tp",
    "ep",
    "dp",
    "pp",
    "cp",
    "moe_tp_mode",
    "comm_overlap",
    "batch_size",
    "ttft_ms",
    "tps",
    "tps_per_sequence",
    "energy_j_per_token",
    "weight_bytes_per_device",
    "kv_cache_bytes_per_device",
    "memory_bytes_per_device",
    "fits_in_memory",
    "bottleneck",
    "trial_number",
    "tps_per_device",
    "max_batch",
    "capacity_bound",
)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f}"


def _energy(e: float | None) -> str:
    return "n/a" if e is None else f"{e:.4g}"


def _max_batch(e: FrontEntry) -> str:
    if e.max_batch is None:
        return "-"
    return f"{e.max_batch}{'*' if e.capacity_bound else ''}"


def front_table(entries: list[FrontEntry]) -> str:
    """Fixed-width table: plan, batch, TTFT ms, TPS, TPS/seq, TPS/dev, J/token, GiB/device,
    the capacity-bound batch (``*``: this batch is capacity-bound), bottleneck."""
    head = (
        "plan",
        "batch",
        "TTFT ms",
        "TPS",
        "TPS/seq",
        "TPS/dev",
        "J/token",
        "GiB/dev",
        "max batch",
        "bottleneck",
    )
    rows = [
        (
            e.label.rsplit(" b", 1)[0],
            str(e.plan["batch_size"]),
            f"{e.ttft_ms:.2f}",
            f"{e.tps:.1f}",
            f"{e.tps_per_sequence:.2f}",
            "-" if e.tps_per_device is None else f"{e.tps_per_device:.2f}",
            _energy(e.energy_j_per_token),
            _gib(e.memory_bytes_per_device),
            _max_batch(e),
            e.bottleneck or "-",
        )
        for e in entries
    ]
    last = len(head) - 1
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, last) else c.rjust(w)
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
        out.append(f"Pareto front ({len(result.front)} plans, by TPS):")
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
    if result.infeasible:
        out.append("infeasible: " + ", ".join(f"{k} {v}" for k, v in result.infeasible.items()))
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
# the front's display units (ms, J/token). Key → (JSON key, factor dividing the value).
_SI_KEYS = {
    "ttft_ms": ("ttft_seconds", 1e3),
    "energy_j_per_token": ("energy_per_token_joules", 1.0),
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
    return doc


def render_json(result: SearchResult) -> str:
    return json.dumps(result_document(result), indent=2)


def write_csv(result: SearchResult, path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for e in result.front:
            row = {**e.plan, **e.model_dump(exclude={"plan", "constraints", "warnings"})}
            w.writerow({k: row.get(k) for k in CSV_FIELDS})


PLOT_FORMATS = ("png", "svg", "pdf")


def plot_front(result: SearchResult, path: str | Path) -> None:
    """TTFT (ms) vs TPS of the front, coloured by J/token (Agg backend, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    sla = bool(result.serving.get("sla")) and all(
        e.tps_per_device is not None for e in result.front
    )
    if sla:  # the serving view: speed per user against throughput per device
        xs = [e.tps_per_sequence for e in result.front]
        ys = [e.tps_per_device for e in result.front]
    else:
        xs = [e.ttft_ms for e in result.front]
        ys = [e.tps for e in result.front]
    energies = [e.energy_j_per_token for e in result.front]
    if result.front and all(v is not None for v in energies):
        sc = ax.scatter(xs, ys, c=energies, cmap="viridis")
        fig.colorbar(sc, ax=ax, label="energy per token [J]")
    else:
        ax.scatter(xs, ys)
    for e, x, y in zip(result.front, xs, ys, strict=True):
        ax.annotate(e.label, (x, y), fontsize=6, alpha=0.7)
    if sla:
        ax.set_xlabel("tokens/s per user (1000 / TPOT ms)")
        ax.set_ylabel("tokens/s per device")
    else:
        ax.set_xlabel("TTFT [ms]")
        ax.set_ylabel("decode throughput [tokens/s]")
    ax.set_title(f"Pareto front: {result.study_name}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
