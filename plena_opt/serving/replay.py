"""Discrete-event replay of a continuous-batching engine under a closed-loop benchmark.

``concurrency`` clients start together (the benchmark's first burst); whenever a request finishes,
its client sends the next one at once (it joins the queue at the end of that step). Each step
(``EngineModel``): every running request past its prompt gets one token; the rest of the token
budget goes to prompt chunks of the admitted requests, then of waiting ones in arrival order, as
long as fewer than ``max_running`` requests run (a prefill-first engine, ``mixed_prefill``
False, gives no decode token in a step that carries prompt tokens). A request's first token
comes at the end of the step that finishes its prompt (TTFT from its arrival); TPOT = (finish −
first token) / (output − 1). With drawn lengths an arrival that finds the engine busy also
misses the step started while it was on its way (``request_path.IN_FLIGHT_STEPS``). The first
``WARMUP_WAVES × concurrency`` requests (the initial burst and its echoes) are not measured: the
steady state is what ``steady.closed_loop`` models.
"""

from __future__ import annotations

import random
from collections import deque
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.serving.engines import OVERLAP_ADMISSION_STEPS
from plena_opt.serving.host_overlap import decoders_hiding
from plena_opt.serving.request_path import IN_FLIGHT_STEPS, cycles_spread
from plena_opt.serving.workload import ServingMetrics, percentile, weighted_percentile

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel
    from plena_opt.serving.workload import ServingWorkload

MAX_REPLAY_STEPS = 2_000_000  # bounds one replay's loop
WARMUP_WAVES = 4  # requests of the first 4·C are not measured (the burst and its echoes)


def replay_closed_loop(
    step: StepModel,
    wl: ServingWorkload,
    measured: int | None = None,
    seed: int = 0,
    warmup_waves: int = WARMUP_WAVES,
) -> ServingMetrics:
    """Replay until ``measured`` requests (default max(4·C, 64)) after the first
    ``warmup_waves × C`` (0: a benchmark run measured from its start burst) finish.
    With drawn lengths (``request_path.cycles_spread``) the decoders see a prompt chunk's eager
    host dispatch overlapped (``serving.host_overlap``) and an arrival misses the step in flight;
    fixed lengths keep every step additive, as ``steady``'s lock-step form. Lengths drawn with
    ``random.Random(seed)``."""
    c, eng, draw = wl.concurrency, step.engine, _Lengths(wl, seed)
    total = warmup_waves * c + (measured if measured is not None else max(4 * c, 64))
    cap = eng.max_running or total
    if eng.budget_tokens <= min(c, cap):
        raise PlenaInputError("budget_tokens", "the step budget must exceed the running requests")
    arrival, first, finish = [0.0] * c, [0.0] * c, [0.0] * c
    start: dict[int, float] = {}  # request -> its first token's step end (``first`` less any lag)
    left_prompt = [draw(i)[0] for i in range(c)]
    waiting: deque[int] = deque(range(c))  # not yet admitted, in arrival order
    prefilling: list[int] = []  # admitted, prompt not done
    lo = warmup_waves * c
    decoding = _Decoding(lo, total)
    # ended: requests finished in the last step; before: requests the last step decoded
    t, steps, done, ended, before = 0.0, 0, 0, 0, 0
    gaps: list[tuple[float, int]] = []  # (seconds since a request's last token, requests)
    came: dict[int, int] = {}  # request -> the step at whose end it arrived (burst: none)
    lag = 1 + (OVERLAP_ADMISSION_STEPS if eng.overlap_schedule else 0)
    spread = cycles_spread(wl)  # the step in flight and the host overlap: drawn lengths only
    while done < total:
        if not prefilling and decoding.count and (not waiting or decoding.count >= cap):
            # decode-only steps up to the next finish: nothing is admitted, nothing arrives
            dt, before = step.step_seconds(0, decoding.count), decoding.count
            t, coasted = decoding.coast(t, dt, gaps, MAX_REPLAY_STEPS - steps)
            steps += coasted
            ended = 0 if coasted else ended
        steps += 1
        if steps > MAX_REPLAY_STEPS:
            raise PlenaInputError("concurrency", "the replay exceeds its step bound")
        # with drawn lengths an arrival misses the step the engine started while it was on its
        # way, unless the engine had nothing else to run (``request_path.IN_FLIGHT_STEPS``)
        wait = lag + IN_FLIGHT_STEPS if spread and (prefilling or decoding.count) else lag
        _admit(waiting, prefilling, cap - decoding.count, came, steps - wait)
        arrived = len(arrival)
        # a prefill-first engine decodes nobody in a step that carries prompt tokens
        n = 0 if prefilling and not eng.mixed_prefill else decoding.count
        tokens, firsts = _take_prompts(prefilling, left_prompt, eng.budget_tokens - n)
        # overlap: an arrival waits out the step prepared before it came; with nothing else to
        # run that step still decodes the requests whose finish it had not yet seen
        m = n if tokens or n or not waiting else ended
        dt, late = step.step_seconds(tokens, m), 0.0
        # the decoders see a prompt chunk's host dispatch hidden behind the decode step in it
        # or (prefill-first) before it; its own prompts wait it out (``serving.host_overlap``)
        around = decoders_hiding(eng, m, before, spread)
        if tokens and around:
            seen = step.window_seconds(tokens, m, around)
            dt, late = seen, dt - seen
        before = n
        t += dt
        ended = done
        if n:  # prefill-first: else the decoding requests wait out this step
            by_gap, finished = decoding.advance(t)
            gaps.extend(by_gap.items())
            for r in finished:
                done += _finish(r, t, total, arrival, first, finish, left_prompt, waiting, draw)
        for r in firsts:
            prefilling.remove(r)
            first[r], start[r] = t + late, t
            if draw(r)[1] > 1:
                decoding.join(r, draw(r)[1] - 1, t)
            else:
                done += _finish(r, t, total, arrival, first, finish, left_prompt, waiting, draw)
        ended = done - ended
        if len(arrival) > arrived:
            came.update((r, steps) for r in range(arrived, len(arrival)))
    ids = range(lo, total)
    return _metrics(arrival, first, finish, ids, [draw(i)[1] for i in ids], wl, step.gpus, gaps,
                    start)  # fmt: skip


