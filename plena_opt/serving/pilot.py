"""A fixed point's bisection, its decisions checked only at the two ends it lands on (issue 26).

``steady.closed_loop`` bisects φ and ``open_loop.open_loop`` bisects the decoding requests ``n``,
``BISECTION_STEPS`` steps each, one evaluation of the form per step (each one pricing step
figures at a new φ or ``n`` for the first time). Both right sides cross once (``serving.spine``),
so every decision is known once the root is: the bisection moves ``lo`` up at each midpoint below
the root and ``hi`` down at each one above it. Here the root is first *guessed* — secant steps on
``f(x) = F(x) − x``, ``F`` the form's right side (the fixed-point step ``x + f(x) = F(x)`` where
only one point is known), a handful of evaluations — then the bisection's path is walked with the
guess deciding (``bisection_path``, no evaluation) and its decisions are checked at the two ends
it lands on, with the bisection's own expression at the same floats (``pilot_bisection``). The
two ends are the deepest midpoints on each side of the root, ``2⁻ˢᵗᵉᵖˢ`` of the interval apart;
every other midpoint of the path lies beyond one of them, so with one crossing its decision is
that end's. Where an end's check fails the guess moves past it and the new path's ends are
checked; after ``PILOT_TRIES`` failures, or where two points seen show ``f`` rising (a second
crossing: ``Residual.falls``), the bisection runs step by step (every decision asked).

So [lo, hi] — and every figure read at its midpoint — are the stepwise bisection's bit for bit
wherever the decisions cross once (``tests/serving/test_pilot.py``; the serving figures sweep,
``benchmarks/sweep_serving_figures.py``: README_serving.md, "r11cold"). The guess decides only
which points are evaluated (which step figures are priced), never a figure. Nothing is fitted.
"""

from __future__ import annotations

from collections.abc import Callable

from plena_opt.serving.spine import CLOSED_SPINE_START, right_spine

PILOT_TRIES = 6  # failed end checks before the bisection runs step by step
SECANT_TRIES = 12  # evaluations of f the guess may take
SECANT_TOL = 1.0 / 16  # the guess is final once a secant step is below this share of 2⁻ˢᵗᵉᵖˢ
EDGE = 1.0 / 32  # share of the bracket a step that leaves it stops short of the edge


def bisection_path(lo: float, hi: float, steps: int, guess: float) -> tuple[float, float]:
    """[lo, hi] after ``steps`` bisection steps whose decision at midpoint m is m < ``guess``
    (True: lo = m), the floats the bisection computes."""
    for _ in range(steps):
        m = (lo + hi) / 2
        if m < guess:
            lo = m
        else:
            hi = m
    return lo, hi


class Residual:
    """``f(x) = F(x) − x`` of a fixed point, each point evaluated once (``seen``: x → f(x)).
    ``f(x) > 0`` is the bisection's decision ``F(x) > x`` exactly (a difference of two finite
    floats is 0 only when they are equal, and keeps the sign of their order)."""

    def __init__(self, f: Callable[[float], float], seen: dict[float, float] | None = None
                 ) -> None:  # fmt: skip
        self.f, self.seen = f, {} if seen is None else seen

    def __call__(self, x: float) -> float:
        v = self.seen.get(x)
        if v is None:
            v = self.seen[x] = self.f(x)
        return v

    def falls(self, lo: float, hi: float) -> bool:
        """Whether f falls (or stays) from each point seen in [``lo``, ``hi``] to the next:
        nothing seen there shows a second crossing."""
        last = None
        for x in sorted(x for x in self.seen if lo <= x <= hi):
            v = self.seen[x]
            if last is not None and v > last:
                return False
            last = v
        return True


