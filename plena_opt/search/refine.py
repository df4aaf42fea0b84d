"""Local refinement of a sampled front: the unscored legal neighbours of the front, nearest first.

A sampler misses front plans that sit one discrete step from plans it found (measured on
qwen3-235b-a22b, 1,024 devices: TPE's two missed front plans were ``tp32 ep2`` next to the found
``tp16 ep4``, and the TTFT extreme ``tp64`` at the smallest batch). A point's *neighbours* are the
legal points one step away in one plan dimension:

* a prime factor of the device count moved from one of ``tp, ep, dp, pp, cp`` to another (the
  product stays the device count; ``tp`` reaching 1 makes the MoE mode ``replace``, as the space
  stores it);
* the other MoE TP mode, the other comm-overlap choices;
* the adjacent batch size and the adjacent precision (when searched), in the order given.

``neighbour_order`` lists the unscored neighbours of a front round-robin over the front's points
(each front point gets its first neighbour before any gets its second), each point's own list in
the order above with duplicates dropped, so a budget cut short still spreads over the front.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import replace

from plena_opt.estimate.plan import Plan
from plena_opt.search.space import PlanSpace, Point
from plena_opt.vocabulary import COMM_OVERLAPS, MOE_TP_MODES

MOVE_DIMS = ("tp", "ep", "dp", "pp", "cp")


def prime_factors(n: int) -> list[int]:
    """The distinct prime factors of ``n`` (≥ 1), ascending."""
    out, f = [], 2
    while f * f <= n:
        if n % f == 0:
            out.append(f)
            while n % f == 0:
                n //= f
        f += 1
    if n > 1:
        out.append(n)
    return out


def _adjacent(values: Sequence, value: object) -> list:
    i = list(values).index(value)
    return [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]


def _factor_moves(point: Point, primes: Sequence[int]) -> list[Point]:
    p = point.plan
    dims = {d: getattr(p, d) for d in MOVE_DIMS}
    out = []
    for src in MOVE_DIMS:
        for dst in MOVE_DIMS:
            for f in primes if src != dst else ():
                if dims[src] % f:
                    continue
                new = dict(dims, **{src: dims[src] // f, dst: dims[dst] * f})
                mode = p.moe_tp_mode if new["tp"] > 1 else "replace"
                plan = Plan(**new, moe_tp_mode=mode, comm_overlap=p.comm_overlap)
                out.append(replace(point, plan=plan))
    return out


def neighbours(point: Point, space: PlanSpace, primes: Sequence[int] | None = None) -> list[Point]:
    """The legal points of ``space`` one step from ``point`` (module docstring), no duplicates."""
    primes = prime_factors(space.num_devices) if primes is None else primes
    p = point.plan
    cands = _factor_moves(point, primes)
    cands += [
        replace(point, plan=replace(p, moe_tp_mode=m)) for m in MOE_TP_MODES if m != p.moe_tp_mode
    ]
    cands += [
        replace(point, plan=replace(p, comm_overlap=o))
        for o in COMM_OVERLAPS
        if o != p.comm_overlap
    ]
    cands += [replace(point, batch_size=b) for b in _adjacent(space.batch_sizes, point.batch_size)]
    if space.searches_precision:
        cands += [replace(point, precision=q) for q in _adjacent(space.precisions, point.precision)]
    seen: set[Point] = set()
    out = []
    for c in cands:
        if c in space and c not in seen and c != point:
            seen.add(c)
            out.append(c)
    return out


def neighbour_order(
    front: Sequence[Point], space: PlanSpace, scored: Container[str]
) -> list[Point]:
    """The unscored (key not in ``scored``) legal neighbours of ``front``, round-robin over the
    front's points, each once."""
    primes = prime_factors(space.num_devices)
    lists = [[q for q in neighbours(p, space, primes) if q.key not in scored] for p in front]
    seen: set[str] = set()
    out: list[Point] = []
    for i in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if i < len(lst) and lst[i].key not in seen:
                seen.add(lst[i].key)
                out.append(lst[i])
    return out
