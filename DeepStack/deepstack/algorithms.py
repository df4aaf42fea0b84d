"""The candidate algorithms of each collective, assembled once per rank-group layout.

Spec: network-model.md §7.2–§7.4 (all-reduce candidates in tie order, the non-power-of-two
rule, all-gather, reduce-scatter), §5 (a stage's time: hop latency + busiest link's bytes ÷
bandwidth), §6 (energy). An ``AlgorithmSet`` lists, for one (operation, scheme, dimension), each
candidate's routed stage patterns with their payload functions, which candidates may win, and
the profile's measured table for those groups (or None): everything a price needs but the byte
count. ``Network`` keeps them beside its routed patterns, so pricing a collective at another size
is a few multiplications per stage (``price``), not a walk through the pattern memo.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .measured import MeasuredTable
from .placement import ParallelScheme
from .stage import StagePattern
from .stage_patterns import StagePatterns, div, div_mul, full, is_pow2

ALL_REDUCE_ALGORITHMS = ("recursive_doubling", "ring", "rabenseifner", "double_tree", "all_to_all")
ALL_GATHER_ALGORITHMS = ("ring", "recursive_doubling", "all_to_all")


@dataclass(frozen=True)
class Algorithm:
    """One candidate: its stages (pattern, payload function), the multiplier of the summed stage
    costs, and the most links of one stage that the profile does not model (§4.1)."""

    name: str
    stages: tuple[tuple[StagePattern, Callable[[int], int]], ...]
    repeat: int = 1

    @property
    def unmodelled(self) -> int:
        return max((p.unmodelled for p, _ in self.stages), default=0)


@dataclass(frozen=True)
class AlgorithmSet:
    """The candidates of one collective in tie order (None: needs a power-of-two group), the
    names that may win, and the measured table that replaces the winner's time (or None)."""

    candidates: tuple[tuple[str, Algorithm | None], ...]
    allowed: tuple[str, ...]
    measured: MeasuredTable | None = None


def price(alg: Algorithm, x: int) -> tuple[float, float, float, int | None]:
    """(hop s, link s, energy pJ, busiest link id) of ``alg`` moving ``x`` bytes per device.

    Stage costs are summed in stage order and then multiplied by ``repeat``; the busiest link is
    the one of the stage with the longest link time (first on ties)."""
    hop = link = energy = 0.0
    busiest: int | None = None
    worst = -1.0
    for pattern, payload in alg.stages:
        h, t, e, b = pattern.parts(payload(x))
        hop += h
        link += t
        energy += e
        if b is not None and t > worst:
            worst, busiest = t, b
    r = alg.repeat
    return hop * r, link * r, energy * r, busiest


def _cands(*pairs: tuple[str, Algorithm | None]) -> tuple[tuple[str, Algorithm | None], ...]:
    return tuple(pairs)


def all_reduce_set(st: StagePatterns, scheme: ParallelScheme, dim: str, g: int) -> AlgorithmSet:
    """Recursive doubling, ring, Rabenseifner, double binary tree, one-shot all-to-all (§7.2);
    a group that is not a power of two may only use the ring (§7.3)."""
    pow2 = is_pow2(g)
    logg = int(math.log2(g)) if pow2 else 0
    xor = [st.xor_stage(scheme, dim, g, k) for k in range(logg)]
    cands = _cands(
        (
            "recursive_doubling",
            Algorithm("recursive_doubling", tuple((p, full) for p in xor)) if pow2 else None,
        ),
        ("ring", Algorithm("ring", ((st.ring_stage(scheme, dim, g), div(g)),), 2 * (g - 1))),
        (
            "rabenseifner",
            Algorithm("rabenseifner", tuple((p, div(1 << (k + 1))) for k, p in enumerate(xor)), 2)
            if pow2
            else None,
        ),
        (
            "double_tree",
            Algorithm("double_tree", tuple((p, div(2)) for p in st.tree_stages(scheme, dim, g)))
            if pow2
            else None,
        ),
        ("all_to_all", Algorithm("all_to_all", ((st.a2a_stage(scheme, dim, g), full),))),
    )
    return AlgorithmSet(cands, ALL_REDUCE_ALGORITHMS if pow2 else ("ring",))


def all_gather_set(st: StagePatterns, scheme: ParallelScheme, dim: str, g: int) -> AlgorithmSet:
    """Ring, recursive doubling (power-of-two groups only), direct (§7.4)."""
    pow2 = is_pow2(g)
    logg = int(math.log2(g)) if pow2 else 0
    ring = Algorithm("ring", ((st.ring_stage(scheme, dim, g), div(g)),), g - 1)  # routed first
    rd = tuple((st.xor_stage(scheme, dim, g, k), div_mul(g, 1 << k)) for k in range(logg))
    cands = _cands(
        ("ring", ring),
        ("recursive_doubling", Algorithm("recursive_doubling", rd) if pow2 else None),
        ("all_to_all", Algorithm("all_to_all", ((st.a2a_stage(scheme, dim, g), div(g)),))),
    )
    return AlgorithmSet(cands, ALL_GATHER_ALGORITHMS)


def reduce_scatter_set(st: StagePatterns, scheme: ParallelScheme, dim: str, g: int) -> AlgorithmSet:
    """Recursive halving for power-of-two groups, else the ring ((g−1) stages of X/g), §7.4."""
    if is_pow2(g):
        logg = int(math.log2(g))
        stages = tuple((st.xor_stage(scheme, dim, g, k), div(1 << (k + 1))) for k in range(logg))
        alg = Algorithm("recursive_halving", stages)
    else:
        alg = Algorithm("ring", ((st.ring_stage(scheme, dim, g), div(g)),), g - 1)
    return AlgorithmSet(((alg.name, alg),), (alg.name,))


def all_to_all_set(st: StagePatterns, scheme: ParallelScheme, dim: str, g: int) -> AlgorithmSet:
    """One-stage complete exchange of every ordered pair of every group (§8.2)."""
    alg = Algorithm("all_to_all", ((st.a2a_stage(scheme, dim, g), full),))
    return AlgorithmSet((("all_to_all", alg),), ("all_to_all",))


BUILDERS = {
    "all_reduce": all_reduce_set,
    "all_gather": all_gather_set,
    "reduce_scatter": reduce_scatter_set,
    "all_to_all": all_to_all_set,
}
