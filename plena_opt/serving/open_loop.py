"""Open loop: requests arrive at a Poisson rate (``vllm bench serve --request-rate λ``).

Steady state: with ``n`` requests decoding on average, each step carries ``p = n·isl / (osl − 1)``
prompt tokens (as many prompts start as finish), so TPOT is the mean step of ``steady._cycle``'s
form and ``n`` is the root of ``n = λ·(osl − 1)·TPOT(n)`` (Little's law for the decoding
requests), found by bisection on [0, the running cap], its first steps taken from near the
root (``serving.spine``). Where there are two (a decode batch beyond the CUDA-graph limit pays
the eager host time, and TPOT jumps), the lower one: the state a queue filling from empty
settles in, and the replay's. No root (or prompts beyond the step budget) means the rate
exceeds what the plan serves: refused naming ``request_rate``. A request
arriving at a random time first waits for the step in flight (half a step on average), then its
prompt's steps, stretched by the others' prompts as in the closed loop. The replay draws the
arrivals from ``random.Random(seed)`` and runs the same scheduler step by step. The two agree
on the means (TTFT within 20 %, TPOT within 10 %) up to about half the rate the plan serves;
nearer saturation the steady state runs high (the single-queue wait factor overstates the
prompt queue: at two thirds of the rate TPOT +15 %, at the edge TTFT several times the replay's).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.serving.adp_prefill import ranks_prefilling_together
from plena_opt.serving.host_overlap import chunk_in_decode_window, decoders_hiding
from plena_opt.serving.pilot import SECANT_TOL, Residual, pilot_bisection, secant_guess
from plena_opt.serving.replay import MAX_REPLAY_STEPS, _Lengths, _metrics
from plena_opt.serving.request_path import cycles_spread
from plena_opt.serving.spine import (
    OPEN_SPINE_START,
    bracket_turn,
    left_spine,
    open_near,
    open_start,
)
from plena_opt.serving.steady import BISECTION_STEPS, SATURATED_U
from plena_opt.serving.workload import MAX_TOKENS, ServingMetrics, ServingWorkload

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel

MAX_RATE = 1e6  # requests/s a workload may name


@dataclass(frozen=True)
class OpenLoopWorkload:
    """Requests of ``input_len``/``output_len`` tokens arriving at ``request_rate_per_s``
    (Poisson); ``range_ratio`` as ``ServingWorkload``'s (the replay draws the lengths)."""

    request_rate_per_s: float
    input_len: int
    output_len: int
    range_ratio: float = 0.0

    def __post_init__(self) -> None:
        r = self.request_rate_per_s
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= MAX_RATE:
            raise PlenaInputError("request_rate", f"request_rate must be in (0, {MAX_RATE:g}] /s")
        ServingWorkload(1, self.input_len, self.output_len, self.range_ratio)  # same checks
        if self.input_len > MAX_TOKENS:  # pragma: no cover - checked above
            raise PlenaInputError("input_len", "too long")


def _tpot(step: StepModel, wl: OpenLoopWorkload, n: float) -> tuple[float, float]:
    """(TPOT, prompt tokens per step) with ``n`` requests decoding."""
    return _tpot_at(step, wl)(n)


