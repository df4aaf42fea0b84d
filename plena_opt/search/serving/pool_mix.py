"""Mixed GPU pools: the cheapest mix of replicas of several GPU types that serves a load.

Each ``PoolOption`` is one deployment (a GPU type with its plan): GPUs per replica, $/GPU-hour,
the tokens/s one replica serves within the SLA, and an optional availability cap in GPUs. The
problem — minimise Σ rᵢ·costᵢ subject to Σ rᵢ·tpsᵢ ≥ demand, 0 ≤ rᵢ ≤ capᵢ, rᵢ integer — is a
small integer program (a bounded covering knapsack). ``cheapest_mix`` solves it **exactly** by
depth-first branch and bound: options in order of $ per token/s, a branch cut when its cost plus
the remaining demand at the cheapest remaining rate (a lower bound, the linear relaxation) cannot
beat the best mix found. No option needs more replicas than would serve the whole demand alone,
so every count is bounded. Ties go to fewer GPUs, then the lexicographically smallest counts in
the options' order, so the answer is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from plena_opt.errors import PlenaInputError

METHOD = "exact: branch and bound over integer replica counts (bounded covering knapsack)"
MAX_NODES = 2_000_000  # search nodes before the solver refuses (a few seconds in Python)


@dataclass(frozen=True)
class PoolOption:
    """One deployment: ``gpus_per_replica`` GPUs at ``usd_per_gpu_hour`` each serve
    ``tokens_per_second`` per replica; ``max_gpus`` caps the GPUs of this option (None: no cap)."""

    name: str
    gpus_per_replica: int
    usd_per_gpu_hour: float
    tokens_per_second: float
    max_gpus: int | None = None

    @property
    def usd_per_replica_hour(self) -> float:
        return self.gpus_per_replica * self.usd_per_gpu_hour

    def max_replicas(self, demand_tps: float) -> int:
        """The most replicas a cheapest mix can use: the cap, and never more than serve the
        demand alone."""
        alone = math.ceil(demand_tps / self.tokens_per_second)
        if self.max_gpus is None:
            return alone
        return min(alone, self.max_gpus // self.gpus_per_replica)


@dataclass(frozen=True)
class PoolMix:
    """Replicas per option (by name), the mix's $/hour, tokens/s and GPUs; ``method`` names how
    it was found."""

    replicas: dict[str, int]
    usd_per_hour: float
    tokens_per_second: float
    gpus: int
    method: str = METHOD


def _check(options: Sequence[PoolOption], demand_tps: float) -> None:
    if not options:
        raise PlenaInputError("options", "give at least one pool option")
    if len({o.name for o in options}) != len(options):
        raise PlenaInputError("options", "option names must not repeat")
    if not (math.isfinite(demand_tps) and demand_tps >= 0):
        raise PlenaInputError("demand_tps", "demand must be a finite number of tokens/s ≥ 0")
    for o in options:
        if o.gpus_per_replica < 1:
            raise PlenaInputError(f"options.{o.name}.gpus_per_replica", "must be ≥ 1")
        if not (math.isfinite(o.usd_per_gpu_hour) and o.usd_per_gpu_hour >= 0):
            raise PlenaInputError(f"options.{o.name}.usd_per_gpu_hour", "must be finite, ≥ 0")
        if not (math.isfinite(o.tokens_per_second) and o.tokens_per_second > 0):
            raise PlenaInputError(f"options.{o.name}.tokens_per_second", "must be finite, > 0")
        if o.max_gpus is not None and o.max_gpus < 0:
            raise PlenaInputError(f"options.{o.name}.max_gpus", "must be ≥ 0")


def _key(cost: float, gpus: int, counts: tuple[int, ...]) -> tuple[float, int, tuple[int, ...]]:
    return (cost, gpus, counts)


def cheapest_mix(options: Sequence[PoolOption], demand_tps: float) -> PoolMix | None:
    """The cheapest mix serving ``demand_tps`` tokens/s (None: the caps cannot serve it)."""
    _check(options, demand_tps)
    # Cheapest rate first finds good mixes early; the bound uses the cheapest remaining rate.
    order = sorted(range(len(options)), key=lambda i: _rate(options[i]))
    opts = [options[i] for i in order]
    bounds = [o.max_replicas(demand_tps) for o in opts]
    cheapest_after = [
        min((_rate(o) for o in opts[k:]), default=math.inf) for k in range(len(opts) + 1)
    ]
    capacity_after = [
        sum(b * o.tokens_per_second for b, o in zip(bounds[k:], opts[k:], strict=True))
        for k in range(len(opts) + 1)
    ]
    best: list = [None]  # (key, counts in sorted order)
    nodes = [0]

    def visit(k: int, served: float, cost: float, gpus: int, counts: list[int]) -> None:
        nodes[0] += 1
        if nodes[0] > MAX_NODES:
            raise PlenaInputError(
                "options",
                f"the mix search passed {MAX_NODES} nodes; give fewer options or larger replicas",
            )
        if served >= demand_tps:
            key = _key(cost, gpus, _original(counts + [0] * (len(opts) - k), order))
            if best[0] is None or key < best[0][0]:
                best[0] = (key, list(counts) + [0] * (len(opts) - k))
            return
        if k == len(opts) or served + capacity_after[k] < demand_tps:
            return
        if best[0] is not None and cost + (demand_tps - served) * cheapest_after[k] > best[0][0][0]:
            return
        o = opts[k]
        need = math.ceil((demand_tps - served) / o.tokens_per_second)
        for r in range(min(bounds[k], need), -1, -1):
            counts.append(r)
            visit(
                k + 1,
                served + r * o.tokens_per_second,
                cost + r * o.usd_per_replica_hour,
                gpus + r * o.gpus_per_replica,
                counts,
            )
            counts.pop()

    visit(0, 0.0, 0.0, 0, [])
    if best[0] is None:
        return None
    counts = _original(best[0][1], order)
    return _mix(options, counts)


def _rate(o: PoolOption) -> float:
    """$ per hour per token/s of one replica."""
    return o.usd_per_replica_hour / o.tokens_per_second


def _original(counts: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(order)
    for pos, i in enumerate(order):
        out[i] = counts[pos]
    return tuple(out)


def _mix(options: Sequence[PoolOption], counts: Sequence[int]) -> PoolMix:
    return PoolMix(
        replicas={o.name: r for o, r in zip(options, counts, strict=True)},
        usd_per_hour=sum(r * o.usd_per_replica_hour for o, r in zip(options, counts, strict=True)),
        tokens_per_second=sum(
            r * o.tokens_per_second for o, r in zip(options, counts, strict=True)
        ),
        gpus=sum(r * o.gpus_per_replica for o, r in zip(options, counts, strict=True)),
    )


def cheapest_mix_per_interval(
    options: Sequence[PoolOption], demands_tps: Sequence[float]
) -> list[PoolMix | None]:
    """``cheapest_mix`` of each interval's demand (the mix may change between intervals)."""
    return [cheapest_mix(options, d) for d in demands_tps]


def cheapest_fixed_mix(
    options: Sequence[PoolOption], demands_tps: Sequence[float]
) -> PoolMix | None:
    """One mix kept all day: the cheapest serving the busiest interval."""
    if not demands_tps:
        raise PlenaInputError("demands_tps", "give at least one interval")
    return cheapest_mix(options, max(demands_tps))
