"""Chrome/Perfetto trace export and the structural validator (pipeline-simulator §0.2, §4.5)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plena_opt.simulator import build_schedule, chrome_trace, simulate, validate_trace
from plena_opt.simulator.engine import write_trace
from plena_opt.simulator.scheduler import SCHEDULE_OP_TYPES, SCHEDULES


@pytest.mark.parametrize("name", SCHEDULES)
def test_every_schedule_trace_is_valid(name: str, tmp_path) -> None:
    vpp = 2 if name in ("interleaved-1f1b", "bigmac-vpp") else 1
    plan = build_schedule(name, 4, 8, vpp)
    dur = {t: 1.0 + 0.5 * i for i, t in enumerate(SCHEDULE_OP_TYPES[name])}
    res = simulate(plan, dur, noise="sigma=0.1,rank=0.05", samples=200, seed=4)
    for tl in res.timelines().values():
        path = write_trace(tmp_path / f"{name}.json", chrome_trace(tl, unit_us=1000.0))
        trace = json.loads(path.read_text())
        assert validate_trace(trace, tl, unit_us=1000.0) == []
        xs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
        assert len(xs) == plan.n_ops
        for e in xs:
            assert e["name"].startswith(f"rank{e['pid']}/")
            assert f"chunk_{'ab'[e['args']['chunk']]}" in e["cat"]
            assert e["name"].split("/")[2] in e["cat"]
        metas = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"] if e["ph"] == "M"}
        assert (0, "PP rank 0") in metas


def test_small_plan_golden_events() -> None:
    """1F1B, p=2, m=2, F=1 ms, B=2 ms, hand-derived: rank 0 runs F0 [0,1], F1 [1,2], B0 [4,6],
    B1 [7,9]; rank 1 runs F0 [1,2], B0 [2,4], F1 [4,5], B1 [5,7] (makespan (m+p−1)(F+B) = 9)."""
    res = simulate(build_schedule("1f1b", 2, 2), {"F": 1.0, "B": 2.0})
    trace = chrome_trace(res.deterministic, unit_us=1000.0)
    xs = {
        e["name"]: (e["ts"], e["dur"], e["args"]["label"])
        for e in trace["traceEvents"]
        if e["ph"] == "X"
    }
    expected = {
        "rank0/F/chunk_a/mb0": (0.0, 1000.0, "F0-C0"),
        "rank0/F/chunk_a/mb1": (1000.0, 1000.0, "F1-C0"),
        "rank0/B/chunk_a/mb0": (4000.0, 2000.0, "B0-C0"),
        "rank0/B/chunk_a/mb1": (7000.0, 2000.0, "B1-C0"),
        "rank1/F/chunk_a/mb0": (1000.0, 1000.0, "F0-C0"),
        "rank1/B/chunk_a/mb0": (2000.0, 2000.0, "B0-C0"),
        "rank1/F/chunk_a/mb1": (4000.0, 1000.0, "F1-C0"),
        "rank1/B/chunk_a/mb1": (5000.0, 2000.0, "B1-C0"),
        # wait gaps, on their own track
        "rank0/B/chunk_a/mb0/wait": (2000.0, 2000.0, "B0-C0"),
        "rank0/B/chunk_a/mb1/wait": (6000.0, 1000.0, "B1-C0"),
        "rank1/F/chunk_a/mb0/wait": (0.0, 1000.0, "F0-C0"),
    }  # rank 1's F1 starts when its B0 ends: no wait slice
    assert xs == expected
    flows = [e for e in trace["traceEvents"] if e["ph"] in "sf"]
    reasons = sorted({e["name"] for e in flows})
    assert reasons == ["BWD_NEXT_STAGE", "FWD_PREV_STAGE", "LOSS", "OWN_FWD_ACTIVATION"]
    assert all(e["bp"] == "e" for e in flows if e["ph"] == "f")
    assert validate_trace(trace, res.deterministic) == []


def _valid_trace():
    res = simulate(build_schedule("1f1b", 2, 2), {"F": 1.0, "B": 2.0})
    return chrome_trace(res.deterministic), res.deterministic


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda t: t.pop("traceEvents"), "1:"),
        (lambda t: t["traceEvents"].append({"ph": "Q", "ts": 0, "pid": 0, "tid": 0}), "1:"),
        (lambda t: _first_x(t).update(ts=-1.0), "1:"),
        (lambda t: _first_x(t).update(pid="0"), "1:"),
        (lambda t: t["traceEvents"].remove(_meta(t, "thread_name")), "2:"),
        (lambda t: t["traceEvents"].remove(_meta(t, "process_name")), "2:"),
        (lambda t: t["traceEvents"].append(copy.deepcopy(_first_x(t))), "3:"),
        (lambda t: _first_x(t).update(dur=1500.0), "4:"),
        (
            lambda t: t["traceEvents"].remove(next(e for e in t["traceEvents"] if e["ph"] == "f")),
            "5:",
        ),
        (lambda t: next(e for e in t["traceEvents"] if e["ph"] == "s").update(ts=99999.0), "5:"),
        (lambda t: _first_x(t).update(name="renamed"), "6:"),
    ],
)
def test_validator_catches_each_rule(mutate, rule: str) -> None:
    trace, tl = _valid_trace()
    assert validate_trace(trace, tl) == []
    mutate(trace)
    problems = validate_trace(trace, tl)
    assert problems and any(p.startswith(rule) for p in problems), problems


def _first_x(t: dict) -> dict:
    return next(
        e
        for e in t["traceEvents"]
        if e["ph"] == "X" and e["name"].endswith("F/chunk_a/mb0") and e["pid"] == 0
    )


def _meta(t: dict, name: str) -> dict:
    return next(
        e for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == name and e["pid"] == 0
    )


def test_decode_steps_have_unique_names() -> None:
    from plena_opt.simulator import InferenceStageTimes, serving_window

    times = InferenceStageTimes((1.0, 1.0), 0.1, (0.5, 0.5), 0.05, 2, 3, 4)
    res = simulate(serving_window(times), times.durations())
    trace = chrome_trace(res.deterministic, unit_us=1e6)
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert "rank1/D/chunk_a/mb0/step2" in names and "rank0/XD/chunk_a/mb1/step0" in names
    assert validate_trace(trace, res.deterministic, unit_us=1e6) == []


def _x_tracks(trace: dict) -> dict[tuple[int, int], list[tuple[float, float]]]:
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
    return {k: sorted(v) for k, v in tracks.items()}


def test_float_sum_ts_plus_dur_never_passes_the_next_slice(tmp_path) -> None:
    """Rule (review fix 4): a viewer's float ``ts + dur`` must not exceed the next slice's ``ts``
    on the track. 1F1B p=2, m=4 with these durations (s) made the old writer (ts and dur each
    rounded to 0.001 µs) overlap by 1 ulp, e.g. 31023435.521 + 5846311.489 > 36869747.01."""
    f, b = 15.511717760555667, 5.846311489049012
    res = simulate(build_schedule("1f1b", 2, 4), {"F": f, "B": b})
    tl = res.deterministic
    old_overlaps = 0
    for r in range(2):
        ops = sorted((t for t in tl.ops if t.op.rank == r), key=lambda t: t.start)
        for a, nxt in zip(ops, ops[1:], strict=False):
            ts = round(a.start * 1e6, 3)
            old_overlaps += ts + round(round(a.end * 1e6, 3) - ts, 3) > round(nxt.start * 1e6, 3)
    assert old_overlaps > 0  # the case still exercises the rounding hazard
    path = write_trace(tmp_path / "t.json", chrome_trace(tl, unit_us=1e6))
    trace = json.loads(path.read_text())  # after the JSON round trip, as a viewer reads it
    for items in _x_tracks(trace).values():
        for (ts, dur), (nts, _) in zip(items, items[1:], strict=False):
            assert ts + dur <= nts
    assert validate_trace(trace, tl, unit_us=1e6) == []


@settings(max_examples=40, deadline=None)
@given(
    f=st.floats(1e-6, 1e3, allow_nan=False),
    b=st.floats(1e-6, 1e3, allow_nan=False),
    unit_us=st.sampled_from([1e3, 1e6]),
)
def test_trace_tracks_never_overlap_in_float(f: float, b: float, unit_us: float) -> None:
    """Property of the writer: on every (pid, tid), ``ts + dur <= next ts`` exactly in float64,
    and each slice stays within 1 ns of the timeline (ts, dur from integer-ns start/end)."""
    res = simulate(build_schedule("interleaved-1f1b", 2, 4, 2), {"F": f, "B": b})
    trace = json.loads(json.dumps(chrome_trace(res.deterministic, unit_us=unit_us)))
    for items in _x_tracks(trace).values():
        for (ts, dur), (nts, _) in zip(items, items[1:], strict=False):
            assert ts + dur <= nts
    assert validate_trace(trace, res.deterministic, unit_us=unit_us) == []


def test_validator_is_strict_about_one_ulp_overlap() -> None:
    """The validator has no epsilon: a slice ending 1 ulp after the next one starts is rule 4."""
    import math

    trace, tl = _valid_trace()
    x = _first_x(trace)
    track = [e for e in trace["traceEvents"] if e["ph"] == "X" and (e["pid"], e["tid"]) == (0, 0)]
    assert any(e["ts"] == x["ts"] + x["dur"] for e in track)  # F mb1 starts as F mb0 ends
    x["dur"] = math.nextafter(x["dur"], math.inf)
    assert any(p.startswith("4:") for p in validate_trace(trace, tl))


SNAPSHOTS = Path(__file__).parents[1] / "data" / "traces"


def _serving_snapshot() -> str:
    from plena_opt.simulator import InferenceStageTimes, serving_window

    times = InferenceStageTimes((1.0, 1.25), 0.1, (0.5, 0.625), 0.05, 2, 2, 4)
    res = simulate(serving_window(times), times.durations(), noise="sigma=0.1", samples=20, seed=3)
    trace = chrome_trace(res.timelines()["p99"], unit_us=1e6, other={"title": "snapshot"})
    return json.dumps(trace, separators=(",", ":"))


def _training_snapshot() -> str:
    plan = build_schedule("interleaved-1f1b", 2, 2, 2)
    res = simulate(plan, {"F": 1.0, "B": 2.0}, noise="sigma=0.1", samples=20, seed=3)
    return json.dumps(chrome_trace(res.timelines()["p50"], unit_us=1000.0), separators=(",", ":"))


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("serving_p2_mb2_steps2_p99.json", _serving_snapshot),
        ("interleaved_1f1b_p2_m2_v2_p50.json", _training_snapshot),
    ],
)
def test_trace_is_byte_identical_to_the_recorded_one(name: str, make) -> None:
    """The writer's output, byte for byte, against a trace recorded before ``chrome_trace`` was
    split into helpers: metadata, slices with their ``args``, wait slices, COMM tracks, decode
    steps, flows, ``otherData``. A deliberate change of the simulator or the trace format
    re-records the file (write ``make()`` to ``tests/data/traces/<name>``) and says why."""
    assert make() == (SNAPSHOTS / name).read_text()
