"""Scored serving deployments as arrays (``Points``): objectives, SLA mask, fronts, subsets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.disaggregated import ServingFigures, WorkerFigures
from plena_opt.search.fronts.pareto_large import front_indices
from plena_opt.search.space.space import Point

SERVING_OBJECTIVES = {  # key -> (sign for minimisation, getter on a figures array dict)
    "ttft": (1.0, "ttft_seconds"),
    "tps-per-device": (-1.0, "tps_per_device"),
    "tps-per-user": (-1.0, "tps_per_user"),
    "tps-per-seq": (-1.0, "tps_per_user"),
    "energy": (1.0, "energy_j_per_token"),
}
# SI like every machine format: seconds, tokens/s, J/token (tables show ms).
FIGURES = ("ttft_seconds", "tpot_seconds", "tps_per_device", "tps_per_user", "energy_j_per_token")


def check_objectives(keys: Sequence[str]) -> list[str]:
    for k in keys:
        if k not in SERVING_OBJECTIVES:
            raise PlenaInputError(
                "objectives",
                f"objective {k!r} is not a serving objective; with --serving choose from "
                f"{', '.join(SERVING_OBJECTIVES)}",
            )
    return list(keys)


@dataclass
class Points:
    """Scored deployments as arrays (one entry per deployment) plus a description of each."""

    figures: dict[str, np.ndarray]
    feasible: np.ndarray
    describe: Any  # callable(i) -> dict
    evaluated: int = 0
    feasible_total: int | None = None  # feasible deployments scored (None: ``feasible.sum()``)

    @property
    def feasible_count(self) -> int:
        return int(self.feasible.sum()) if self.feasible_total is None else self.feasible_total

    def __len__(self) -> int:
        return len(self.feasible)

    def minimised(self, objectives: Sequence[str]) -> np.ndarray:
        cols = []
        for k in objectives:
            sign, name = SERVING_OBJECTIVES[k]
            cols.append(sign * self.figures[name])
        return np.stack(cols, axis=1) if cols else np.zeros((len(self), 0))


PAIR_CHUNK = 200_000  # pairs scored at once when only the front is kept


def feasible_front(points: Points, objectives: Sequence[str]) -> np.ndarray:
    """Indices of the feasible Pareto front of ``points``."""
    feas = np.flatnonzero(points.feasible)
    if not len(feas):
        return feas
    return feas[front_indices(points.minimised(objectives)[feas])]


def subset(points: Points, idx: np.ndarray) -> Points:
    """The deployments ``idx`` of ``points`` (descriptions built now)."""
    docs = [points.describe(int(i)) for i in idx]
    figs = {k: v[idx] for k, v in points.figures.items()}
    return Points(figs, points.feasible[idx], lambda i: dict(docs[i]), len(idx))


def concat(parts: Sequence[Points]) -> Points:
    """One ``Points`` of several (descriptions by offset)."""
    if not parts:
        return Points({k: np.zeros(0) for k in FIGURES}, np.zeros(0, bool), lambda i: {}, 0)
    offsets = np.cumsum([0] + [len(p) for p in parts])
    figs = {k: np.concatenate([p.figures[k] for p in parts]) for k in parts[0].figures}

    def describe(i: int) -> dict:
        j = int(np.searchsorted(offsets, i, side="right")) - 1
        return parts[j].describe(i - int(offsets[j]))

    feas = np.concatenate([p.feasible for p in parts])
    return Points(figs, feas, describe, sum(p.evaluated for p in parts))


def sla_mask(a: dict[str, np.ndarray], sla: dict) -> np.ndarray:
    """Deployments meeting ``sla`` (``sla_dict``: seconds, tokens/s)."""
    ok = np.ones(len(a["ttft_seconds"]), dtype=bool)
    if sla.get("max_ttft_seconds") is not None:
        ok &= a["ttft_seconds"] <= sla["max_ttft_seconds"]
    if sla.get("max_tpot_seconds") is not None:
        ok &= a["tpot_seconds"] <= sla["max_tpot_seconds"]
    if sla.get("min_tps_per_seq") is not None:
        ok &= a["tps_per_user"] >= sla["min_tps_per_seq"]
    return ok


# -- descriptions of deployments (JSON-ready, SI) --------------------------------------------
def _point(w: WorkerFigures) -> Point:
    return Point(w.plan, w.batch, w.precision)


def _plan_doc(w: WorkerFigures) -> dict:
    return _point(w).to_dict()


def _worker_label(w: WorkerFigures) -> str:
    return f"{w.plan.label()} b{w.batch}" + ("" if w.precision is None else f" {w.precision}")


def agg_doc(w: WorkerFigures, f: ServingFigures) -> dict:
    """The description of an aggregated deployment (its plan, devices, interference)."""
    return {
        "serving": "aggregated",
        "label": _worker_label(w),
        "key": _point(w).key,
        "plan": _plan_doc(w),
        "devices": f.devices,
        "interference_seconds_per_token": f.interference_s_per_token,
    }


def pair_doc(p: WorkerFigures, d: WorkerFigures, x: int, y: int, xs: float, a, k) -> dict:
    """The description of ``x`` prefill workers ``p`` and ``y`` decode workers ``d``."""
    return {
        "serving": "disaggregated",
        "label": f"{x}P[{_worker_label(p)}] {y}D[{_worker_label(d)}]",
        "key": f"{x}P:{_point(p).key}+{y}D:{_point(d).key}",
        "prefill": {**_plan_doc(p), "workers": x},
        "decode": {**_plan_doc(d), "workers": y},
        "devices": x * p.devices + y * d.devices,
        "kv_transfer_seconds": float(xs),
    }
