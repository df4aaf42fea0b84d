"""The first steps of a fixed point's bisection, found from near its root (issue 26, r10cold).

``steady.closed_loop`` bisects φ on [0, 1] and ``open_loop.open_loop`` bisects the decoding
requests ``n`` on [0, top], ``BISECTION_STEPS`` steps each. While its decisions go one way the
bisection walks a *spine*: φ = 1 − 2⁻ᵏ (the closed loop raises ``lo`` while the request decodes
more than φ of its cycle) or n = top·2⁻ᵏ (the open loop lowers ``hi`` while the rate is served
with fewer than n decoding), k = 1, 2, …; the first step that turns off the spine (step ``k*``)
leaves [lo, hi] = the two spine points k* − 1 and k*, and the rest of the bisection works
inside them. Each spine point's decision prices the step costs at its own batch sizes: from
the top, the open loop at C = 4 prices decode batches of 512, 256, …, 1 (one evaluator pass
each, ``EvaluatorStepCosts``) to reach a root near 2.

**Single crossing.** Both fixed points have one root on their spine: the closed loop's right
side falls as φ grows (``steady``), and the open loop's ``λ·(osl − 1)·TPOT(n) − n`` changes
sign once, from + to −, as the rate's queue settles (TPOT grows more slowly than ``n``: the
decode step amortises its weight read and the prefill share is linear in ``n``). So the spine's
decisions are one way up to ``k*`` and the other way from it, and ``k*`` can be found from any
spine point: ``spine_turn`` starts at ``start`` (near the root: only the step costs at the
root's batch sizes are priced) and steps along the spine to the turn. Each decision is the
bisection's own (the same expression at the same float: 1 − 2⁻ᵏ and top·2⁻ᵏ are the
bisection's midpoints exactly), so where the property holds, [lo, hi] and every figure after
it are the stepwise bisection's bit for bit (``tests/serving/test_spine.py``; the serving
figures sweep, ``benchmarks/sweep_serving_figures.py``: README_serving.md, "r10cold"). Where it
did not, the search would stop at the first turn near ``start``: a root of the same fixed
point, the lowest one of the open loop's spine around it (the queue's stable state).
"""

from __future__ import annotations

from collections.abc import Callable


def spine_turn(along: Callable[[int], bool], start: int, steps: int) -> int:
    """The first spine step ``k`` in 1..``steps`` whose decision ``along(k)`` turns off the
    spine, or ``steps + 1`` when none does; found from ``start`` (1..``steps``) on the
    single-crossing property (module docstring): ``along`` is True below the turn, False from
    it."""
    k = min(max(start, 1), steps)
    if along(k):
        while k < steps:
            k += 1
            if not along(k):
                return k
        return steps + 1
    while k > 1:
        if along(k - 1):
            return k
        k -= 1
    return 1


def right_spine(k: int) -> float:
    """The closed loop's k-th spine point, 1 − 2⁻ᵏ (exact in floats for k ≤ 53; 0 at k = 0)."""
    return 1.0 - 2.0**-k


def left_spine(top: float, k: int) -> float:
    """The open loop's k-th spine point, top·2⁻ᵏ (exact: a power-of-two scale; top at k = 0)."""
    return top * 2.0**-k


def rising_turn(tpot: Callable[[float], float], work: float, top: float, steps: int) -> int:
    """``spine_turn`` of the open loop's spine n = top·2⁻ᵏ, whose decision at n is the
    bisection's ``work·TPOT(n) > n`` (off the spine: the root is above n), found upwards from
    Little's law at one decoding request: ``low = work·TPOT(1)``. TPOT does not fall as n grows
    from 1 (a bigger decode batch, a bigger prefill share), so ``work·TPOT(n) ≥ low > n`` for
    1 ≤ n < low, and once a spine point n ≥ 1 is off with ``reach = work·TPOT(n)``, so is every
    spine point in [n, reach): those are not priced. Where no spine point lies in [1, low), the
    search starts at the first one below ``low`` (``spine_turn``)."""

    def along(k: int) -> bool:
        n = left_spine(top, k)
        return not work * tpot(n) > n

    low = work * tpot(1.0)
    j = steps  # the largest spine point in [1, low): off without pricing it
    while j > 1 and left_spine(top, j - 1) < low:
        j -= 1
    if not 1.0 <= left_spine(top, j) < low:
        start = 1
        while start < steps and left_spine(top, start) > low:
            start += 1
        return spine_turn(along, start, steps)
    while j > 1:
        n = left_spine(top, j - 1)
        reach = work * tpot(n)
        if not reach > n:  # on the spine at j − 1, off at j: the turn
            return j
        j -= 1
        while j > 1 and left_spine(top, j - 1) < reach:
            j -= 1
    return 1
