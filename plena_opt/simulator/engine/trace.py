"""Chrome Trace Event JSON (opens in Perfetto) for one timeline (spec §0.2, §4; service-conventions
§3).

Layout: ``pid`` = PP rank; ``tid`` 0 compute, 1 wait gaps, 2 pipeline hops (COMM ops). Names are the
unique ``rank{r}/{op}/chunk_{x}/mb{i}[/step{t}]``; the scheduler label and all numbers go in
``args``; the chunk letter is in ``cat``. Dependencies (except ``RANK_ORDER``) are v1 flows, one id
per edge: ``s`` at the source slice's start, ``f`` with ``bp: "e"`` at the destination's start,
``cat: "dep"``, ``name`` = reason.

Times: start and end are rounded to integer nanoseconds, ``ts = start_ns / 1000`` µs and ``dur =
(end_ns − start_ns) / 1000`` µs, except that ``dur`` is lowered by the float rounding error (a few
ulp of ``ts``, ~1e-9 µs at 10⁷ µs) where needed so that the float sum ``ts + dur`` a viewer computes
never exceeds ``end_ns / 1000``, hence never the next slice's ``ts`` on the track (rounding is
monotone, so ``end_ns ≤ next start_ns``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from plena_opt.simulator.engine.dependencies import DepReason
from plena_opt.simulator.engine.timeline import BUBBLE_DEFINITION, OpTiming, Timeline
from plena_opt.simulator.scheduler import OpKind, chunk_letter

TID_COMPUTE, TID_WAIT, TID_COMM = 0, 1, 2
_THREADS = {TID_COMPUTE: "compute", TID_WAIT: "wait", TID_COMM: "pp p2p"}


def _ns(t: float, unit_us: float) -> int:
    """Time ``t`` (in units of ``unit_us`` µs) as integer nanoseconds."""
    return round(t * unit_us * 1000.0)


def _span(start_ns: int, end_ns: int) -> tuple[float, float]:
    """``(ts, dur)`` in µs of ``[start_ns, end_ns]`` with float ``ts + dur <= end_ns / 1000``
    exactly (int / int division is correctly rounded, so the bounds are the nearest floats)."""
    ts, end = start_ns / 1000, end_ns / 1000
    dur = (end_ns - start_ns) / 1000
    if ts + dur > end:
        # |(ts + (end − ts)) − end| <= ulp(end)/2, so at most a step or two below end − ts
        dur = end - ts
        while ts + dur > end:
            dur = math.nextafter(dur, 0.0)
    return ts, dur


def chrome_trace(
    timeline: Timeline, unit_us: float = 1000.0, other: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Trace dict for ``timeline``; ``unit_us`` = microseconds per duration unit (1e6 for
    seconds, 1e3 for milliseconds)."""
    slices, body = _slice_events(timeline, unit_us)
    body += _flow_events(timeline, slices)
    body.sort(key=lambda e: e["ts"])
    return {
        "traceEvents": _track_names(timeline.plan.pp_size) + body,
        "displayTimeUnit": "ms",
        "otherData": _other_data(timeline, unit_us, other),
    }


def _track_names(pp_size: int) -> list[dict[str, Any]]:
    """``M`` events naming each PP rank (process) and its compute / wait / p2p tracks."""
    events: list[dict[str, Any]] = []
    for r in range(pp_size):
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": r,
                "tid": 0,
                "ts": 0,
                "args": {"name": f"PP rank {r}"},
            }
        )
        for tid, tname in _THREADS.items():
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": r,
                    "tid": tid,
                    "ts": 0,
                    "args": {"name": f"rank {r} {tname}"},
                }
            )
    return events


