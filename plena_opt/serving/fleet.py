"""Replicas over a load curve, and what scaling them per interval costs against a fixed fleet.

One deployment (``gpus`` per replica) serves at most ``mu_i`` requests/s per replica within the
SLA in interval ``i`` (``sla_rate.max_rate`` at that interval's lengths). The interval needs
``r_i = max(min_replicas, ⌈λ_i / mu_i⌉)`` replicas. With ``r(t)`` that step function over the
period (the curve repeats: a day follows a day) and a scale-up delay ``d`` (a new replica serves
``d`` after it is ordered; a replica is released at once):

* **planned** (the plan priced and picked): the curve is a forecast, so replicas are ordered
  ``d`` before they are needed. At time ``t`` the fleet holds (and pays for) ``max r(s)`` over
  ``s ∈ [t, t + d]``: the interval before a rise already holds the new replicas, booting or idle,
  and every request is served within the SLA.
* **reactive** (reported beside it): replicas are ordered when the interval needing them starts;
  the fleet pays for ``r(t)`` but only ``min r(s)`` over ``s ∈ [t − d, t]`` are serving. Requests
  arriving while the serving replicas are fewer than ``λ_i / mu_i`` count as missing the SLA
  (all of them: the queue is then past the SLA at its percentile).
* **fixed**: ``max_i r_i`` replicas all period.

``slo_attainment`` = requests arriving while the serving replicas meet the SLA / all requests
(1.0 for a day without requests). GPU-hours and dollars are per day (a week's divided by 7).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from plena_opt.errors import PlenaInputError


@dataclass(frozen=True)
class FleetCost:
    """GPU-hours and USD per day of one policy and its SLO attainment (0–1)."""

    gpu_hours_per_day: float
    usd_per_day: float
    slo_attainment: float


def replicas_needed(
    rates: Sequence[float], per_replica: Sequence[float], min_replicas: int
) -> list[int]:
    """``r_i`` per interval; raises naming ``sla`` when an interval with requests has a zero
    per-replica rate (the SLA cannot be met there by any number of replicas)."""
    out = []
    for i, (lam, mu) in enumerate(zip(rates, per_replica, strict=True)):
        if lam > 0 and mu <= 0:
            raise PlenaInputError("sla", f"interval {i + 1}: no replica meets the SLA")
        need = math.ceil(lam / mu * (1 - 1e-12)) if lam > 0 else 0
        out.append(max(min_replicas, need))
    return out


class _Steps:
    """A step function over a repeating period: value ``r[i]`` from ``starts[i]``."""

    def __init__(self, starts: Sequence[float], values: Sequence[int], period: float) -> None:
        self.starts, self.values, self.period = list(starts), list(values), period

    def at(self, t: float) -> int:
        t %= self.period
        return self.values[bisect.bisect_right(self.starts, t) - 1]

    def over(self, a: float, b: float, pick: type[max] | type[min]) -> int:
        """``pick`` (max or min) of the values on [a, b] (b − a below one period)."""
        vals = [self.at(a)]
        k = math.floor(a / self.period)
        lo, hi = a - k * self.period, b - k * self.period
        for shift in (0.0, self.period):
            for s, v in zip(self.starts, self.values, strict=True):
                if lo < s + shift <= hi:
                    vals.append(v)
        return pick(vals)


def _segments(starts: Sequence[float], period: float, delay: float) -> list[float]:
    """Breakpoints of the planned and reactive fleets: the starts and the starts ± delay."""
    cuts = {0.0, period}
    for s in starts:
        for c in (s, s - delay, s + delay):
            cuts.add(c % period)
    return sorted(cuts)


def fleet_costs(
    starts: Sequence[float],
    rates: Sequence[float],
    per_replica: Sequence[float],
    replicas: Sequence[int],
    *,
    period: float,
    gpus: int,
    usd_per_gpu_hour: float,
    delay_hours: float,
) -> dict[str, FleetCost]:
    """``planned``, ``reactive`` and ``fixed`` (module docstring) for one deployment."""
    steps = _Steps(starts, replicas, period)
    rate_at = _Steps(starts, range(len(starts)), period)  # type: ignore[arg-type]
    days = period / 24.0
    cuts = _segments(starts, period, delay_hours)
    planned = reactive = 0.0
    served = total = 0.0
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid, dur = (a + b) / 2, b - a
        i = rate_at.at(mid)
        planned += dur * steps.over(mid, mid + delay_hours, max)
        reactive += dur * steps.at(mid)
        ready = steps.over(mid - delay_hours, mid, min) if delay_hours > 0 else steps.at(mid)
        requests = rates[i] * dur
        total += requests
        served += requests if ready * per_replica[i] >= rates[i] * (1 - 1e-12) else 0.0
    price = gpus * usd_per_gpu_hour / days
    fixed_hours = max(replicas) * period
    reactive_share = served / total if total > 0 else 1.0
    return {
        "planned": FleetCost(gpus * planned / days, price * planned, 1.0),
        "reactive": FleetCost(gpus * reactive / days, price * reactive, reactive_share),
        "fixed": FleetCost(gpus * fixed_hours / days, price * fixed_hours, 1.0),
    }
