"""The closed-loop replay's decode runs and decode-only stretches equal a per-request replay.

``replay_closed_loop`` keeps the decoding requests as runs (one entry per group whose last token
came at the same time) and steps through decode-only stretches without the scheduler; the
reference below is the per-request loop it replaced. Every metric must be the same number.
"""

from __future__ import annotations

from collections import deque

import pytest

from plena_opt.serving import EngineModel, ServingWorkload, StepModel, replay_closed_loop
from plena_opt.serving.engines import OVERLAP_ADMISSION_STEPS
from plena_opt.serving.replay import _arrive, _Lengths, _metrics
from plena_opt.serving.request_path import IN_FLIGHT_STEPS
from plena_opt.serving.workload import weighted_percentile
from tests.serving.test_serving import LinearCosts


def _reference(step: StepModel, wl: ServingWorkload, measured: int, warmup: int, seed: int):
    """(arrival, first, finish, ids, outs, gaps) of the per-request replay."""
    c, eng = wl.concurrency, step.engine
    total, draw = warmup * c + measured, _Lengths(wl, seed)
    cap = eng.max_running or total
    arrival, first, finish = [0.0] * c, [0.0] * c, [0.0] * c
    start: dict[int, float] = {}
    left = [draw(i)[0] for i in range(c)]
    waiting, prefilling, decoding = deque(range(c)), [], []
    t, steps, done, ended, gaps, lo, came = 0.0, 0, 0, 0, [], warmup * c, {}
    before = 0
    lag = 1 + (OVERLAP_ADMISSION_STEPS if eng.overlap_schedule else 0)
    while done < total:
        steps += 1
        busy = wl.range_ratio > 0 and (prefilling or decoding)  # the step in flight
        wait = lag + IN_FLIGHT_STEPS if busy else lag
        while (waiting and len(prefilling) + len(decoding) < cap
               and came.get(waiting[0], -1) <= steps - wait):  # fmt: skip
            prefilling.append(waiting.popleft())
        arrived = len(arrival)
        n = 0 if prefilling and not eng.mixed_prefill else len(decoding)
        room, tokens, firsts = eng.budget_tokens - n, 0, []
        for r in prefilling:
            if room <= 0:
                break
            k = min(left[r], room)
            left[r] -= k
            room, tokens = room - k, tokens + k
            if left[r] == 0:
                firsts.append(r)
        m = n if tokens or n or not waiting else ended
        dt, late = step.step_seconds(tokens, m), 0.0
        # drawn lengths only: fixed lengths keep additive steps (``request_path.cycles_spread``)
        around = (m if eng.mixed_prefill else before) if wl.range_ratio > 0 else 0
        if tokens and around:  # the decoders see the chunk's host dispatch hidden
            dt, late = step.window_seconds(tokens, m, around), dt
            late -= dt
        before = n
        t += dt
        ended = done
        if n or not decoding:
            out: dict[float, int] = {}
            for r, _, last in decoding:
                if lo <= r < total:
                    out[t - last] = out.get(t - last, 0) + 1
            gaps.extend(out.items())
            still = []
            for d in decoding:
                d[1], d[2] = d[1] - 1, t
                if d[1] > 0:
                    still.append(d)
                else:
                    finish[d[0]] = t
                    done += d[0] < total
                    _arrive(arrival, first, finish, left, waiting, t, draw)
            decoding = still
        for r in firsts:
            prefilling.remove(r)
            first[r], start[r] = t + late, t
            if draw(r)[1] > 1:
                decoding.append([r, draw(r)[1] - 1, t])
            else:
                finish[r] = t
                done += r < total
                _arrive(arrival, first, finish, left, waiting, t, draw)
        ended = done - ended
        came.update((r, steps) for r in range(arrived, len(arrival)))
    ids = range(lo, total)
    return arrival, first, finish, ids, [draw(i)[1] for i in ids], gaps, start


ENGINES = [  # (budget, max running, graph limit, host s, mixed prefill, overlap)
    (2048, None, None, 0.0, True, False),
    (2048, 8, 4, 1e-3, True, False),
    (512, 16, None, 0.0, False, True),
    (4096, None, 8, 2e-4, True, True),
    (1024, 4, None, 0.0, False, False),
]
WORKLOADS = [(1, 128, 16, 0.0), (4, 512, 64, 0.0), (16, 512, 64, 0.5), (7, 3000, 33, 0.3),
             (32, 100, 2, 0.0), (9, 200, 1, 0.0), (24, 700, 300, 0.8)]  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
def test_replay_equals_the_per_request_replay(engine) -> None:
    budget, running, graphs, host, mixed, overlap = engine
    eng = EngineModel("t", budget, running, graphs, host, mixed_prefill=mixed,
                      overlap_schedule=overlap)  # fmt: skip
    step = StepModel(LinearCosts(), eng, gpus=2)  # type: ignore[arg-type]
    for c, isl, osl, ratio in WORKLOADS:
        wl = ServingWorkload(c, isl, osl, ratio)
        for measured, warmup, seed in ((max(4 * c, 64), 4, 0), (3 * c, 0, 0), (2 * c, 1, 5)):
            got = replay_closed_loop(step, wl, measured, seed, warmup)
            arrival, first, finish, ids, outs, gaps, start = _reference(
                step, wl, measured, warmup, seed
            )
            assert got == _metrics(arrival, first, finish, ids, outs, wl, 2, gaps, start)
            if any(n for _, n in gaps):  # the ITL percentiles of the unmerged gaps
                for q in (50, 90, 99):
                    assert getattr(got, f"itl_p{q}_seconds") == weighted_percentile(gaps, q)


def test_steady_state_memo_keeps_every_workload_apart() -> None:
    """The step model keeps lock-step groups and prefill times across calls: a step model warmed
    by other workloads (other lengths, clients, engines' groupings) gives each workload exactly
    what a fresh one gives."""
    from plena_opt.serving import closed_loop

    eng = EngineModel("t", 2048, None, 4, 1e-3)
    loads = [ServingWorkload(c, isl, 64, 0.0) for c in (3, 8, 64) for isl in (100, 700, 1000, 3000)]
    loads.append(ServingWorkload(16, 512, 64, 0.5))
    fresh = [closed_loop(StepModel(LinearCosts(), eng, gpus=2), wl) for wl in loads]  # type: ignore[arg-type]
    shared = StepModel(LinearCosts(), eng, gpus=2)  # type: ignore[arg-type]
    for wl, want in reversed(list(zip(loads, fresh, strict=True))):
        assert closed_loop(shared, wl) == want
    assert any(k[0] == "lockstep" for k in shared.memo)
