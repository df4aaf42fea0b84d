"""Infeasible plans per constraint and the nearest miss of each (issue 25).

For every constraint some scored plan breaks, the count of plans breaking it and the plan that
comes closest to meeting it (smallest relative excess), with its value against the limit in SI
(seconds, tokens/s per sequence, bytes, or sequences when memory is judged by the capacity-bound
batch at ``--memory-fraction``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from plena_opt.search.space.objectives import Constraints


class NearestMiss(BaseModel):
    """The plan closest to meeting one constraint it breaks: ``value`` against ``limit``
    (``unit``: s, tokens/s, bytes or sequences; ``limit`` None when capacity is not known)."""

    label: str
    key: str
    excess: float  # relative: (value - limit) / limit, > 0
    value: float
    limit: float | None
    unit: str


def _value_limit(rec: Any, name: str, c: Constraints) -> tuple[float, float | None, str]:
    s = rec.summary
    if name == "max_ttft":
        return s["ttft_ms"] / 1e3, c.max_ttft_ms / 1e3, "s"
    if name == "max_tpot":
        tps = s["tps_per_sequence"]
        return (1.0 / tps if tps > 0 else float("inf")), c.max_tpot_ms / 1e3, "s"
    if name == "min_tps_per_seq":
        return s["tps_per_sequence"], c.min_tps_per_seq, "tokens/s"
    if c.memory_fraction is not None and s.get("max_batch") is not None:
        return float(rec.point.batch_size), float(s["max_batch"]), "sequences"
    used = s["weight_bytes_per_device"] + s["kv_cache_bytes_per_device"]
    return used, c.capacity_bytes, "bytes"


def infeasible_summary(
    records: Sequence[Any], constraints: Constraints
) -> tuple[dict[str, int], dict[str, NearestMiss]]:
    """(plans breaking each constraint, the nearest miss of each) over scored ``records``."""
    counts: dict[str, int] = {}
    best: dict[str, Any] = {}
    for r in records:
        if not r.valid:
            continue  # not priced (an objective is not finite): see ``unpriced_reasons``
        for k in constraints.violated(r.constraints):
            counts[k] = counts.get(k, 0) + 1
            if not math.isfinite(r.constraints[k]):
                continue  # no finite value to be near the limit with
            if k not in best or r.constraints[k] < best[k].constraints[k]:
                best[k] = r
    misses = {}
    for k, r in best.items():
        value, limit, unit = _value_limit(r, k, constraints)
        misses[k] = NearestMiss(
            label=r.point.label(),
            key=r.point.key,
            excess=float(r.constraints[k]),
            value=float(value),
            limit=limit,
            unit=unit,
        )
    return counts, misses


def unpriced_reasons(records: Sequence[Any]) -> dict[str, int]:
    """Plans with an objective that is not finite (not priced), counted per stated reason."""
    out: dict[str, int] = {}
    for r in records:
        if r.valid:
            continue
        under = r.summary.get("under_load")
        reason = under.get("refused") if isinstance(under, dict) else None
        key = reason or "an objective is not available (not finite)"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def miss_text(name: str, m: NearestMiss) -> str:
    """One line: ``nearest miss on max_ttft: tp2 b8 (key …): 0.512 s vs limit 0.5 s (+2.4 %)``."""
    if m.unit == "bytes":
        value = f"{m.value / 2**30:,.2f} GiB"
        limit = "unknown" if m.limit is None else f"{m.limit / 2**30:,.2f} GiB"
    elif m.unit == "s":
        value, limit = f"{m.value * 1e3:.2f} ms", f"{(m.limit or 0) * 1e3:g} ms"
    else:
        value, limit = f"{m.value:g} {m.unit}", f"{m.limit:g} {m.unit}"
    return (
        f"  nearest miss on {name}: {m.label} ({m.key}): {value} vs limit {limit} "
        f"(+{100 * m.excess:.1f} %)"
    )
