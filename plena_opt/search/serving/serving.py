"""Serving decisions in the search (issue 16): KV-capacity batches, SLA at a percentile, goodput.

``CapacityCache`` resolves ``--batch-sizes auto`` and adds each scored point's capacity bound
(``max_batch``, ``capacity_bound``) to its summary; the bound depends on the plan's shape only,
so it is computed once per (tp, ep, dp, pp, cp, mode). ``judge_sla`` re-judges re-checked plans
at the asked percentile of the Monte Carlo distributions, and ``goodput`` reports the best
tokens/s/device of the plans that meet the SLA.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from plena_opt.estimate.capacity import (
    DEFAULT_MEMORY_FRACTION,
    CapacityBound,
    auto_batch_sizes,
    capacity_bound,
)
from plena_opt.search.result import FrontEntry, SearchResult
from plena_opt.search.space.space import Point

# What a figure is, in every table header and JSON document that shows one (issue 25): the
# search's analytic figures (one static batch, no arrivals), the serving comparison's steady state
# under load (prefills interrupt decoding; disaggregated pools rate-matched), the Monte Carlo
# re-check (noisy simulation of the plan, a percentile of its samples).
BASIS_STATIC = "model, static batch"
BASIS_UNDER_LOAD = "model, under load"
BASIS_MONTE_CARLO = "Monte Carlo re-check"
PERCENTILE_BASIS = f"{BASIS_MONTE_CARLO} (TTFT, TPOT); tokens/s/device {BASIS_STATIC}"


class CapacityCache:
    """Capacity bounds of plan shapes at the request's memory fraction."""

    def __init__(self, request: Any) -> None:
        self.auto = bool(request.auto_batch)
        frac = request.memory_fraction
        self.judges_memory = frac is not None or self.auto
        self.fraction = float(frac) if frac is not None else DEFAULT_MEMORY_FRACTION
        self._bounds: dict[tuple, CapacityBound | None] = {}

    def bound(self, ev: Any, plan: Any, precision: str | None = None) -> CapacityBound | None:
        """The plan's bound in ``precision`` (None when the evaluator is not the analytic
        ``Evaluator``, e.g. a test fake: the bound needs its ``ctx``, which ``PlanEvaluator``
        does not declare)."""
        key = (
            plan.tp,
            plan.ep,
            plan.dp,
            plan.pp,
            plan.cp,
            plan.moe_tp_mode,
            plan.moe_tp,
            precision,
        )
        if key not in self._bounds:
            ctx = getattr(ev, "ctx", None)
            if ctx is None:
                self._bounds[key] = None
            else:
                from plena_opt.estimate.distributed import PlanCost

                self._bounds[key] = capacity_bound(PlanCost(ctx, plan), self.fraction)
        return self._bounds[key]

    def batches(self, request: Any, evaluator: Callable[..., Any]) -> list[int]:
        """The batch sizes to search: the request's list, or ``auto`` (powers of two up to the
        largest capacity bound over the legal plans and searched precisions)."""
        if not self.auto or getattr(request, "concurrency", None) is not None:
            return request.batch_list()
        from plena_opt.search.space.space import PlanSpace

        bounds = []
        for prec in getattr(request, "precisions", None) or [None]:
            ev = evaluator(request.problem.batch_size, prec)
            shapes = PlanSpace(ev.num_devices, [request.problem.batch_size], ev.check).points
            bounds += [
                self.bound(ev, p.plan, prec) for p in shapes if p.plan.comm_overlap == "none"
            ]
        return auto_batch_sizes([b for b in bounds if b is not None])

    def summarise(
        self, ev: Any, point: Point, summary: dict[str, Any], batches: Sequence[int]
    ) -> dict[str, Any]:
        """``summary`` with ``batch_size``, ``max_batch`` and ``capacity_bound`` added."""
        summary["batch_size"] = point.batch_size
        pooled = (summary.get("under_load") or {}).get("pool_requests")
        if pooled is not None:  # under load: the requests its engine's KV pool holds at once
            summary["max_batch"], summary["capacity_bound"] = pooled, False
            return summary
        bound = self.bound(ev, point.plan, point.precision)
        if bound is None:
            return summary
        bigger = [b for b in batches if b > point.batch_size]
        summary["max_batch"] = bound.max_batch
        summary["capacity_bound"] = bound.bound_at(point.batch_size, bigger[0] if bigger else None)
        return summary


@dataclass(frozen=True)
class SlaVerdict:
    """One re-checked plan judged at a percentile: TTFT and TPOT (seconds) at that percentile."""

    label: str
    percentile: str
    ttft_seconds: float
    tpot_seconds: float
    tps_per_device: float | None
    meets: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "percentile": self.percentile,
            "ttft_seconds": self.ttft_seconds,
            "tpot_seconds": self.tpot_seconds,
            "tps_per_device": self.tps_per_device,
            "meets_sla": self.meets,
        }


def tail_figures(entry: FrontEntry, check: Any, percentile: str) -> tuple[float, float]:
    """(TTFT s, TPOT s) of a re-checked plan at ``percentile`` (slow side for both).

    TTFT at the percentile of its sampled distribution; TPOT = 1 / per-sequence TPS with the
    system TPS at the mirrored quantile (p90 → 10th percentile of TPS), scaled by the plan's own
    per-sequence / system ratio (micro-batch and pipeline depth do not change under noise).
    """
    serving = check.serving
    if percentile == "p50":
        ttft, tps = check.ttft_p50_seconds, check.tps_p50
    elif percentile == "p99":
        ttft, tps = check.ttft_p99_seconds, check.tps_p01
    else:
        ttft = serving.ttft.p90 if serving.ttft else check.ttft_p50_seconds
        tps = serving.tps_p10 if serving.tps_p10 is not None else check.tps_p50
    per_seq = entry.tps_per_sequence * tps / entry.tps if entry.tps > 0 else 0.0
    tpot = 1.0 / per_seq if per_seq > 0 else math.inf
    return float(ttft), tpot