def pilot_bisection(f: Residual, lo: float, hi: float, steps: int,
                    guess: float) -> tuple[float, float]:  # fmt: skip
    """[lo, hi] of the bisection of [``lo``, ``hi``] in ``steps`` steps whose decision at m is
    ``f(m) > 0`` (the root is above m), asking ``f`` only at the ends of ``guess``'s path
    (module docstring) while every point seen shows ``f`` falling; else step by step."""
    lo0, hi0 = lo, hi
    for _ in range(PILOT_TRIES if guess == guess else 0):  # a NaN guess: step by step
        a, b = bisection_path(lo0, hi0, steps, guess)
        if a != lo0 and not f(a) > 0.0:  # the root is below a: the path turns down there
            guess = a - (b - a) / 2
        elif b != hi0 and f(b) > 0.0:  # above b
            guess = b + (b - a) / 2
        elif f.falls(lo0, hi0):
            return a, b
        else:
            break
    for _ in range(steps):
        m = (lo + hi) / 2
        if f(m) > 0.0:
            lo = m
        else:
            hi = m
    return lo, hi


def secant_guess(f: Residual, x0: float, lo: float, hi: float, tol: float,
                 x1: float | None = None) -> float:  # fmt: skip
    """A guess at the root of ``f`` in (``lo``, ``hi``) (f falls through 0 once there) from
    ``x0``: the fixed-point step ``x0 + f(x0)`` — or, given a second point ``x1`` already
    seen (r16trim: the open loop's other bracket end), the secant step through both —, then
    secant steps, each kept inside the bracket the signs seen so far leave (a step that leaves
    it stops ``EDGE`` of the bracket short of the edge it crossed, or, twice running, halves
    the bracket), until a step is below ``tol`` or ``SECANT_TRIES`` evaluations are spent."""
    f0 = f(x0)
    if f0 > 0.0:
        lo = x0 if x0 > lo else lo
    else:
        hi = x0 if x0 < hi else hi
    x = x0 + f0  # the fixed-point step F(x0)
    if x1 is not None:
        f1 = f(x1)
        if f1 > 0.0:
            lo = x1 if x1 > lo else lo
        else:
            hi = x1 if x1 < hi else hi
        if f1 != f0:
            x = x0 - f0 * (x0 - x1) / (f0 - f1)
    out = False  # whether the last step left the bracket
    for _ in range(SECANT_TRIES):
        if lo < x < hi:
            out = False
        elif out:
            x = (lo + hi) / 2
        else:
            x, out = (lo + EDGE * (hi - lo) if x <= lo else hi - EDGE * (hi - lo)), True
        if hi - lo <= tol:
            return x
        fx = f(x)
        if fx == 0.0:
            return x
        if fx > 0.0:
            lo = x
        else:
            hi = x
        slope = fx - f0
        step = -fx * (x - x0) / slope if slope != 0.0 else (hi - lo) / 2
        x0, f0 = x, fx
        x = x + step
        if -tol < step < tol:
            return x if lo < x < hi else x0
    return x


def closed_pilot(at: Callable[[float], tuple[float, float]], k: int,
                 steps: int) -> tuple[float, float]:  # fmt: skip
    """[lo, hi] of the closed loop's bisection of φ on [0, 1] in ``steps`` steps, whose decision
    at φ is ``k·TPOT / (TTFT + k·TPOT) > φ`` (``at``: φ → (TTFT, TPOT); ``k`` = osl − 1),
    guessed from φ = 3/4 (``spine.CLOSED_SPINE_START``: its decode batches are the root's,
    (C − 1)·φ ≥ 3/4 of the others) and checked at the path's ends (module docstring)."""

    def right(phi: float) -> float:  # F(φ) − φ, F as the decision reads it
        ttft, tpot = at(phi)
        a = k * tpot
        return a / (ttft + a) - phi

    f = Residual(right)
    if k <= 0:  # no decode step: the right side is 0, every decision False
        guess = 0.0
    else:
        tol = SECANT_TOL * 2.0**-steps
        guess = secant_guess(f, right_spine(CLOSED_SPINE_START), 0.0, 1.0, tol)
    return pilot_bisection(f, 0.0, 1.0, steps, guess)