def _tpot_at(step: StepModel, wl: OpenLoopWorkload) -> Callable[[float], tuple[float, float]]:
    """``_tpot`` as a function of ``n`` alone, its constants bound once (the bisection calls it
    41 times); each ``min``/``max`` written as the comparison that picks the same operand."""
    isl, osl, eng = wl.input_len, wl.output_len, step.engine
    budget, host, fisl = eng.budget_tokens, eng.host_step_seconds, float(isl)
    decode, prefill = step.decode_seconds, step.prefill_seconds
    lines_get, pget = step.decode_lines.get, step.prefill_kept  # as ``steady._cycle_solver``
    eager = getattr(step.costs, "host_seconds", 0.0)  # as ``steady._cycle_solver``
    balanced = eng.adp_ranks > 1 and eng.adp_timeout_iters > 0
    # Poisson arrivals are spread (``request_path.cycles_spread``): the host dispatch overlapped
    in_window = chunk_in_decode_window if cycles_spread(wl) else _additive

    def at(n: float) -> tuple[float, float]:
        p = n * isl / (osl - 1) if osl > 1 else 0.0
        room = budget - n
        room = room if room > 1.0 else 1.0
        chunk = room if room < fisl else fisl  # min(isl, max(1, budget − n))
        # balanced attention-DP ranks prefill g chunks in one step (``serving.adp_prefill``)
        g = ranks_prefilling_together(eng, n / (osl - 1)) if balanced and osl > 1 else 1.0
        share = p / (g * chunk)
        share = share if share < 1.0 else 1.0
        lo = int(n)
        line = lines_get(lo) if n >= 1 else None  # decode(n) from a kept line
        t = decode(n) if line is None else line[0] + (n - lo) * line[1]
        if p > 0:  # prefill(max(p, g·chunk)) tokens, a kept count read inline
            x = g * chunk if g * chunk > p else p
            mixed = pget(x)
            if mixed is None:
                mixed = prefill(x)
            mixed = in_window(mixed, eager, t, eng)  # ``serving.host_overlap``
        else:
            mixed = 0.0
        return t + share * mixed + host, p

    return at


def _additive(prefill_s: float, *_: object) -> float:
    """A prompt chunk's whole latency in the steps around it (no host overlap)."""
    return prefill_s


def _bisection(at: Callable[[float], tuple[float, float]], work: float, top: float,
               chunked: float, near: float = OPEN_SPINE_START) -> tuple[float, float]:  # fmt: skip
    """[lo, hi] of the bisection of ``n`` on [0, ``top``] whose decision at n is ``work·TPOT(n)
    > n`` (``work`` = λ·(osl − 1)): its first steps down the spine n = top·2⁻ᵏ found by
    bracketing from ``near`` decoding requests (``serving.spine.bracket_turn``; ``open_near``), so
    the step costs priced are those around the root, not every batch size from ``top`` down;
    the rest guessed from the spine points seen and checked at its ends (``serving.pilot``)
    where the prompt tokens per step stay below one chunk up to the bracket's top (below
    ``chunked`` decoding requests). Above it a step's prompt part is whole prompts, read
    between prompt counts whose prefill figures need not grow evenly (pipelined plans: a
    sawtooth in ``work·TPOT(n) − n``, roots close together; README_serving.md, r11cold), so
    the rest is bisected step by step."""
    seen: dict[float, float] = {}  # n → work·TPOT(n) − n at the spine points priced

    def tpot(n: float) -> float:
        t = at(n)[0]
        seen[n] = work * t - n
        return t

    turn = _turn(tpot, work, top, chunked, near)
    if turn > BISECTION_STEPS:  # every step on the spine: [0, top·2⁻ˢᵗᵉᵖˢ]
        return 0.0, left_spine(top, BISECTION_STEPS)
    lo, hi = left_spine(top, turn), left_spine(top, turn - 1)
    left = BISECTION_STEPS - turn
    if left == 0:
        return lo, hi
    f = Residual(lambda n: work * at(n)[0] - n, seen)
    if hi >= chunked:  # whole prompts per step: TPOT may rise faster than 1 / work
        return pilot_bisection(f, lo, hi, left, math.nan)  # (step by step)
    ends = [n for n in seen if lo <= n <= hi]  # the bracket's priced ends
    x0 = min(ends, key=lambda n: abs(seen[n])) if ends else (lo + hi) / 2
    # both ends priced (the usual bracket): the first step is the secant through them
    x1 = (lo if x0 == hi else hi) if len(ends) == 2 else None
    guess = secant_guess(f, x0, lo, hi, SECANT_TOL * (hi - lo) * 2.0**-left, x1)
    return pilot_bisection(f, lo, hi, left, guess)


