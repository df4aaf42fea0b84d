"""The measured error's interval carried into ``plena-opt capacity`` (issue 30 item 4).

A candidate's replicas are sized at the most requests/s one replica serves within the SLA
(``serving.sla_rate.max_rate``). The interval of the closest measured group — exactly the
candidate's (engine, GPU, concurrency band), ``serving.error_bars.measured_band`` — scales the
predicted TTFT and TPOT by ``[low, high]``; a prediction ``k`` times slower meets a bound ``B``
when the model's figure meets ``B / k``, so the worst end's per-replica rate is ``max_rate`` at the
SLA divided by the high ratios, and the best end's at the SLA divided by the low ones. Replicas,
GPU-hours and $/day follow at each end (``replicas_high``: what to provision to meet the SLA if
the model is as optimistic as the measurements allow).

The band: the measurements are closed loops of C clients; a replica at its Poisson rate ``μ`` holds
``μ × E2E`` requests on average (Little's law), the concurrency its band is looked up at. No
group at that exact (engine, GPU, band): no interval, and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plena_opt.errors import PlenaInputError


@dataclass(frozen=True)
class Profile:
    """One length profile a candidate was priced on: its step model, lengths (tokens), tail
    prompt length, KV sequences and the nominal per-replica rate (requests/s)."""

    step: Any
    isl: int
    osl: int
    tail: int | None
    max_seqs: int | None
    rate: float


def occupancy(p: Profile) -> int | None:
    """Mean requests a replica holds at its rate (Little's law: rate × mean E2E), ≥ 1."""
    from plena_opt.serving.open_loop import OpenLoopWorkload, open_loop

    if p.rate <= 0:
        return None
    try:
        e2e = open_loop(p.step, OpenLoopWorkload(p.rate, p.isl, p.osl)).e2e_seconds
    except PlenaInputError:
        return None
    return max(1, round(p.rate * e2e))


def bound_candidate(
    cand: Any, profiles: dict[Any, Profile], keys: list[Any], curve: Any, sla: Any, req: Any
) -> None:
    """Set ``cand``'s interval fields (``interval_group``, ``max_rate_per_replica_at_end``,
    ``replicas_low/high``, ``gpu_hours_per_day_low/high``, ``usd_per_day_low/high``) or
    ``interval_note``."""
    from plena_opt.serving.error_bars import load_table, measured_band

    bands = {}
    for key, p in profiles.items():
        band, note = measured_band(load_table(), req.engine, cand.gpu, occupancy(p))
        if band is None:
            cand.interval_note = f"{note} (at {p.isl}/{p.osl} tokens)" if note else note
            return
        bands[key] = band
    cand.interval_group = ", ".join(sorted({b.group for b in bands.values()}))
    lam = [iv.rate_per_s for iv in curve.intervals]
    ends = {}  # both ends' rates first: a mix uses them even where one end fails here
    for end in ("low", "high"):
        rates = {k: _rate_at(profiles[k], bands[k], sla, end) for k in profiles}
        ends[end] = [rates[k] for k in keys]
    cand.max_rate_per_replica_at_end = ends
    for end in ("low", "high"):
        per = ends[end]
        try:
            reps = _replicas(lam, per, req.min_replicas)
        except PlenaInputError as exc:
            cand.interval_note = f"at the interval's {end} end: {exc.rule}"
            return
        cost = _planned(cand, curve, lam, per, reps, req)
        setattr(cand, f"replicas_{end}", reps)
        setattr(cand, f"gpu_hours_per_day_{end}", cost.gpu_hours_per_day)
        setattr(cand, f"usd_per_day_{end}", cost.usd_per_day)


def _rate_at(p: Profile, band: Any, sla: Any, end: str) -> float:
    """Per-replica rate when the prediction is ``band``'s ``end`` ratio off: the SLA ÷ ratio."""
    from plena_opt.serving.sla_rate import Sla, max_rate

    kt = band.ttft_low if end == "low" else band.ttft_high
    kp = band.tpot_low if end == "low" else band.tpot_high
    scaled = Sla(
        None if sla.ttft_seconds is None else sla.ttft_seconds / kt,
        None if sla.tpot_seconds is None else sla.tpot_seconds / kp,
        sla.percentile,
    )
    return max_rate(p.step, p.isl, p.osl, scaled, tail_input_len=p.tail, max_sequences=p.max_seqs)


def _replicas(lam: list[float], per: list[float], min_replicas: int) -> list[int]:
    from plena_opt.serving.fleet import replicas_needed

    if any(x > 0 for x in lam) and all(mu <= 0 for mu in per):
        raise PlenaInputError("sla", "no replica meets the SLA at any rate")
    return replicas_needed(lam, per, min_replicas)


def _planned(cand: Any, curve: Any, lam: list[float], per: list[float], reps: list[int],
             req: Any) -> Any:  # fmt: skip
    from plena_opt.serving.fleet import fleet_costs

    return fleet_costs(
        [iv.start_hour for iv in curve.intervals],
        lam,
        per,
        reps,
        period=curve.period_hours,
        gpus=cand.tp,
        usd_per_gpu_hour=cand.usd_per_gpu_hour,
        delay_hours=req.scale_up_delay_min / 60,
    )["planned"]
