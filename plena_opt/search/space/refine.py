"""Local refinement of a sampled front: the unscored legal neighbours of the front, nearest first.

A sampler misses front plans that sit one discrete step from plans it found (measured on
qwen3-235b-a22b, 1,024 devices: TPE's two missed front plans were ``tp32 ep2`` next to the found
``tp16 ep4``, and the TTFT extreme ``tp64`` at the smallest batch). A point's *neighbours* are the
legal points one step away in one plan dimension:

* a prime factor of the device count moved from one of ``tp, ep, dp, pp, cp`` to another (the
  product stays the device count; ``tp`` reaching 1 makes the MoE mode ``replace``, as the space
  stores it);
* the other MoE splits of the same shape (the other shorthand, the explicit ``moe_tp`` values; an
  explicit split keeps its ``moe_tp`` across a factor move while it divides tp·ep), the other
  comm-overlap choices;
* the adjacent batch size and the adjacent precision (when searched), in the order given.

``neighbour_order`` lists the unscored neighbours of a front round-robin over the front's points
(each front point gets its first neighbour before any gets its second), so a budget cut short
still spreads over the front; each point's own list puts first the step kinds that most often
reached the front earlier in the run (``MoveCredit``; the order above among equals). On the tests'
fake evaluator this raised the mean recall over 5 seeds from 0.95 to 0.983 (256 devices, 8
experts, 20 % of the evaluations) and never lowered it in 12 settings (2026-12-01).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from plena_opt.estimate.plan import Plan
from plena_opt.search.space.space import PlanSpace, Point
from plena_opt.vocabulary import COMM_OVERLAPS, MOE_TP_MODES

MOVE_DIMS = ("tp", "ep", "dp", "pp", "cp")


class Move(NamedTuple):
    """A neighbour ``point`` and the ``kind`` of step that reaches it."""

    kind: str
    point: Point


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


def _factor_moves(point: Point, primes: Sequence[int]) -> list[tuple[str, Point]]:
    p = point.plan
    dims = {d: getattr(p, d) for d in MOVE_DIMS}
    out = []
    for src in MOVE_DIMS:
        for dst in MOVE_DIMS:
            for f in primes if src != dst else ():
                if dims[src] % f:
                    continue
                new = dict(dims, **{src: dims[src] // f, dst: dims[dst] * f})
                split = _split_after(p, new["tp"], new["ep"])
                if split is None:
                    continue
                plan = Plan(**new, moe_tp_mode=split[0], comm_overlap=p.comm_overlap,
                            moe_tp=split[1])  # fmt: skip
                out.append((f"{src}>{dst}", replace(point, plan=plan)))
    return out


def _split_after(p: Plan, tp: int, ep: int) -> tuple[str, int] | None:
    """(moe_tp_mode, moe_tp) of ``p``'s MoE split on a shape of ``tp``, ``ep``, as the space
    stores it (an explicit moe_tp equal to 1 or tp is the ``replace``/``keep`` shorthand); None
    when the explicit moe_tp no longer divides tp·ep."""
    if not p.moe_tp:
        return (p.moe_tp_mode if tp > 1 else "replace"), 0
    if (tp * ep) % p.moe_tp:
        return None
    if p.moe_tp == tp:
        return ("keep" if tp > 1 else "replace"), 0
    return ("replace", 0) if p.moe_tp == 1 else ("replace", p.moe_tp)


def _split_moves(point: Point, space: PlanSpace) -> list[tuple[str, Point]]:
    """The other MoE splits of the point's shape: the other shorthand and every explicit
    ``moe_tp`` of the space (the ones that do not divide tp·ep are not in the space)."""
    p = point.plan
    splits = [(m, 0) for m in MOE_TP_MODES] + [("replace", mt) for mt in space.moe_tps]
    return [
        ("mode", replace(point, plan=replace(p, moe_tp_mode=m, moe_tp=mt)))
        for m, mt in splits
        if (m, mt) != (p.moe_tp_mode, p.moe_tp) and (not mt or (p.tp * p.ep) % mt == 0)
    ]


def moves(point: Point, space: PlanSpace, primes: Sequence[int] | None = None) -> list[Move]:
    """The legal points of ``space`` one step from ``point`` (module docstring), each with the
    kind of its step (``"tp>ep"``: a factor moved from tp to ep; ``"mode"``, ``"overlap"``,
    ``"batch"``, ``"precision"``), no duplicates."""
    primes = prime_factors(space.num_devices) if primes is None else primes
    p = point.plan
    cands = _factor_moves(point, primes)
    cands += _split_moves(point, space)
    cands += [
        ("overlap", replace(point, plan=replace(p, comm_overlap=o)))
        for o in COMM_OVERLAPS
        if o != p.comm_overlap
    ]
    cands += [
        ("batch", replace(point, batch_size=b))
        for b in _adjacent(space.batch_sizes, point.batch_size)
    ]
    if space.searches_precision:
        cands += [
            ("precision", replace(point, precision=q))
            for q in _adjacent(space.precisions, point.precision)
        ]
    seen: set[Point] = set()
    out = []
    for kind, c in cands:
        if c in space and c not in seen and c != point:
            seen.add(c)
            out.append(Move(kind, c))
    return out


def neighbours(point: Point, space: PlanSpace, primes: Sequence[int] | None = None) -> list[Point]:
    """The points of ``moves`` (the legal one-step neighbours of ``point``)."""
    return [m.point for m in moves(point, space, primes)]


def neighbour_order(
    front: Sequence[Point],
    space: PlanSpace,
    scored: Container[str],
    rate: Mapping[str, float] | None = None,
) -> list[Move]:
    """The unscored (key not in ``scored``) legal neighbours of ``front``, round-robin over the
    front's points, each once; each point's list is sorted by ``rate[kind]`` (highest first,
    stable; missing kinds rate 0.5), the share of earlier steps of that kind that reached the
    front (``MoveCredit``)."""
    primes = prime_factors(space.num_devices)
    rate = rate or {}
    lists = [
        sorted(
            (m for m in moves(p, space, primes) if m.point.key not in scored),
            key=lambda m: -rate.get(m.kind, 0.5),
        )
        for p in front
    ]
    seen: set[str] = set()
    out: list[Move] = []
    for i in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if i < len(lst) and lst[i].point.key not in seen:
                seen.add(lst[i].point.key)
                out.append(lst[i])
    return out


class MoveCredit:
    """Per step kind, the share of scored neighbours that were on the front right after their
    round, as ``(hits + 1) / (tries + 2)`` (Laplace rule: 0.5 before any try)."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.tries: dict[str, int] = {}

    def add(self, kind: str, on_front: bool) -> None:
        self.tries[kind] = self.tries.get(kind, 0) + 1
        self.hits[kind] = self.hits.get(kind, 0) + int(on_front)

    def rates(self) -> dict[str, float]:
        return {k: (self.hits.get(k, 0) + 1) / (n + 2) for k, n in self.tries.items()}