def _admit(waiting: deque[int], prefilling: list[int], room: int, came: dict[int, int],
           by: int) -> None:  # fmt: skip
    """Admit waiting requests in arrival order while fewer than ``room`` requests prefill and
    the first waiting one arrived by the end of step ``by`` (the start burst: always)."""
    while waiting and len(prefilling) < room and came.get(waiting[0], -1) <= by:
        prefilling.append(waiting.popleft())


def _take_prompts(prefilling: list[int], left: list[int], room: int) -> tuple[int, list[int]]:
    """This step's prompt tokens, up to ``room``, from the admitted requests in admission order
    (``left``: each request's prompt tokens still to run, reduced in place): (tokens, the
    requests whose prompt it completes)."""
    tokens, firsts = 0, []
    for r in prefilling:
        if room <= 0:
            break
        k = min(left[r], room)
        left[r] -= k
        room, tokens = room - k, tokens + k
        if left[r] == 0:
            firsts.append(r)
    return tokens, firsts


def _finish(
    r: int,
    t: float,
    total: int,
    arrival: list[float],
    first: list[float],
    finish: list[float],
    left: list[int],
    waiting: deque[int],
    draw: _Lengths,
) -> int:
    """Request ``r`` finished at ``t``: its client sends the next request (``_arrive``); 1 if
    ``r`` is one of the ``total`` counted requests, else 0."""
    finish[r] = t
    _arrive(arrival, first, finish, left, waiting, t, draw)
    return 1 if r < total else 0


