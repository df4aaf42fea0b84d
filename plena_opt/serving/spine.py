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

**Single crossing.** The closed loop's right side falls as φ grows (``steady``), so all its
decisions follow from its root: since r11cold they are checked at two points only
(``serving.pilot``, from the spine point φ = 3/4; r10cold walked the spine from there). The
open loop's ``λ·(osl − 1)·TPOT(n) − n`` changes sign from + to − as the rate's queue
settles (TPOT grows more slowly than ``n``: the decode step amortises its weight read, the
prefill share is linear in ``n``) and TPOT does not fall as ``n`` grows, so one priced spine
point also decides the spine points its Little's-law figure reaches (``bracket_turn``). Each
decision is the bisection's own (the same expression at the same float: 1 − 2⁻ᵏ and top·2⁻ᵏ
are the bisection's midpoints exactly), so [lo, hi] and every figure after it are the stepwise
bisection's bit for bit wherever the decisions cross once (``tests/serving/test_spine.py``; the
serving figures sweep, ``benchmarks/sweep_serving_figures.py``: README_serving.md, "r10cold").
Where the open loop's crosses again (a decode batch beyond the CUDA-graph limit pays the eager
host time: TPOT jumps, and ``λ·(osl − 1)·TPOT(n) − n`` turns positive and then negative once
more), the stepwise bisection from the top could settle on the upper root; the search from
near the first one keeps that one, where a queue filling from empty settles and where the
replay is (``test_open_loop_keeps_the_lowest_root``).
"""

from __future__ import annotations

from collections.abc import Callable

CLOSED_SPINE_START = 2  # the spine step φ = 1 − 2⁻² where the closed loop's guess starts


def right_spine(k: int) -> float:
    """The closed loop's k-th spine point, 1 − 2⁻ᵏ (exact in floats for k ≤ 53; 0 at k = 0)."""
    return 1.0 - 2.0**-k


def left_spine(top: float, k: int) -> float:
    """The open loop's k-th spine point, top·2⁻ᵏ (exact: a power-of-two scale; top at k = 0)."""
    return top * 2.0**-k


def bracket_turn(tpot: Callable[[float], float], work: float, top: float, steps: int,
                 start: int) -> int:  # fmt: skip
    """``spine_turn`` of the open loop's spine n = top·2⁻ᵏ, whose decision at n is the
    bisection's ``work·TPOT(n) > n`` (off the spine: the root is above n), found from spine
    point ``start`` by bracketing: the turn lies in (A, B] with A the deepest step known on the
    spine and B the shallowest known off. TPOT does not fall as n grows (a bigger decode batch,
    a bigger prefill share), so a priced point n with ``r = work·TPOT(n)`` decides more than
    itself: off (r > n) makes every spine point in [n, r) off, on (r ≤ n) every one in [r, n]
    on; those are not priced. The next point priced is the one beside the bracket's known end,
    so the points priced are those around the root (each, the step costs at its batch size)."""
    a, b, k = 0, steps + 1, min(max(start, 1), steps)
    while b > a + 1:
        n = left_spine(top, k)
        r = work * tpot(n)
        if r > n:  # off at k and at every spine point in [n, r)
            j = k
            while j > a + 1 and left_spine(top, j - 1) < r:
                j -= 1
            b = min(b, j)
            k = b - 1
        else:  # on at k and at every spine point in [r, n]
            j = k
            while j < b - 1 and left_spine(top, j + 1) >= r:
                j += 1
            a = max(a, j)
            k = a + 1
    return b


# Where the open loop's bracketing search starts (decoding requests; the first spine point at or
# below it) when the step costs give no weight-streaming floor. It decides only which step costs
# are priced, never a figure: the decoding requests of the serving figures sweep's open loops
# (benchmarks/sweep_serving_figures.py: 9,126 loops, H100/B200, three engines, 128-token to 8k
# prompts) have a geometric median of 11 and half of them lie in 4-47; over the 24 rows of
# benchmarks/bench_load_cost.py a start at 16 prices 61 decode batch sizes, at 8 70, at 32 65,
# and from one request (Little's law at n = 1) 65.
OPEN_SPINE_START = 16.0

# With a floor (r13cold): the search starts at the decoding requests ``n`` of Little's law with a
# decode step of ``START_FLOOR_MULTIPLE`` × its floor, ``n = work·multiple·floor(n)``
# (``StepModel.decode_floor_seconds``: the bytes a step of ``n`` requests streams at least —
# weights, the local experts its tokens reach, the KV cache — at the usable HBM rate, without its
# kernels' fixed times, collectives and host time). Like ``OPEN_SPINE_START`` it decides only
# which step costs are priced, never a figure. Chosen on the serving figures sweep's grid
# (benchmarks/sweep_serving_figures.py, its 4,608 fresh open loops; not the benchmark's rows):
# see README_serving.md, r13cold.
START_FLOOR_MULTIPLE = 4.0
FLOOR_ITERATIONS = 8  # fixed-point steps from n = 0 (the floor grows with n: they rise to it)
FLOOR_SETTLED = 0.01  # a step that moves n by at most this share of it ends them


def open_start(top: float, steps: int, near: float = OPEN_SPINE_START) -> int:
    """The first spine step at or below ``near`` decoding requests (``steps`` when none: a
    spine that ends above it)."""
    k = 1
    while k < steps and left_spine(top, k) > near:
        k += 1
    return k


def open_near(work: float, floor: Callable[[float], float | None], graph_limit: int | None,
              top: float) -> float:  # fmt: skip
    """Where the open loop's search starts: the decoding requests ``n = work·START_FLOOR_MULTIPLE
    ·floor(n)`` (at most ``FLOOR_ITERATIONS`` steps from 0, until one moves n by at most
    ``FLOOR_SETTLED`` of it), never above the CUDA-graph limit ``graph_limit`` (beyond it a
    decode step pays the eager host time and a second root may lie there: the search from below
    keeps the first) nor ``top``; ``OPEN_SPINE_START`` where the floor is None or not a
    positive, finite time."""
    cap = top if graph_limit is None else min(top, float(graph_limit))
    n = 0.0
    for _ in range(FLOOR_ITERATIONS):
        t = floor(n)
        if t is None or not 0.0 < t < float("inf"):
            return OPEN_SPINE_START
        est = START_FLOOR_MULTIPLE * work * t
        if not 0.0 < est < float("inf"):
            return OPEN_SPINE_START
        if est >= cap:
            return cap
        if est - n <= FLOOR_SETTLED * est:  # risen to within 1 %: the spine point is its own
            return est
        n = est
    return n
