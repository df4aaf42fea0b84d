"""The Monte Carlo, the serving re-check and the search re-check stop at fine grain on a deadline
or cancel token and keep what is done (issue 10)."""

from __future__ import annotations

import threading
import time

import numpy as np

from plena_opt.simulator.engine import parse_noise, simulate
from plena_opt.simulator.scheduler import build_schedule
from plena_opt.stop import Stopped, StopToken

NOISE = parse_noise("sigma=0.05,rank=0.03")


def _plan(pp: int = 8, m: int = 200):
    plan = build_schedule("1f1b", pp, m, 1)
    return plan, {"F": 1.0, "B": 2.0}


def test_token_reasons_deadline_cancel_and_parent():
    tok = StopToken.within(0.05)
    assert not tok.is_set() and tok.reason == ""
    time.sleep(0.06)
    assert tok.is_set() and tok.reason == "deadline"
    parent = StopToken()
    child = StopToken.within(60, parent=parent)
    parent.set("shutdown")
    assert child.is_set() and child.reason == "shutdown"
    child.set("cancelled")  # its own flag wins from now on
    assert child.reason == "cancelled"
    try:
        child.check()
    except Stopped as exc:
        assert exc.reason == "cancelled"
    else:
        raise AssertionError("check() did not raise")


def test_deadline_keeps_the_whole_blocks_done_and_they_equal_a_shorter_run():
    plan, dur = _plan(pp=4, m=100)
    t0 = time.perf_counter()
    res = simulate(plan, dur, NOISE, samples=100_000, seed=3, stop=StopToken.within(0.6))
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.6 + 1.0, elapsed  # a full run takes about 5 s here
    assert res.partial and res.stop_reason == "deadline"
    n = res.mc.n_samples
    assert 0 < n < 100_000 and n % 2048 == 0
    assert res.mc.representative == {}  # the torn block's durations are gone
    # common random numbers: the blocks kept are exactly those of a run asked for n samples
    full = simulate(plan, dur, NOISE, samples=n, seed=3)
    assert not full.partial and full.stop_reason == ""
    np.testing.assert_array_equal(res.mc.makespan_samples, full.mc.makespan_samples)
    assert res.deterministic.makespan == full.deterministic.makespan


class _CountingToken(StopToken):
    """Cancels itself at its ``after``-th check (counts how often the work looks)."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls = after, 0

    def is_set(self) -> bool:
        self.calls += 1
        if self.calls >= self.after:
            self.set("cancelled")
        return super().is_set()


def test_the_monte_carlo_looks_at_the_token_at_every_level_of_a_block():
    from plena_opt.simulator.engine import build_graph

    plan, dur = _plan(pp=8, m=500)  # 8,000 ops in ~2,000 levels; one block takes about 0.5 s
    graph = build_graph(plan)
    never = _CountingToken(after=10**9)
    t0 = time.perf_counter()
    simulate(plan, dur, NOISE, samples=2048, seed=0, graph=graph, stop=never)
    whole_block = time.perf_counter() - t0  # the same work uncancelled, under the same load
    assert never.calls >= len(graph.levels)  # at least one look per level of the block
    tok = _CountingToken(after=len(graph.levels) // 2)  # mid-block
    t0 = time.perf_counter()
    res = simulate(plan, dur, NOISE, samples=2048, seed=0, stop=tok, graph=graph)
    assert time.perf_counter() - t0 < max(1.0, whole_block)  # stopped inside the block
    assert res.stop_reason == "cancelled" and res.mc is None
    assert res.deterministic.makespan > 0  # the deterministic figures are complete


def test_a_cancel_from_another_thread_stops_within_one_second():
    plan, dur = _plan(pp=4, m=100)
    tok = StopToken()
    threading.Timer(0.3, tok.set, args=("cancelled",)).start()
    t0 = time.perf_counter()
    res = simulate(plan, dur, NOISE, samples=100_000, seed=0, stop=tok)
    assert time.perf_counter() - t0 < 0.3 + 1.0
    assert res.stop_reason == "cancelled" and res.mc.n_samples < 100_000


class _PollCountingToken(StopToken):
    """A token that counts its polls and reports a deadline at poll ``trip`` (None: never)."""

    def __init__(self, trip: int | None) -> None:
        super().__init__()
        self.trip = trip
        self.polls = 0

    def is_set(self) -> bool:
        self.polls += 1
        if self.trip is not None and self.polls >= self.trip:
            self.set("deadline")
        return super().is_set()


def test_serving_recheck_returns_the_plans_done_marked_partial():
    from plena_opt.api.recheck import recheck_front
    from plena_opt.estimate.problem import ProblemSpec
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.run.runner import run_search

    spec = ProblemSpec(model="llama-3.1-8b", noc="illustrative_gpu_cluster_32")
    req = SearchRequest(problem=spec, sampler="exhaustive", study="stop", storage=":memory:")
    result = run_search(req)
    assert len(result.front) >= 2
    inputs = spec.load()
    # the deadline trips after half of the polls an unbounded re-check of the same plans makes
    # (counted, not timed: the same work polls the token the same number of times whatever the
    # machine's load, so the stop falls inside the re-check deterministically)
    counter = _PollCountingToken(None)
    assert len(recheck_front(result, inputs, top_k=16, samples=100_000, stop=counter)) == len(
        result.front
    )
    assert counter.polls >= 2
    tok = _PollCountingToken(counter.polls // 2)
    checks = recheck_front(result, inputs, top_k=16, samples=100_000, stop=tok)
    assert tok.polls - tok.trip < 16  # stopped at its poll (a few more to read the reason)
    assert 1 <= len(checks) < len(result.front)
    # the deadline falls inside a plan (kept, partly sampled) or between two (all complete)
    assert all(not c.partial for c in checks[:-1])
    last = checks[-1].to_dict()
    assert last["stop_reason"] == ("deadline" if last["partial"] else "completed")
    if last["partial"]:  # one of its three windows (isolated, steady, full) ran short
        s = checks[-1].serving
        windows = (s.isolated, s.steady, s.window)
        assert any(w.mc is None or w.mc.n_samples < 100_000 for w in windows)
    stopped = StopToken()
    stopped.set("cancelled")
    assert recheck_front(result, inputs, top_k=16, samples=100_000, stop=stopped) == []
