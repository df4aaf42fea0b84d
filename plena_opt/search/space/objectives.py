"""Search objectives and constraints over ``PlanMetrics`` (issue 5; service-conventions §1.1).

Objectives: the metrics of ``plena_opt.metrics`` that name an objective key (TTFT in ms, system
and per-sequence decode tokens/s, energy per generated token, tokens/s per device, USD per million
output tokens; direction and unit as declared there) and ``tps-per-user``.
Constraints are Optuna-style values: feasible when every value is ≤ 0
(``optuna/study/_constrained_optimization.py``); each is a relative excess.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.metrics import METRICS, Metric


@dataclass(frozen=True)
class Objective:
    """One objective: CLI ``key``, study metric ``name``, direction, a metric getter and the
    unit of the value it returns (what a study records for optuna-dashboard)."""

    key: str
    name: str
    direction: str  # "minimize" | "maximize"
    getter: Callable[[Any], float | None]
    unit: str = ""

    def value(self, metrics: Any) -> float:
        v = self.getter(metrics)
        return math.nan if v is None else float(v)

    @property
    def sign(self) -> float:
        """+1 for minimise, −1 for maximise (multiply to get a minimisation value)."""
        return 1.0 if self.direction == "minimize" else -1.0


def _from_metric(m: Metric) -> Objective:
    """The objective of a registry metric: its study name is the stored ``field`` (ms for TTFT)."""

    def getter(v: Any) -> float | None:
        return _stored(getattr(v, m.name, None), m.scale)

    return Objective(str(m.objective), m.field, m.direction, getter, m.field_unit)


def _stored(value: float | None, scale: float) -> float | None:
    return value if value is None or scale == 1.0 else value * scale


_DECLARED = {str(m.objective): _from_metric(m) for m in METRICS if m.objective}
# The one objective that is a view of another metric: the speed one user sees (issue 16), the
# per-sequence decode tokens/s (= 1000 / TPOT ms) under the name serving studies use.
TPS_PER_USER = Objective(
    "tps-per-user", "tps_per_user", "maximize", lambda m: m.tps_per_sequence, "tokens/s"
)
OBJECTIVES: dict[str, Objective] = {**_DECLARED, "tps-per-user": TPS_PER_USER}
DEFAULT_OBJECTIVES = ("ttft", "tps", "energy")


def parse_objectives(keys: Sequence[str] | str | None) -> tuple[Objective, ...]:
    """Objectives by key (comma list or sequence); unknown or repeated keys raise."""
    if keys is None:
        keys = DEFAULT_OBJECTIVES
    if isinstance(keys, str):
        keys = [k.strip() for k in keys.split(",") if k.strip()]
    if not keys:
        raise PlenaInputError("objectives", "objectives must name at least one objective")
    out: list[Objective] = []
    for k in keys:
        if k not in OBJECTIVES:
            raise PlenaInputError(
                "objectives", f"unknown objective {k!r}; choose from {', '.join(OBJECTIVES)}"
            )
        if OBJECTIVES[k] in out:
            raise PlenaInputError("objectives", f"objective {k!r} is given twice")
        out.append(OBJECTIVES[k])
    return tuple(out)


@dataclass(frozen=True)
class Constraints:
    """Feasibility rules: the plan fits in memory, plus optional SLAs.

    ``capacity_bytes`` is the per-device memory capacity (None: unknown → only ``fits_in_memory``);
    ``max_ttft_ms`` (ms), ``min_tps_per_seq`` (tokens/s per sequence), ``max_tpot_ms`` (ms per
    output token, 1000 / per-sequence TPS) and ``max_cost_per_mtok`` (USD per million output
    tokens) are SLAs. ``memory_fraction`` (serving-engine style
    memory budget) judges memory by the plan's capacity-bound batch instead (``max_batch``:
    weights + KV + activations within the fraction of capacity, ``plena_opt.estimate.capacity``).
    """

    capacity_bytes: float | None = None
    max_ttft_ms: float | None = None
    min_tps_per_seq: float | None = None
    max_tpot_ms: float | None = None
    memory_fraction: float | None = None
    max_cost_per_mtok: float | None = None

    def names(self) -> list[str]:
        names = ["memory"]
        if self.max_ttft_ms is not None:
            names.append("max_ttft")
        if self.min_tps_per_seq is not None:
            names.append("min_tps_per_seq")
        if self.max_tpot_ms is not None:
            names.append("max_tpot")
        if self.max_cost_per_mtok is not None:
            names.append("max_cost_per_mtok")
        return names

    def values(self, m: Any) -> dict[str, float]:
        """Constraint values for metrics ``m`` (≤ 0 feasible), relative to each limit."""
        out = {"memory": self._memory(m)}
        if self.max_ttft_ms is not None:
            out["max_ttft"] = (m.ttft_seconds * 1e3 - self.max_ttft_ms) / self.max_ttft_ms
        if self.min_tps_per_seq is not None:
            out["min_tps_per_seq"] = (
                self.min_tps_per_seq - m.tps_per_sequence
            ) / self.min_tps_per_seq
        if self.max_tpot_ms is not None:
            tpot = 1e3 / m.tps_per_sequence if m.tps_per_sequence > 0 else math.inf
            out["max_tpot"] = (tpot - self.max_tpot_ms) / self.max_tpot_ms
        if self.max_cost_per_mtok is not None:
            usd = m.usd_per_million_output_tokens
            usd = math.inf if usd is None else usd
            out["max_cost_per_mtok"] = (usd - self.max_cost_per_mtok) / self.max_cost_per_mtok
        return out

    def _memory(self, m: Any) -> float:
        max_batch = getattr(m, "max_batch", None)
        if self.memory_fraction is not None and max_batch is not None:
            # The batch against the largest that fits the budget (≤ 0 feasible).
            return (m.batch_size - max_batch) / max(max_batch, 1)
        fits = m.fits_in_memory
        if fits is None:  # capacity not modelled: nothing to violate
            return 0.0
        used = float(m.weight_bytes_per_device) + float(m.kv_cache_bytes_per_device)
        if self.capacity_bytes:
            v = used / float(self.capacity_bytes) - 1.0
        else:
            v = 0.0 if fits else 1.0
        # The evaluator's verdict is authoritative; the ratio only grades the violation.
        return min(v, 0.0) if fits else max(v, 1e-9)

    def violated(self, values: dict[str, float]) -> list[str]:
        return [k for k, v in values.items() if v > 0]
