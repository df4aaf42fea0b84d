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
        k = math.floor(a / self.period)
        lo, hi = a - k * self.period, b - k * self.period
        first = bisect.bisect_right(self.starts, lo)
        vals = self.values[first : bisect.bisect_right(self.starts, hi)]
        if hi >= self.period:  # the window runs into the next period
            vals = vals + self.values[: bisect.bisect_right(self.starts, hi - self.period)]
        return pick([self.at(a), *vals])


def _segments(starts: Sequence[float], period: float, delay: float) -> list[float]:
    """Breakpoints of the planned and reactive fleets: the starts and the starts ± delay."""
    cuts = {0.0, period}
    for s in starts:
        for c in (s, s - delay, s + delay):
            cuts.add(c % period)
    return sorted(cuts)


@dataclass(frozen=True)
class Pool:
    """Replicas of one deployment in a fleet: ``gpus`` each at ``usd_per_gpu_hour``, serving
    ``per_replica[i]`` requests/s in interval ``i``, ``replicas[i]`` of them needed there."""

    gpus: int
    usd_per_gpu_hour: float
    per_replica: Sequence[float]
    replicas: Sequence[int]


def fleet_costs(starts: Sequence[float], rates: Sequence[float], per_replica: Sequence[float],
                replicas: Sequence[int], *, period: float, gpus: int, usd_per_gpu_hour: float,
                delay_hours: float) -> dict[str, FleetCost]:  # fmt: skip
    """``planned``, ``reactive`` and ``fixed`` (module docstring) for one deployment."""
    pool = Pool(gpus, usd_per_gpu_hour, per_replica, replicas)
    return pool_costs(starts, rates, [pool], period=period, delay_hours=delay_hours)


def pool_costs(starts: Sequence[float], rates: Sequence[float], pools: Sequence[Pool], *,
               period: float, delay_hours: float) -> dict[str, FleetCost]:  # fmt: skip
    """As ``fleet_costs`` for a fleet of several pools (a mix): each pool is planned, ordered
    and released on its own; requests are split over the serving replicas in proportion to what
    each serves (a split of a Poisson stream stays Poisson), so an interval meets the SLA while
    ``Σ ready · per_replica ≥ rate``. The fixed fleet holds each pool's most replicas."""
    steps = [_Steps(starts, p.replicas, period) for p in pools]
    rate_at = _Steps(starts, range(len(starts)), period)  # type: ignore[arg-type]
    days = period / 24.0
    cuts = _segments(starts, period, delay_hours)
    planned = reactive = served = total = 0.0
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid, dur = (a + b) / 2, b - a
        i = rate_at.at(mid)
        capacity = 0.0
        for p, st in zip(pools, steps, strict=True):
            usd = p.gpus * p.usd_per_gpu_hour
            planned += dur * usd * st.over(mid, mid + delay_hours, max)
            reactive += dur * usd * st.at(mid)
            ready = st.over(mid - delay_hours, mid, min) if delay_hours > 0 else st.at(mid)
            capacity += ready * p.per_replica[i]
        total += rates[i] * dur
        served += rates[i] * dur if capacity >= rates[i] * (1 - 1e-12) else 0.0
    fixed = sum(p.gpus * p.usd_per_gpu_hour * max(p.replicas) for p in pools) * period
    share = served / total if total > 0 else 1.0
    # GPU-hours: dollars / $ per GPU-hour of each pool, so price the hours per pool as well
    hours = _gpu_hours(pools, steps, cuts, delay_hours)
    return {
        "planned": FleetCost(hours[0] / days, planned / days, 1.0),
        "reactive": FleetCost(hours[1] / days, reactive / days, share),
        "fixed": FleetCost(sum(p.gpus * max(p.replicas) for p in pools) * period / days,
                           fixed / days, 1.0),
    }  # fmt: skip


def _gpu_hours(pools: Sequence[Pool], steps: Sequence[_Steps], cuts: Sequence[float],
               delay_hours: float) -> tuple[float, float]:  # fmt: skip
    """(planned, reactive) GPU-hours over the period."""
    planned = reactive = 0.0
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid, dur = (a + b) / 2, b - a
        for p, st in zip(pools, steps, strict=True):
            planned += dur * p.gpus * st.over(mid, mid + delay_hours, max)
            reactive += dur * p.gpus * st.at(mid)
    return planned, reactive