def _turn(tpot: Callable[[float], float], work: float, top: float, chunked: float,
          near: float) -> int:  # fmt: skip
    """The spine step where the bisection turns (``bracket_turn``), searched from ``near``
    decoding requests where that start, the fixed start ``OPEN_SPINE_START`` and the turn found
    all lie below ``chunked`` (where ``work·TPOT(n) − n`` crosses zero once, so every start
    finds the same turn); else from ``OPEN_SPINE_START`` (whole prompts per step: a sawtooth
    whose roots lie close together, where another start may find another one)."""
    steps = BISECTION_STEPS
    if near != OPEN_SPINE_START and near < chunked and OPEN_SPINE_START < chunked:
        turn = bracket_turn(tpot, work, top, steps, open_start(top, steps, near))
        if left_spine(top, min(turn, steps) - 1) < chunked:
            return turn
    return bracket_turn(tpot, work, top, steps, open_start(top, steps))


def open_loop(step: StepModel, wl: OpenLoopWorkload) -> ServingMetrics:
    """Mean TTFT, TPOT and E2E at the arrival rate; raises naming ``request_rate`` when the
    plan cannot keep up."""
    lam, isl, osl = wl.request_rate_per_s, wl.input_len, wl.output_len
    budget = step.engine.budget_tokens
    top = float(min(step.engine.max_running or budget - 1, budget - 1))
    lo, hi = 0.0, top
    at = _tpot_at(step, wl)
    if osl > 1:  # below ``chunked``: n·isl / (osl − 1) < min(isl, budget − n) prompt tokens
        chunked = min(osl - 1, budget * (osl - 1) / (isl + osl - 1))
        work = lam * (osl - 1)
        key = ("open_near", work, top)  # the search's start from the decode floor (``spine``)
        near = step.memo.get(key)
        if near is None:
            limit = step.engine.cuda_graph_max_batch
            near = step.memo[key] = open_near(work, step.decode_floor_reader(), limit, top)
        lo, hi = _bisection(at, work, top, chunked, near)
    n = (lo + hi) / 2 if osl > 1 else 0.0
    tpot, p = at(n)
    prompt_rate = lam * step.step_seconds(isl, 0) if osl == 1 else 0.0
    if n >= top * (1 - 1e-9) or p > budget - n or prompt_rate >= 1:
        raise PlenaInputError("request_rate", f"{lam:g} requests/s is more than the plan serves "
                              "with this engine (the queue grows without bound)")  # fmt: skip
    room = max(1.0, budget - n)
    chunk = min(float(isl), room)
    u = min(SATURATED_U, p / room)
    # a prefill-first engine decodes nobody in the step that carries a prompt (as ``_cycle``)
    own = step.step_seconds(min(room, chunk + p), n if step.engine.mixed_prefill else 0)
    ttft = tpot / 2 + max(1.0, isl / room) * own * (1 + u / (2 * (1 - u)))
    e2e = ttft + (osl - 1) * tpot
    return ServingMetrics.means(ttft, tpot, e2e, lam, lam * osl, lam * osl / step.gpus,
                          1 / tpot if tpot > 0 else 0.0, n)  # fmt: skip


