"""``plena-opt capacity --mixed``: the cheapest mix of the priced candidates in each interval.

In every interval, ``search.pool_mix.cheapest_mix`` (an exact branch and bound over integer
replica counts) picks the replicas of each candidate deployment — each serving its own most
requests/s within the SLA in that interval, weighted by the interval's output length so the
demand is in output tokens/s — that serve the interval's rate for the least $/hour. A router
splits requests over the replicas in proportion to what each serves (a split of a Poisson stream
stays Poisson, so each replica sees a rate it meets the SLA at). When the mix holds fewer than
``min_replicas`` replicas, replicas of the candidate cheapest per replica-hour fill it up. Each
candidate's replicas are then planned ahead of the scale-up delay like a single deployment's
(``serving.fleet.pool_costs``). The fixed fleet it is compared with is the cheapest of the
interval mixes that serves every interval (with one length profile: the peak's), else each
candidate's most replicas over the day.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MIXED = "mixed"


@dataclass
class MixedCandidate:
    """A per-interval mix of candidate deployments: ``counts[i]`` maps a candidate's name to its
    replicas in interval ``i`` (only those with some); ``gpu_of``/``tp_of`` name each candidate's
    GPU type and GPUs per replica. Figures as ``Candidate``'s; ``infeasible`` says why none."""

    name: str = MIXED
    method: str = ""
    counts: list[dict[str, int]] = field(default_factory=list)
    gpu_of: dict[str, str] = field(default_factory=dict)
    tp_of: dict[str, int] = field(default_factory=dict)
    infeasible: str | None = None
    gpu_hours_per_day: float | None = None
    usd_per_day: float | None = None
    slo_attainment: float | None = None
    fixed_fleet_usd_per_day: float | None = None
    reactive_usd_per_day: float | None = None
    reactive_slo_attainment: float | None = None
    skipped: None = None

    @property
    def priced(self) -> bool:
        return self.infeasible is None and self.usd_per_day is not None

    def replicas_at(self, i: int) -> dict[str, int]:
        return dict(self.counts[i])

    def gpus_at(self, i: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, r in self.counts[i].items():
            out[self.gpu_of[name]] = out.get(self.gpu_of[name], 0) + r * self.tp_of[name]
        return out

    def total_replicas(self) -> list[int]:
        return [sum(c.values()) for c in self.counts]


def price_mix(cands: list[Any], curve: Any, min_replicas: int, delay_min: float) -> MixedCandidate:
    """The per-interval cheapest mix of the priced ``cands`` over ``curve``."""
    from plena_opt.search.pool_mix import METHOD, PoolOption, cheapest_mix
    from plena_opt.serving.fleet import Pool, pool_costs

    mix = MixedCandidate(method=METHOD)
    ok = [c for c in cands if c.priced]
    if not ok:
        mix.infeasible = "no single candidate meets the SLA all day"
        return mix
    mix.gpu_of = {c.name: c.gpu for c in ok}
    mix.tp_of = {c.name: c.tp for c in ok}
    filler = min(ok, key=lambda c: (c.tp * c.usd_per_gpu_hour, c.name))
    for i, iv in enumerate(curve.intervals):
        osl = max(1, round(iv.output_tokens))
        opts = [PoolOption(c.name, c.tp, c.usd_per_gpu_hour, c.max_rate_per_replica[i] * osl)
                for c in ok if c.max_rate_per_replica[i] > 0]  # fmt: skip
        best = cheapest_mix(opts, iv.rate_per_s * osl)
        counts = {k: v for k, v in (best.replicas if best else {}).items() if v > 0}
        short = min_replicas - sum(counts.values())
        if short > 0:
            counts[filler.name] = counts.get(filler.name, 0) + short
        mix.counts.append(counts)
    pools = [Pool(c.tp, c.usd_per_gpu_hour, c.max_rate_per_replica,
                  [n.get(c.name, 0) for n in mix.counts]) for c in ok]  # fmt: skip
    costs = pool_costs([iv.start_hour for iv in curve.intervals],
                       [iv.rate_per_s for iv in curve.intervals], pools,
                       period=curve.period_hours, delay_hours=delay_min / 60)  # fmt: skip
    p, r, f = costs["planned"], costs["reactive"], costs["fixed"]
    mix.gpu_hours_per_day, mix.usd_per_day, mix.slo_attainment = (
        p.gpu_hours_per_day, p.usd_per_day, p.slo_attainment)  # fmt: skip
    mix.fixed_fleet_usd_per_day = _fixed_mix_usd_per_day(ok, mix.counts, curve, f.usd_per_day)
    mix.reactive_usd_per_day, mix.reactive_slo_attainment = r.usd_per_day, r.slo_attainment
    return mix


def _fixed_mix_usd_per_day(ok: list[Any], counts: list[dict[str, int]], curve: Any,
                           fallback: float) -> float:  # fmt: skip
    """$/day of the cheapest interval mix that serves every interval all period (``fallback``,
    each candidate's most replicas, when none does)."""
    best = fallback
    for mix in counts:
        if all(
            sum(mix.get(c.name, 0) * c.max_rate_per_replica[i] for c in ok)
            >= iv.rate_per_s * (1 - 1e-12)
            for i, iv in enumerate(curve.intervals)
        ):
            usd_h = sum(mix.get(c.name, 0) * c.tp * c.usd_per_gpu_hour for c in ok)
            best = min(best, usd_h * curve.period_hours / curve.days)
    return best
