"""``capacity --mixed`` carries the measured error's interval (issue 30 items 3 and 4): the mix is
solved again at each end of the interval on each candidate's per-replica rate there, giving the
mix's replicas per interval, GPU-hours and $/day at the low and high end, by hand on a small
case; a candidate without a measured group is left out of both ends, and a mix that uses one has
no interval (as a single deployment without a measured group has none)."""

from __future__ import annotations

import json

import pytest

from plena_opt.api.capacity import Candidate, CapacityPlan, CapacityRequest
from plena_opt.api.capacity_mix import price_mix
from plena_opt.cli.capacity_report import render_text
from plena_opt.serving.load_curve import parse_load_curve

# 00-12 h: 10 requests/s, 12-24 h: 4 requests/s; 100 output tokens a request
CURVE = "start_hour,requests_per_second,input_tokens,output_tokens\n0,10,500,100\n12,4,500,100\n"


def _cand(name: str, tp: int, usd: float, nominal: float, low: float, high: float) -> Candidate:
    """A priced candidate serving ``nominal`` requests/s per replica in both intervals (``low``
    and ``high`` at the interval's ends; both None: no measured group)."""
    c = Candidate(name, name.split()[0], tp, usd_per_gpu_hour=usd)
    c.max_rate_per_replica = [nominal, nominal]
    # its own figures as a single deployment (not what these tests check; the table prints them)
    c.replicas, c.gpu_hours_per_day, c.usd_per_day, c.slo_attainment = [1, 1], 1.0, 1.0, 1.0
    c.fixed_fleet_usd_per_day, c.reactive_usd_per_day, c.reactive_slo_attainment = 1.0, 1.0, 1.0
    if low is None:
        c.interval_note = f"no interval: {name} was not measured"
    else:
        c.interval_group = f"vllm|{c.gpu}|9-32"
        c.max_rate_per_replica_at_end = {"low": [low, low], "high": [high, high]}
    return c


def _a() -> Candidate:
    # one GPU at $2/h: $2 per replica-hour, 2 requests/s (2.5 at the low end, 1.6 at the high)
    return _cand("h100-sxm tp1", 1, 2.0, 2.0, 2.5, 1.6)


def _b() -> Candidate:
    # two GPUs at $3/h: $6 per replica-hour, 5 requests/s (6 at the low end, 4 at the high)
    return _cand("b200 tp2", 2, 3.0, 5.0, 6.0, 4.0)


def test_the_mix_at_each_end_of_the_interval_by_hand() -> None:
    """Nominal: A costs $1 per request/s·h, B $1.2: 5 A ($10/h) then 2 A ($4/h): 12 h × $10 +
    12 h × $4 = $168/day, 12 × 5 + 12 × 2 = 84 GPU-h.
    Low end (A 2.5, B 6): 4 A serve 10 ($8/h), 2 A serve 4 ($4/h): $144/day, 72 GPU-h.
    High end (A 1.6, B 4): 10 requests/s need 7 A ($14/h, 7 GPUs) or 4 A + 1 B (10.4, $14/h,
    6 GPUs: the tie goes to fewer GPUs); 4 requests/s: 3 A ($6, 3 GPUs) or 1 B ($6, 2 GPUs):
    1 B. 12 × $14 + 12 × $6 = $240/day, 12 × 6 + 12 × 2 = 96 GPU-h."""
    a, b = _a(), _b()
    mix = price_mix([a, b], parse_load_curve(CURVE), min_replicas=1, delay_min=0.0)
    assert mix.counts == [{a.name: 5}, {a.name: 2}]
    assert mix.usd_per_day == pytest.approx(168) and mix.gpu_hours_per_day == pytest.approx(84)
    assert mix.replicas_low == [{a.name: 4}, {a.name: 2}]
    assert mix.usd_per_day_low == pytest.approx(144)
    assert mix.gpu_hours_per_day_low == pytest.approx(72)
    assert mix.replicas_high == [{a.name: 4, b.name: 1}, {b.name: 1}]
    assert mix.usd_per_day_high == pytest.approx(240)
    assert mix.gpu_hours_per_day_high == pytest.approx(96)
    assert mix.interval_group == "vllm|b200|9-32, vllm|h100-sxm|9-32"
    assert mix.interval_note is None and mix.interval_left_out == []