def replay_open_loop(step: StepModel, wl: OpenLoopWorkload, measured: int = 256,
                     seed: int = 0) -> ServingMetrics:  # fmt: skip
    """Replay ``measured`` Poisson arrivals after as many warm-up ones."""
    total = 2 * measured
    rng = random.Random(seed)
    draw = _Lengths(ServingWorkload(1, wl.input_len, wl.output_len, wl.range_ratio), seed + 1)
    arrival, t = [], 0.0
    for _ in range(total):
        t += rng.expovariate(wl.request_rate_per_s)
        arrival.append(t)
    first, finish = [0.0] * total, [0.0] * total
    start: dict[int, float] = {}  # request -> its first token's step end (``first`` less a lag)
    left = [draw(i)[0] for i in range(total)]
    eng, cap = step.engine, step.engine.max_running or total
    waiting: deque[int] = deque()
    prefilling: list[int] = []
    decoding: list[list] = []  # [request, tokens left, seconds waited in prompt-only steps]
    t, nxt, done, steps, spread, before = 0.0, 0, 0, 0, cycles_spread(wl), 0
    gaps: list[tuple[float, int]] = []  # (step seconds, measured requests given a token in it)
    while done < total:
        steps += 1
        if steps > MAX_REPLAY_STEPS:
            raise PlenaInputError("request_rate", "the replay exceeds its step bound")
        if not (waiting or prefilling or decoding):
            t = max(t, arrival[nxt])
        while nxt < total and arrival[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        while waiting and len(prefilling) + len(decoding) < cap:
            prefilling.append(waiting.popleft())
        # a prefill-first engine decodes nobody in a step that carries prompt tokens
        n = 0 if prefilling and not eng.mixed_prefill else len(decoding)
        room, tokens, firsts = eng.budget_tokens - n, 0, []
        for r in prefilling:
            if room <= 0:
                break
            k = min(left[r], room)
            left[r], room, tokens = left[r] - k, room - k, tokens + k
            firsts += [r] if left[r] == 0 else []
        dt, late = step.step_seconds(tokens, n), 0.0
        # the chunk's host dispatch hidden from the decoders, not its prompts, as the closed
        # replay hides it (``serving.host_overlap``)
        around = decoders_hiding(eng, n, before, spread)
        if tokens and around:
            seen = step.window_seconds(tokens, n, around)
            dt, late = seen, dt - seen
        t, before = t + dt, n
        done += _decode(decoding, n, dt, t, measured, gaps, finish)
        decoding = [d for d in decoding if d[1] > 0]
        for r in firsts:
            prefilling.remove(r)
            first[r], start[r] = t + late, t
            if draw(r)[1] > 1:
                decoding.append([r, draw(r)[1] - 1, 0.0])
            else:
                finish[r], done = t, done + 1
    ids = range(measured, total)
    m = _metrics(arrival, first, finish, ids, [draw(i)[1] for i in ids],
                 ServingWorkload(1, wl.input_len, wl.output_len), step.gpus, gaps,
                 start)  # fmt: skip
    lam = wl.request_rate_per_s
    from dataclasses import replace

    return replace(m, request_throughput_per_s=lam, output_tps=lam * wl.output_len,
                   output_tps_per_gpu=lam * wl.output_len / step.gpus,
                   decode_batch=lam * (wl.output_len - 1) * m.tpot_seconds)  # fmt: skip


def _decode(decoding: list[list], n: int, dt: float, t: float, measured: int,
            gaps: list[tuple[float, int]], finish: list[float]) -> int:  # fmt: skip
    """One step of ``dt`` seconds ending at ``t`` for ``decoding`` ([request, tokens left,
    seconds waited]): a token each when the step decodes (``n`` > 0), its gap the step plus
    the prompt-only steps it waited out (prefill-first); else they wait it out. Appends the
    measured requests' (gap, count) to ``gaps``; returns the requests finished (``finish``)."""
    if decoding and not n:  # a prefill-first prompt step: the decoders wait it out
        for d in decoding:
            d[2] += dt
        return 0
    if decoding and decoding[0][2]:  # the oldest waited (so did any that did): gaps by request
        by: dict[float, int] = {}
        for d in decoding:
            if d[0] >= measured:
                by[dt + d[2]] = by.get(dt + d[2], 0) + 1
            d[2] = 0.0
        gaps.extend(by.items())
    else:
        gaps.append((dt, sum(d[0] >= measured for d in decoding)))
    done = 0
    for d in decoding:
        d[1] -= 1
        if d[1] == 0:
            finish[d[0]], done = t, done + 1
    return done