def meets(ttft_s: float, tpot_s: float, request: Any) -> bool:
    """Whether (TTFT, TPOT) in seconds meet the request's SLA (its ``max_*_ms`` limits are ms;
    ``min_tps_per_seq`` is read as a TPOT bound)."""
    if request.max_ttft_ms is not None and ttft_s * 1e3 > request.max_ttft_ms:
        return False
    if request.max_tpot_ms is not None and tpot_s * 1e3 > request.max_tpot_ms:
        return False
    return not (request.min_tps_per_seq is not None and tpot_s > 1.0 / request.min_tps_per_seq)


def has_sla(request: Any) -> bool:
    return any(
        v is not None for v in (request.max_ttft_ms, request.max_tpot_ms, request.min_tps_per_seq)
    )


def judge_sla(result: SearchResult, checks: Sequence[Any], request: Any) -> list[SlaVerdict]:
    """Re-judge the re-checked front plans at ``request.percentile``."""
    out = []
    for entry, check in zip(result.front, checks, strict=False):
        ttft, tpot = tail_figures(entry, check, request.percentile)
        out.append(
            SlaVerdict(
                entry.label,
                request.percentile,
                ttft,
                tpot,
                entry.tps_per_device,
                meets(ttft, tpot, request),
            )
        )
    return out


def goodput(
    result: SearchResult, request: Any, verdicts: Sequence[SlaVerdict] = ()
) -> dict[str, Any]:
    """Goodput: the best tokens/s/device of the front plans meeting the SLA.

    ``analytic``: over the whole front (its plans meet the SLA analytically, it is a search
    constraint); ``at_percentile``: over the re-checked plans that still meet it at the asked
    percentile (None without a re-check). The plans giving each are named.
    """
    doc: dict[str, Any] = {"percentile": request.percentile, "sla": sla_dict(request)}
    doc["goodput_basis"] = BASIS_STATIC
    best = max(
        (e for e in result.front if e.tps_per_device is not None),
        key=lambda e: e.tps_per_device,
        default=None,
    )
    doc["goodput_tps_per_device"] = None if best is None else best.tps_per_device
    doc["goodput_plan"] = None if best is None else best.label
    ok = [v for v in verdicts if v.meets and v.tps_per_device is not None]
    if verdicts:
        top = max(ok, key=lambda v: v.tps_per_device, default=None)
        doc["goodput_at_percentile"] = None if top is None else top.tps_per_device
        doc["goodput_at_percentile_plan"] = None if top is None else top.label
        doc["verdicts"] = [v.to_dict() for v in verdicts]
        doc["goodput_at_percentile_basis"] = PERCENTILE_BASIS
    return doc


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1e3


def sla_dict(request: Any) -> dict[str, float | None]:
    """The request's SLA in SI (seconds, tokens/s per sequence), as the documents give it."""
    return {
        "max_ttft_seconds": _seconds(request.max_ttft_ms),
        "max_tpot_seconds": _seconds(request.max_tpot_ms),
        "min_tps_per_seq": request.min_tps_per_seq,
    }


def sla_text(sla: dict[str, float | None]) -> str:
    """The SLA for a table (ms as the flags), e.g. ``TTFT <= 500 ms, TPOT <= 20 ms``."""
    parts = []
    if sla.get("max_ttft_seconds") is not None:
        parts.append(f"TTFT <= {sla['max_ttft_seconds'] * 1e3:g} ms")
    if sla.get("max_tpot_seconds") is not None:
        parts.append(f"TPOT <= {sla['max_tpot_seconds'] * 1e3:g} ms")
    if sla.get("min_tps_per_seq") is not None:
        parts.append(f"tokens/s per sequence >= {sla['min_tps_per_seq']:g}")
    return ", ".join(parts) or "none"


def render_goodput(doc: dict[str, Any]) -> str:
    """Text lines: goodput analytic and at the percentile, and each verdict."""
    sla = sla_text(doc["sla"])
    lines = []
    g = doc.get("goodput_tps_per_device")
    if g is not None:
        lines.append(
            f"goodput (SLA {sla}): {g:.2f} tokens/s/device ({BASIS_STATIC}; {doc['goodput_plan']})"
        )
    if "verdicts" in doc:
        gp = doc.get("goodput_at_percentile")
        pct = doc["percentile"]
        lines.append(
            f"goodput at {pct} of the {BASIS_MONTE_CARLO} (TTFT, TPOT; tokens/s/device "
            f"{BASIS_STATIC}): "
            + (f"{gp:.2f} tokens/s/device ({doc['goodput_at_percentile_plan']})" if gp else "none")
        )
        for v in doc["verdicts"]:
            mark = "meets" if v["meets_sla"] else "misses"
            lines.append(
                f"    {v['label']}: Monte Carlo TTFT {pct} {v['ttft_seconds'] * 1e3:.2f} ms, "
                f"TPOT {pct} {v['tpot_seconds'] * 1e3:.3f} ms -> {mark} the SLA"
            )
    return "\n".join(lines)