class _Decoding:
    """The requests past their prompt: the decode step at which each finishes and, in the order
    they joined, runs of requests whose last token came at the same time (with how many of them
    are measured, ids ``lo``..``hi − 1``). Every decode step gives each of them one token, so a
    step costs a few runs, not one entry per request."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi, self.count, self.steps = lo, hi, 0, 0
        self.ends: dict[int, list[int]] = {}  # decode step -> requests finishing, join order
        self.runs: list[list] = []  # [time of the last token, measured requests], join order

    def join(self, r: int, tokens: int, t: float) -> None:
        """Request ``r`` got its first token at ``t`` and has ``tokens`` (≥ 1) still to come."""
        self.count += 1
        self.ends.setdefault(self.steps + tokens, []).append(r)
        m = 1 if self.lo <= r < self.hi else 0
        if self.runs and self.runs[-1][0] == t:
            self.runs[-1][1] += m
        else:
            self.runs.append([t, m])

    def coast(self, t: float, dt: float, gaps: list, most: int) -> tuple[float, int]:
        """Up to ``most`` decode steps of ``dt`` seconds each from ``t`` in which nobody finishes
        (all of them got their last token at ``t``), their gaps appended to ``gaps`` as
        ``advance`` gives them: (the time after them, how many)."""
        if len(self.runs) != 1 or self.runs[0][0] != t:
            return t, 0
        k = min(most, min(self.ends) - self.steps - 1)
        measured = self.runs[0][1]
        for _ in range(k):
            after = t + dt
            if measured:
                gaps.append((after - t, measured))
            t = after
        self.steps += max(0, k)
        self.runs = [[t, measured]]
        return t, max(0, k)

    def advance(self, t: float) -> tuple[dict[float, int], list[int]]:
        """One token each at ``t``: the measured requests' inter-token gaps counted by value (in
        join order of their first request) and the requests that finish, in join order."""
        out: dict[float, int] = {}
        measured = 0
        for last, m in self.runs:
            if m:
                out[t - last] = out.get(t - last, 0) + m
                measured += m
        self.steps += 1
        finished = self.ends.pop(self.steps, [])
        self.count -= len(finished)
        measured -= sum(1 for r in finished if self.lo <= r < self.hi)
        self.runs = [[t, measured]] if self.count else []
        return out, finished


class _Lengths:
    """(input, output) tokens of request ``i``, drawn in request order from one seeded stream."""

    def __init__(self, wl: ServingWorkload, seed: int) -> None:
        self.wl, self.rng, self.drawn = wl, random.Random(seed), []  # type: list[tuple[int, int]]

    def _one(self, length: int) -> int:
        r = self.wl.range_ratio
        if r == 0:
            return length
        return max(1, round(self.rng.uniform(length * (1 - r), length * (1 + r))))

    def __call__(self, i: int) -> tuple[int, int]:
        while len(self.drawn) <= i:
            self.drawn.append((self._one(self.wl.input_len), self._one(self.wl.output_len)))
        return self.drawn[i]


def _arrive(arrival: list[float], first: list[float], finish: list[float], left: list[int],
            waiting: deque[int], t: float, draw: _Lengths) -> None:  # fmt: skip
    """A client's next request arrives at ``t``."""
    left.append(draw(len(arrival))[0])
    waiting.append(len(arrival))
    arrival.append(t)
    first.append(0.0)
    finish.append(0.0)


def _metrics(arrival: list[float], first: list[float], finish: list[float], ids: range,
             outs: list[int], wl: ServingWorkload, gpus: int,
             gaps: list[tuple[float, int]] | None = None,
             start: dict[int, float] | None = None) -> ServingMetrics:  # fmt: skip
    """The means and percentiles of requests ``ids``; ``gaps``: (inter-token seconds, count);
    ``start``: where a request's decode began, when not at its first token (TPOT from there)."""
    ttft = [first[i] - arrival[i] for i in ids]
    e2e = [finish[i] - arrival[i] for i in ids]
    osl = wl.output_len
    at = start or {}
    tpot = [
        (finish[i] - at.get(i, first[i])) / (o - 1) if o > 1 else 0.0
        for i, o in zip(ids, outs, strict=True)
    ]
    mean_tpot = sum(tpot) / len(tpot)
    mean_e2e = sum(e2e) / len(e2e)
    x = wl.concurrency / mean_e2e  # Little's law: C clients, no think time
    return ServingMetrics(
        ttft_seconds=sum(ttft) / len(ttft),
        tpot_seconds=mean_tpot,
        e2e_seconds=mean_e2e,
        request_throughput_per_s=x,
        output_tps=x * osl,
        output_tps_per_gpu=x * osl / gpus,
        output_tps_per_user=1.0 / mean_tpot if mean_tpot > 0 else 0.0,
        decode_batch=wl.concurrency * (osl - 1) * mean_tpot / mean_e2e,
        ttft_p50_seconds=percentile(ttft, 50),
        ttft_p90_seconds=percentile(ttft, 90),
        ttft_p99_seconds=percentile(ttft, 99),
        tpot_p50_seconds=percentile(tpot, 50),
        tpot_p90_seconds=percentile(tpot, 90),
        tpot_p99_seconds=percentile(tpot, 99),
        e2e_p50_seconds=percentile(e2e, 50),
        e2e_p90_seconds=percentile(e2e, 90),
        e2e_p99_seconds=percentile(e2e, 99),
        **_itl(gaps or []),
    )


def _itl(gaps: list[tuple[float, int]]) -> dict[str, float]:
    """Mean and percentiles of the pooled inter-token gaps (none: no fields)."""
    count = sum(n for _, n in gaps)
    if not count:
        return {}
    by_value: dict[float, int] = {}  # equal gaps merged: the same nearest-rank percentiles
    for v, n in gaps:
        by_value[v] = by_value.get(v, 0) + n
    merged = list(by_value.items())
    return {"itl_seconds": sum(v * n for v, n in gaps) / count,
            "itl_p50_seconds": weighted_percentile(merged, 50),
            "itl_p90_seconds": weighted_percentile(merged, 90),
            "itl_p99_seconds": weighted_percentile(merged, 99)}  # fmt: skip