def test_json_and_table_carry_the_mixs_interval() -> None:
    a, b = _a(), _b()
    curve = parse_load_curve(CURVE)
    mix = price_mix([a, b], curve, min_replicas=1, delay_min=0.0)
    req = CapacityRequest("llama-3.1-8b", "load.csv", ("h100-sxm", "b200"), max_tpot_ms=50.0,
                          mixed=True)  # fmt: skip
    rows = [{"start_hour": iv.start_hour, "hours": iv.hours,
             "requests_per_second": iv.rate_per_s} for iv in curve.intervals]  # fmt: skip
    plan = CapacityPlan(req, rows, curve.period_hours, [a, b], mix, mix)
    doc = json.loads(json.dumps(plan.to_dict()))
    assert doc["usd_per_day_low"] == pytest.approx(144)
    assert doc["usd_per_day_high"] == pytest.approx(240)
    assert doc["gpu_hours_per_day_low"] == pytest.approx(72)
    assert doc["gpu_hours_per_day_high"] == pytest.approx(96)
    assert doc["interval_note"] is None and doc["interval_group"]
    assert doc["intervals"][0]["replicas_high"] == {a.name: 4, b.name: 1}
    assert doc["intervals"][1]["replicas_low"] == {a.name: 2}
    assert doc["mixed"]["replicas_high"][1] == {b.name: 1}
    text = render_text(plan)
    assert "$144-$240/day" in text and "96 GPU-h/day" in text
    assert "[4x h100-sxm tp1 .. 4x h100-sxm tp1 + 1x b200 tp2]" in text
    assert "[2x h100-sxm tp1 .. 1x b200 tp2]" in text


def test_a_candidate_without_a_measured_group_enters_neither_end() -> None:
    """C (no measured group) is dearer per request/s ($8 per replica-hour for 5): unused, so
    the mix keeps its interval, solved without C and saying so."""
    a, b = _a(), _b()
    c = _cand("b200 tp4", 4, 2.0, 5.0, None, None)
    mix = price_mix([a, b, c], parse_load_curve(CURVE), min_replicas=1, delay_min=0.0)
    assert all(c.name not in n for n in mix.counts)
    assert mix.interval_left_out == [c.name]
    assert mix.usd_per_day_low == pytest.approx(144)
    assert mix.usd_per_day_high == pytest.approx(240)
    assert "without b200 tp4" in render_text(_plan(mix, [a, b, c]))


def test_a_mix_using_an_unmeasured_candidate_has_no_interval() -> None:
    """C now serves 10 requests/s for $8/h, the cheapest per request/s: the mix uses it, so
    the mix's interval would rest on an error nobody measured: none, and why."""
    a, b = _a(), _b()
    c = _cand("b200 tp4", 4, 2.0, 10.0, None, None)
    mix = price_mix([a, b, c], parse_load_curve(CURVE), min_replicas=1, delay_min=0.0)
    assert any(c.name in n for n in mix.counts)
    assert mix.interval_group is None and mix.replicas_low is None and mix.usd_per_day_high is None
    assert mix.interval_note.startswith("no interval: the mix uses b200 tp4")
    assert "was not measured" in mix.interval_note
    assert "error bars: no interval: the mix uses b200 tp4" in render_text(_plan(mix, [a, b, c]))


def test_no_mix_at_the_high_end_is_no_interval_with_the_reason() -> None:
    """At the high end neither candidate meets the SLA at any rate (rate 0): no interval."""
    a = _cand("h100-sxm tp1", 1, 2.0, 2.0, 2.5, 0.0)
    mix = price_mix([a], parse_load_curve(CURVE), min_replicas=1, delay_min=0.0)
    assert mix.priced and mix.replicas_low is None and mix.usd_per_day_low is None
    assert mix.interval_note == "at the interval's high end: interval 1: no mix of replicas " + (
        "meets the SLA"
    )


def _plan(mix, cands) -> CapacityPlan:
    curve = parse_load_curve(CURVE)
    req = CapacityRequest("llama-3.1-8b", "load.csv", ("h100-sxm", "b200"), max_tpot_ms=50.0,
                          mixed=True)  # fmt: skip
    rows = [{"start_hour": iv.start_hour, "hours": iv.hours,
             "requests_per_second": iv.rate_per_s} for iv in curve.intervals]  # fmt: skip
    return CapacityPlan(req, rows, curve.period_hours, cands, mix, mix)
