"""Structural validator for Chrome/Perfetto traces: the checklist of pipeline-simulator §4.5."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from plena_opt.pipeline.scheduler import OpKind
from plena_opt.pipeline.simulator.timeline import Timeline

_PHASES = {"X", "M", "s", "t", "f"}
# Rules 4 and 5 are exact: ``ts + dur`` is evaluated in float64 as a viewer does, no tolerance.


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_trace(
    trace: Any, timeline: Timeline | None = None, unit_us: float = 1000.0
) -> list[str]:
    """Return the list of rule violations (empty = valid). With ``timeline``, also check the round
    trip of every op's start/duration (rule 6)."""
    errors: list[str] = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["1: top level must be an object with a traceEvents list"]
    events = trace["traceEvents"]
    xs: dict[tuple[int, int], list[tuple[float, float, str]]] = defaultdict(list)
    names: dict[str, dict] = {}
    procs, threads = set(), set()
    flows: dict[Any, list[dict]] = defaultdict(list)
    for i, e in enumerate(events):
        ph = e.get("ph")
        if ph not in _PHASES:
            errors.append(f"1: event {i} has ph {ph!r}")
            continue
        if not _num(e.get("ts")) or e["ts"] < 0:
            errors.append(f"1: event {i} needs numeric ts >= 0")
            continue
        if not _int(e.get("pid")) or ("tid" in e or ph != "M") and not _int(e.get("tid")):
            errors.append(f"1: event {i} needs integer pid/tid")
            continue
        if ph == "M":
            if e.get("name") == "process_name":
                procs.add(e["pid"])
            elif e.get("name") == "thread_name":
                threads.add((e["pid"], e["tid"]))
        elif ph == "X":
            if not _num(e.get("dur")) or e["dur"] < 0:
                errors.append(f"1: X event {e.get('name')!r} needs numeric dur >= 0")
                continue
            if e.get("name") in names:
                errors.append(f"3: duplicate X name {e.get('name')!r}")
            names[e.get("name")] = e
            xs[(e["pid"], e["tid"])].append((e["ts"], e["dur"], e.get("name")))
        else:
            flows[e.get("id")].append(e)
    for key in xs:
        if key not in threads:
            errors.append(f"2: (pid, tid) {key} has no thread_name")
        if key[0] not in procs:
            errors.append(f"2: pid {key[0]} has no process_name")
    for key, items in xs.items():
        items.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[float, str]] = []
        for ts, dur, name in items:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1][0]:
                errors.append(f"4: {name!r} partially overlaps {stack[-1][1]!r} on {key}")
            stack.append((ts + dur, name))

    def inside(e: dict) -> bool:
        return any(ts <= e["ts"] <= ts + dur for ts, dur, _ in xs.get((e["pid"], e["tid"]), []))

    for fid, fl in flows.items():
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
    if timeline is not None:
        tol = 2e-3 + 1e-9 * unit_us * max(timeline.makespan, 1.0)
        for t in timeline.ops:
            e = names.get(t.op.trace_name)
            if e is None:
                errors.append(f"6: op {t.op.trace_name!r} has no X event")
                continue
            if abs(e["ts"] - t.start * unit_us) > tol or abs(e["dur"] - t.duration * unit_us) > tol:
                errors.append(f"6: op {t.op.trace_name!r} ts/dur differ from the timeline")
            expected_tid = 2 if t.op.kind is OpKind.COMM else 0
            if e["tid"] != expected_tid:
                errors.append(f"6: op {t.op.trace_name!r} is on the wrong track")
    return errors
