"""``plena-opt capacity --mixed``: the cheapest mix of the priced candidates in each interval.

In every interval, ``search.serving.pool_mix.cheapest_mix`` (an exact branch and bound over integer
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

The measured error's interval (``api.capacity_bounds``) carries over: at each end of it the same
exact per-interval mix is solved again on each candidate's requests/s per replica at that end
(``Candidate.max_rate_per_replica_at_end``) and planned the same way, giving the mix's replicas per
interval, GPU-hours and $/day at the low (optimistic) and high (pessimistic) end. A candidate
without a measured group enters neither end (``interval_left_out``); when the nominal mix uses
one, the mix has no interval (``interval_note`` says which), as a single deployment without a
measured group has none.
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
    # the measured error's interval: the mix at each end (module docstring), or why none
    interval_group: str | None = None
    interval_note: str | None = None
    interval_left_out: list[str] = field(default_factory=list)
    replicas_low: list[dict[str, int]] | None = None
    replicas_high: list[dict[str, int]] | None = None
    gpu_hours_per_day_low: float | None = None
    gpu_hours_per_day_high: float | None = None
    usd_per_day_low: float | None = None
    usd_per_day_high: float | None = None

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
    """The per-interval cheapest mix of the priced ``cands`` over ``curve``, with its interval."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.search.serving.pool_mix import METHOD

    mix = MixedCandidate(method=METHOD)
    ok = [c for c in cands if c.priced]
    if not ok:
        mix.infeasible = "no single candidate meets the SLA all day"
        return mix
    mix.gpu_of = {c.name: c.gpu for c in ok}
    mix.tp_of = {c.name: c.tp for c in ok}
    try:
        mix.counts = interval_mixes(ok, {c.name: c.max_rate_per_replica for c in ok}, curve,
                                    min_replicas)  # fmt: skip
    except PlenaInputError as exc:
        mix.infeasible = exc.rule
        return mix
    p, r, f = _costs(ok, {c.name: c.max_rate_per_replica for c in ok}, mix.counts, curve,
                     delay_min)  # fmt: skip
    mix.gpu_hours_per_day, mix.usd_per_day, mix.slo_attainment = (
        p.gpu_hours_per_day, p.usd_per_day, p.slo_attainment)  # fmt: skip
    mix.fixed_fleet_usd_per_day = _fixed_mix_usd_per_day(ok, mix.counts, curve, f.usd_per_day)
    mix.reactive_usd_per_day, mix.reactive_slo_attainment = r.usd_per_day, r.slo_attainment
    _bound_mix(mix, ok, curve, min_replicas, delay_min)
    return mix


def interval_mixes(ok: list[Any], rates: dict[str, list[float]], curve: Any,
                   min_replicas: int) -> list[dict[str, int]]:  # fmt: skip
    """Per interval, the replicas of each candidate (by name; only those with some) of the
    cheapest mix serving the interval's output tokens/s when candidate ``c`` serves
    ``rates[c.name][i]`` requests/s per replica there, filled up to ``min_replicas`` with the
    candidate cheapest per replica-hour. Raises naming ``sla`` when no mix serves an interval."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.search.serving.pool_mix import PoolOption, cheapest_mix

    filler = min(ok, key=lambda c: (c.tp * c.usd_per_gpu_hour, c.name))
    out = []
    for i, iv in enumerate(curve.intervals):
        osl = max(1, round(iv.output_tokens))
        opts = [PoolOption(c.name, c.tp, c.usd_per_gpu_hour, rates[c.name][i] * osl)
                for c in ok if rates[c.name][i] > 0]  # fmt: skip
        best = cheapest_mix(opts, iv.rate_per_s * osl) if opts else None
        if best is None and iv.rate_per_s > 0:
            raise PlenaInputError("sla", f"interval {i + 1}: no mix of replicas meets the SLA")
        counts = {k: v for k, v in (best.replicas if best else {}).items() if v > 0}
        short = min_replicas - sum(counts.values())
        if short > 0:
            counts[filler.name] = counts.get(filler.name, 0) + short
        out.append(counts)
    return out


def _costs(ok: list[Any], rates: dict[str, list[float]], counts: list[dict[str, int]],
           curve: Any, delay_min: float) -> tuple[Any, Any, Any]:  # fmt: skip
    """(planned, reactive, fixed) ``FleetCost`` of the mix ``counts`` at per-replica ``rates``."""
    from plena_opt.serving.fleet import Pool, pool_costs

    pools = [Pool(c.tp, c.usd_per_gpu_hour, rates[c.name],
                  [n.get(c.name, 0) for n in counts]) for c in ok]  # fmt: skip
    costs = pool_costs([iv.start_hour for iv in curve.intervals],
                       [iv.rate_per_s for iv in curve.intervals], pools,
                       period=curve.period_hours, delay_hours=delay_min / 60)  # fmt: skip
    return costs["planned"], costs["reactive"], costs["fixed"]


def _bound_mix(mix: MixedCandidate, ok: list[Any], curve: Any, min_replicas: int,
               delay_min: float) -> None:  # fmt: skip
    """The mix's interval (module docstring) or ``interval_note`` saying why it has none."""
    from plena_opt.errors import PlenaInputError

    bounded = [c for c in ok if {"low", "high"} <= set(c.max_rate_per_replica_at_end)]
    mix.interval_left_out = [c.name for c in ok if c not in bounded]
    used = sorted({name for n in mix.counts for name in n} & set(mix.interval_left_out))
    if used:
        why = next(c.interval_note for c in ok if c.name == used[0])
        mix.interval_note = f"no interval: the mix uses {', '.join(used)} ({why})"
        return
    mix.interval_group = ", ".join(sorted({g for c in bounded for g in
                                           str(c.interval_group).split(", ")}))  # fmt: skip
    found = {}
    for end in ("low", "high"):
        rates = {c.name: c.max_rate_per_replica_at_end[end] for c in bounded}
        try:
            counts = interval_mixes(bounded, rates, curve, min_replicas)
        except PlenaInputError as exc:
            mix.interval_group, mix.interval_note = None, f"at the interval's {end} end: {exc.rule}"
            return
        p = _costs(bounded, rates, counts, curve, delay_min)[0]
        found |= {f"replicas_{end}": counts, f"gpu_hours_per_day_{end}": p.gpu_hours_per_day,
                  f"usd_per_day_{end}": p.usd_per_day}  # fmt: skip
    for name, value in found.items():
        setattr(mix, name, value)


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
