"""A scored point as the search keeps it: plan, metric summary, objective and constraint values.

The same record is written into each Optuna trial (params = plan choices, user attributes = full
plan and metrics, service-conventions §1.1) and rebuilt from stored trials when a study resumes, so
no plan is scored twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plena_opt.estimate.cost import COST_FIELDS
from plena_opt.metrics import METRICS
from plena_opt.search.result import FrontEntry
from plena_opt.search.space.objectives import Constraints, Objective
from plena_opt.search.space.space import Point

POINT_ATTR = "point_key"
PLAN_ATTR = "plan"
METRICS_ATTR = "metrics"
# serving under load (issue 23): the static-batch figures and the under-load block of a summary
LOAD_FIELDS = ("static_ttft_ms", "static_tps", "static_tps_per_sequence", "under_load")
# registry figures a front entry takes from the summary by name alone (the rest are passed below)
_DECLARED_ONLY = {m.field for m in METRICS} & set(FrontEntry.model_fields) - {
    "ttft_ms", "tps", "tps_per_sequence", "energy_j_per_token", "tps_per_device", *COST_FIELDS,
}  # fmt: skip


def summarise_metrics(m: Any) -> dict[str, Any]:
    """JSON-safe summary of a ``PlanMetrics`` (ms, tokens/s, J/token, bytes)."""
    energy = m.energy_per_token_joules
    attribution = getattr(m, "attribution", None) or {}
    plan = getattr(m, "plan", None)
    devices = getattr(plan, "world_size", None)
    loaded = getattr(m, "under_load", None)
    extra = {} if loaded is None else {**m.static_figures, "under_load": loaded}
    summary = {
        **extra,
        "ttft_ms": float(m.ttft_seconds) * 1e3,
        "tps": float(m.tps),
        "tps_per_device": None if not devices else float(m.tps) / devices,
        "tps_per_sequence": float(m.tps_per_sequence),
        "energy_j_per_token": None if energy is None else float(energy),
        "weight_bytes_per_device": float(m.weight_bytes_per_device),
        "kv_cache_bytes_per_device": float(m.kv_cache_bytes_per_device),
        "fits_in_memory": None if m.fits_in_memory is None else bool(m.fits_in_memory),
        "bottleneck": None if m.bottleneck is None else str(m.bottleneck),
        "attribution_s": {str(k): float(v) for k, v in dict(attribution).items()},
        "warnings": [str(w) for w in (m.warnings or [])],
    }
    return summary | {k: v for k, v in _declared(m).items() if k not in summary}


def _declared(m: Any) -> dict[str, float]:
    """The registry's figures (``plena_opt.metrics``) that ``m`` carries beyond the ones
    summarised by name (e.g. ``e2e_seconds`` under load), under their stored ``field``."""
    out: dict[str, float] = {}
    for metric in METRICS:
        value = getattr(m, metric.name, None)
        if value is not None:
            out[metric.field] = float(value) * metric.scale
    return out


class _MetricView:
    """Attribute view over a summary so objectives/constraints read stored and fresh alike."""

    def __init__(self, s: dict[str, Any]) -> None:
        self.ttft_seconds = s["ttft_ms"] / 1e3
        self.tps = s["tps"]
        self.tps_per_sequence = s["tps_per_sequence"]
        self.energy_per_token_joules = s["energy_j_per_token"]
        self.weight_bytes_per_device = s["weight_bytes_per_device"]
        self.kv_cache_bytes_per_device = s["kv_cache_bytes_per_device"]
        self.fits_in_memory = s["fits_in_memory"]
        tpd = s.get("tps_per_device")
        self.tps_per_device = math.nan if tpd is None else tpd
        self.max_batch = s.get("max_batch")
        self.batch_size = s.get("batch_size")
        self.usd_per_million_output_tokens = s.get("usd_per_million_output_tokens")
        for m in METRICS:  # the other declared figures, in SI
            if not hasattr(self, m.name):
                setattr(self, m.name, m.to_si(s.get(m.field)))


@dataclass
class Record:
    """One scored point: ``values`` in study order/directions, ``constraints`` ≤ 0 feasible."""

    point: Point
    summary: dict[str, Any]
    values: tuple[float, ...]
    constraints: dict[str, float]
    trial_number: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        point: Point,
        summary: dict[str, Any],
        objectives: tuple[Objective, ...],
        constraints: Constraints,
    ) -> Record:
        view = _MetricView(summary)
        values = tuple(o.value(view) for o in objectives)
        return cls(point, summary, values, constraints.values(view))

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values()) and self.valid

    @property
    def valid(self) -> bool:
        return all(math.isfinite(v) for v in self.values)

    def minimised(self, objectives: tuple[Objective, ...]) -> np.ndarray:
        return np.array([o.sign * v for o, v in zip(objectives, self.values, strict=True)])

    def user_attrs(self) -> dict[str, Any]:
        return {
            POINT_ATTR: self.point.key,
            PLAN_ATTR: self.point.to_dict(),
            "label": self.point.label(),
            METRICS_ATTR: self.summary,
            "memory_bytes_per_device": self.summary["weight_bytes_per_device"]
            + self.summary["kv_cache_bytes_per_device"],
            "feasible": self.feasible,
            "constraints": dict(self.constraints),
        }

    def entry(self) -> FrontEntry:
        s = self.summary
        declared = {m.field: s.get(m.field) for m in METRICS if m.field in _DECLARED_ONLY}
        return FrontEntry(
            **declared,
            plan=self.point.to_dict(),
            label=self.point.label(),
            ttft_ms=s["ttft_ms"],
            tps=s["tps"],
            tps_per_sequence=s["tps_per_sequence"],
            energy_j_per_token=s["energy_j_per_token"],
            weight_bytes_per_device=s["weight_bytes_per_device"],
            kv_cache_bytes_per_device=s["kv_cache_bytes_per_device"],
            memory_bytes_per_device=s["weight_bytes_per_device"] + s["kv_cache_bytes_per_device"],
            fits_in_memory=s["fits_in_memory"],
            bottleneck=s["bottleneck"],
            constraints=dict(self.constraints),
            warnings=list(s.get("warnings", [])),
            trial_number=self.trial_number,
            tps_per_device=s.get("tps_per_device"),
            max_batch=s.get("max_batch"),
            capacity_bound=s.get("capacity_bound"),
            **{k: s.get(k) for k in COST_FIELDS},
            **{k: s.get(k) for k in LOAD_FIELDS},
        )