def _op_args(timeline: Timeline, t: OpTiming) -> dict[str, Any]:
    """``args`` of one op's slice: its label, ids, position, binding dependency and sample."""
    o, plan = t.op, timeline.plan
    args = {
        "label": o.label,
        "op_id": o.id,
        "rank": o.rank,
        "chunk": o.chunk,
        "microbatch": o.microbatch,
        "unit": o.unit(plan.pp_size),
        "component": o.component.value,
        "op_type": o.op_type,
        "wait": t.wait,
        "binding_dep": plan.ops[t.binding.src].trace_name if t.binding else None,
        "binding_reason": t.binding.reason.value if t.binding else None,
        "sample": timeline.sample,
    }
    if o.step >= 0:
        args["step"] = o.step
    return args


def _slice_events(
    timeline: Timeline, unit_us: float
) -> tuple[dict[int, tuple[int, int, float]], list[dict[str, Any]]]:
    """Every op's ``X`` slice and, where it waited, its wait slice; and per op id the
    ``(pid, tid, ts)`` its flows attach to."""
    slices: dict[int, tuple[int, int, float]] = {}
    body: list[dict[str, Any]] = []
    for t in timeline.ops:
        o = t.op
        tid = TID_COMM if o.kind is OpKind.COMM else TID_COMPUTE
        start_ns = _ns(t.start, unit_us)
        ts, dur = _span(start_ns, _ns(t.end, unit_us))
        slices[o.id] = (o.rank, tid, ts)
        letter = f"chunk_{chunk_letter(o.chunk)}"
        args = _op_args(timeline, t)
        body.append(
            {
                "name": o.trace_name,
                "cat": f"{o.code},{letter}",
                "ph": "X",
                "ts": ts,
                "dur": dur,
                "pid": o.rank,
                "tid": tid,
                "args": args,
            }
        )
        free_ns = _ns(t.rank_free_at, unit_us)
        if start_ns > free_ns:
            free, wait = _span(free_ns, start_ns)
            body.append(
                {
                    "name": f"{o.trace_name}/wait",
                    "cat": f"wait,{letter}",
                    "ph": "X",
                    "ts": free,
                    "dur": wait,
                    "pid": o.rank,
                    "tid": TID_WAIT,
                    "args": {
                        "label": o.label,
                        "waits_for": args["binding_dep"],
                        "reason": args["binding_reason"],
                    },
                }
            )
    return slices, body


def _flow_events(
    timeline: Timeline, slices: dict[int, tuple[int, int, float]]
) -> list[dict[str, Any]]:
    """One ``s``/``f`` flow pair per dependency edge except ``RANK_ORDER`` (ids from 1)."""
    body: list[dict[str, Any]] = []
    flow_id = 0
    for t in timeline.ops:
        for dep in t.deps:
            if dep.reason is DepReason.RANK_ORDER:
                continue
            flow_id += 1
            spid, stid, sts = slices[dep.src]
            dpid, dtid, dts = slices[dep.dst]
            common = {"cat": "dep", "name": dep.reason.value, "id": flow_id}
            body.append({**common, "ph": "s", "ts": sts, "pid": spid, "tid": stid})
            body.append({**common, "ph": "f", "bp": "e", "ts": dts, "pid": dpid, "tid": dtid})
    return body


def _other_data(timeline: Timeline, unit_us: float, other: dict[str, Any] | None) -> dict[str, Any]:
    """``otherData``: the schedule, sample, makespan and bubble ratio, then ``other``."""
    plan = timeline.plan
    meta = {
        "schedule": plan.schedule_name,
        "pp": plan.pp_size,
        "vpp": plan.vpp_size,
        "microbatches": plan.microbatches,
        "sample": timeline.sample,
        "makespan": timeline.makespan,
        "bubble_ratio": timeline.bubble_ratio,
        "bubble_definition": BUBBLE_DEFINITION,
        "time_unit_us": unit_us,
    }
    meta.update(other or {})
    return meta


def write_trace(path: str | Path, trace: dict[str, Any]) -> Path:
    """Write a trace dict as compact JSON; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace, separators=(",", ":")))
    return path
