"""Documents and text reports of simulations, shared by ``plena-opt simulate`` (local and remote)
and the gRPC server: the JSON document is built once, and the text is rendered from it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plena_opt.simulator.engine import (
    BUBBLE_DEFINITION,
    QuantileStats,
    duration_note,
    per_op_durations,
)


def schedule_document(res: Any, stage_ms: Mapping[str, float]) -> dict:
    """``--json`` document of a training-schedule simulation (``SimulationResult``, ms), with the
    per-stage durations given (``stage_ms``), the per-op durations simulated and how one maps onto
    the other (``durations.note``; interleaved chunk ops take F/v)."""
    doc = res.to_dict(include_ops=False)
    doc["durations"] = {
        "per_stage_ms": {k: float(v) for k, v in stage_ms.items()},
        "per_op_ms": per_op_durations(res.plan, stage_ms),
        "note": duration_note(res.plan),
    }
    return doc


def _pairs(d: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in d.items())


def serving_document(res: Any, plan: dict | None) -> dict:
    """``--json`` document of a serving simulation (``ServingResult``): figures, the window's
    deterministic makespan (s) and timeline summary, and the plan."""
    doc = res.to_dict()
    doc["makespan"] = res.window.makespan
    doc["plan"] = plan
    doc["window"] = res.window.to_dict(include_ops=False)
    return doc


def _fmt(q: dict | QuantileStats | None, scale: float = 1.0) -> str:
    """Mean, p50, p90 and p99 (marked as the slow tail: a latency's or a makespan's)."""
    if q is None:
        return "-"
    if isinstance(q, dict):
        q = QuantileStats(**q)
    return (
        f"mean {q.mean * scale:.4g} [{q.mean_ci[0] * scale:.4g}, {q.mean_ci[1] * scale:.4g}]  "
        f"p50 {q.p50 * scale:.4g}  p90 {q.p90 * scale:.4g}  "
        f"p99 slow {q.p99 * scale:.4g} [{q.p99_ci[0] * scale:.4g}, {q.p99_ci[1] * scale:.4g}]"
    )


def _fmt_tps(q: dict | QuantileStats | None, p01: float | None) -> str:
    """Throughput: mean, p50 and its slow tail p1 (the TPS at the p99 decode period); the high
    percentiles (the fast tail) stay in the JSON document."""
    if q is None:
        return "-"
    if isinstance(q, dict):
        q = QuantileStats(**q)
    tail = "" if p01 is None else f"  p1 slow {p01:.4g}"
    return f"mean {q.mean:.4g} [{q.mean_ci[0]:.4g}, {q.mean_ci[1]:.4g}]  p50 {q.p50:.4g}{tail}"


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def render_schedule(doc: dict, traces: list[str]) -> str:
    """Summary of a training-schedule simulation document (durations in ms)."""
    det, mc = doc["deterministic"], doc["monte_carlo"]
    rows = [
        (
            "schedule",
            f"{doc['schedule']} (pp={doc['pp']}, vpp={doc['vpp']}, "
            f"m={doc['microbatches']}, {doc['n_ops']} ops)",
        ),
    ]
    dur = doc.get("durations")
    if dur:
        text = f"{_pairs(dur['per_stage_ms'])} ms {dur['note']}"
        if dur["per_op_ms"] != dur["per_stage_ms"]:
            text += f" → per op {_pairs(dur['per_op_ms'])} ms"
        rows.append(("durations", text))
    rows += [
        ("makespan (deterministic)", f"{doc['makespan']:.6g} ms"),
        ("bubble ratio", f"{det['bubble_ratio']:.4f} (share {det['bubble_share']:.4f})"),
        ("per-rank idle", ", ".join(f"{x:.4g}" for x in det["rank_idle"]) + " ms"),
        ("critical path ops", str(len(det["critical_path"]))),
    ]
    if mc:
        rows += [
            ("samples / seed", f"{mc['n_samples']} / {mc['seed']}"),
            ("makespan (Monte Carlo)", _fmt(mc["makespan"]) + " ms"),
            (
                "criticality by op type",
                ", ".join(f"{k} {v:.3f}" for k, v in mc["criticality_by_type"].items()),
            ),
        ]
    rows += [("trace", ", ".join(traces))] if traces else []
    return _table(rows) + f"\n  ({BUBBLE_DEFINITION})"


def render_serving(
    doc: dict, traces: list[str], *, micro_batches: int, decode_steps: int, n_ops: int
) -> str:
    """Summary of a serving simulation document (seconds shown as ms)."""
    plan, ana, sim = doc.get("plan") or {}, doc["analytic"], doc["simulated"]
    rows = [
        ("plan", " ".join(f"{k}={plan[k]}" for k in ("tp", "ep", "dp", "pp", "cp") if k in plan)),
        ("window", f"{micro_batches} micro-batches x {decode_steps} decode steps, {n_ops} ops"),
        (
            "TTFT analytic / simulated",
            f"{ana['ttft_seconds'] * 1e3:.6g} / {sim['isolated_ttft_seconds'] * 1e3:.6g} ms "
            "(isolated request)",
        ),
        ("TTFT Monte Carlo (ms)", _fmt(doc["ttft"], 1e3)),
        ("TPS analytic / simulated", f"{ana['tps']:.6g} / {sim['steady_decode_tps']:.6g} tokens/s"),
        ("TPS Monte Carlo", _fmt_tps(doc["tps"], doc.get("tps_p01"))),
        ("window makespan", f"{doc['window']['makespan'] * 1e3:.6g} ms"),
        ("window bubble ratio", f"{doc['window']['deterministic']['bubble_ratio']:.4f}"),
    ]
    rows += [("note", c) for c in doc["causes"]]
    rows += [("trace", ", ".join(traces))] if traces else []
    return _table(rows)
