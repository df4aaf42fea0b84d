"""Structural validator for Chrome/Perfetto traces: the checklist of pipeline-simulator §4.5."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from plena_opt.simulator.engine.timeline import Timeline
from plena_opt.simulator.scheduler import OpKind

_PHASES = {"X", "M", "s", "t", "f"}
# Rules 4 and 5 are exact: ``ts + dur`` is evaluated in float64 as a viewer does, no tolerance.


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class _Index:
    """The events of a trace by kind: ``X`` slices per ``(pid, tid)`` and by name, the named
    processes and threads, flow events by id."""

    xs: dict[tuple[int, int], list[tuple[float, float, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    names: dict[str, dict] = field(default_factory=dict)
    procs: set[int] = field(default_factory=set)
    threads: set[tuple[int, int]] = field(default_factory=set)
    flows: dict[Any, list[dict]] = field(default_factory=lambda: defaultdict(list))


def validate_trace(
    trace: Any, timeline: Timeline | None = None, unit_us: float = 1000.0
) -> list[str]:
    """Return the list of rule violations (empty = valid). With ``timeline``, also check the round
    trip of every op's start/duration (rule 6)."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["1: top level must be an object with a traceEvents list"]
    index = _Index()
    errors = _index_events(trace["traceEvents"], index)
    errors += _check_tracks(index)
    errors += _check_flows(index)
    if timeline is not None:
        errors += _check_timeline(index, timeline, unit_us)
    return errors


def _event_error(i: int, e: dict) -> str | None:
    """Rule 1 for one event: a known phase, numeric ``ts >= 0``, integer ``pid``/``tid``."""
    ph = e.get("ph")
    if ph not in _PHASES:
        return f"1: event {i} has ph {ph!r}"
    if not _num(e.get("ts")) or e["ts"] < 0:
        return f"1: event {i} needs numeric ts >= 0"
    if not _int(e.get("pid")) or ("tid" in e or ph != "M") and not _int(e.get("tid")):
        return f"1: event {i} needs integer pid/tid"
    return None


def _index_events(events: list, index: _Index) -> list[str]:
    """Rules 1 and 3 while filing every well-formed event into ``index``."""
    errors: list[str] = []
    for i, e in enumerate(events):
        problem = _event_error(i, e)
        if problem is not None:
            errors.append(problem)
            continue
        ph = e["ph"]
        if ph == "M":
            if e.get("name") == "process_name":
                index.procs.add(e["pid"])
            elif e.get("name") == "thread_name":
                index.threads.add((e["pid"], e["tid"]))
        elif ph == "X":
            if not _num(e.get("dur")) or e["dur"] < 0:
                errors.append(f"1: X event {e.get('name')!r} needs numeric dur >= 0")
                continue
            if e.get("name") in index.names:
                errors.append(f"3: duplicate X name {e.get('name')!r}")
            index.names[e.get("name")] = e
            index.xs[(e["pid"], e["tid"])].append((e["ts"], e["dur"], e.get("name")))
        else:
            index.flows[e.get("id")].append(e)
    return errors


def _check_tracks(index: _Index) -> list[str]:
    """Rule 2 (every track and process is named) and rule 4 (slices on a track nest or follow,
    never partially overlap; exact in float64)."""
    errors: list[str] = []
    for key in index.xs:
        if key not in index.threads:
            errors.append(f"2: (pid, tid) {key} has no thread_name")
        if key[0] not in index.procs:
            errors.append(f"2: pid {key[0]} has no process_name")
    for key, items in index.xs.items():
        items.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[float, str]] = []
        for ts, dur, name in items:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1][0]:
                errors.append(f"4: {name!r} partially overlaps {stack[-1][1]!r} on {key}")
            stack.append((ts + dur, name))
    return errors


def _check_flows(index: _Index) -> list[str]:
    """Rule 5: each flow id has one ``s`` and one ``f`` with the same (cat, name), each inside a
    slice on its own track."""

    def inside(e: dict) -> bool:
        track = index.xs.get((e["pid"], e["tid"]), [])
        return any(ts <= e["ts"] <= ts + dur for ts, dur, _ in track)

    errors: list[str] = []
    for fid, fl in index.flows.items():
        s = [e for e in fl if e["ph"] == "s"]
        f = [e for e in fl if e["ph"] == "f"]
        if len(s) != 1 or len(f) != 1 or len(fl) != 2:
            errors.append(f"5: flow {fid} needs exactly one s and one f (has {len(fl)} events)")
            continue
        if (s[0].get("cat"), s[0].get("name")) != (f[0].get("cat"), f[0].get("name")):
            errors.append(f"5: flow {fid} s/f differ in (cat, name)")
        if not inside(s[0]):
            errors.append(f"5: flow {fid} s is not inside a slice on its track")
        if not inside(f[0]):
            errors.append(f"5: flow {fid} f is not inside a slice on its track")
    return errors


def _check_timeline(index: _Index, timeline: Timeline, unit_us: float) -> list[str]:
    """Rule 6: every op of ``timeline`` has its ``X`` slice, at its start and duration (within
    rounding), on its track (compute, or pipeline hops for COMM ops)."""
    errors: list[str] = []
    tol = 2e-3 + 1e-9 * unit_us * max(timeline.makespan, 1.0)
    for t in timeline.ops:
        e = index.names.get(t.op.trace_name)
        if e is None:
            errors.append(f"6: op {t.op.trace_name!r} has no X event")
            continue
        if abs(e["ts"] - t.start * unit_us) > tol or abs(e["dur"] - t.duration * unit_us) > tol:
            errors.append(f"6: op {t.op.trace_name!r} ts/dur differ from the timeline")
        expected_tid = 2 if t.op.kind is OpKind.COMM else 0
        if e["tid"] != expected_tid:
            errors.append(f"6: op {t.op.trace_name!r} is on the wrong track")
    return errors
