"""Issue 26: the default re-check is sized from counts so it never dominates the search — front
plans in order while the modelled re-check CPU stays within ``RECHECK_SHARE`` of the modelled
search CPU (the first always); an explicit K, an SLA or a percentile re-checks K / 5."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from plena_opt.api import recheck
from plena_opt.estimate.plan import Plan
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.simulator.engine.serving import recheck_ops
from plena_opt.simulator.scheduler.inference import stage_times_from_estimate


@pytest.fixture(scope="module")
def problem():
    return ProblemSpec(model="llama-3.1-8b", noc="illustrative_gpu_cluster_32").load()


@pytest.fixture(scope="module")
def estimates(problem):
    ev = problem.evaluator()
    return [ev.estimate(p) for p in (Plan(tp=8, dp=4), Plan(tp=4, dp=8), Plan(pp=32))]


def _result(plans: int):
    return SimpleNamespace(evaluated=plans, reused=0)


def test_recheck_ops_grow_with_the_pipeline(estimates) -> None:
    flat, deep = (
        recheck_ops(stage_times_from_estimate(e, 64)) for e in (estimates[0], estimates[2])
    )
    assert flat[0] < 100 < 1000 < deep[0] and flat[1] < deep[1] <= deep[0]
    assert recheck.recheck_cpu_seconds(estimates[2], 1000) > 20 * recheck.recheck_cpu_seconds(
        estimates[0], 1000
    )


def test_a_deep_pipeline_plan_is_left_out_when_it_would_dominate_a_small_search(
    problem, estimates
) -> None:
    small = recheck.sized_top_k(_result(112), problem, estimates, 1000)
    assert small == 2  # the two pp=1 plans; the pp=32 one would cost more than 30 %
    budget = recheck.RECHECK_SHARE * recheck.modelled_search_cpu_seconds(_result(112), problem)
    spent = sum(recheck.recheck_cpu_seconds(e, 1000) for e in estimates[:small])
    assert spent <= budget < spent + recheck.recheck_cpu_seconds(estimates[2], 1000)
    # a search of a million plans affords all three; the first plan is always re-checked
    assert recheck.sized_top_k(_result(1_000_000), problem, estimates, 1000) == 3
    assert recheck.sized_top_k(_result(1), problem, estimates[::-1], 1000) == 1


def test_the_size_is_the_same_under_a_10x_slow_clock(monkeypatch, problem, estimates) -> None:
    normal = recheck.sized_top_k(_result(112), problem, estimates, 1000)
    for name in ("perf_counter", "process_time", "monotonic"):
        real = getattr(time, name)
        base = real()
        monkeypatch.setattr(time, name, lambda r=real, b=base: b + 10 * (r() - b))
    assert recheck.sized_top_k(_result(112), problem, estimates, 1000) == normal


def test_a_gpu_search_is_modelled_with_the_gpu_per_plan_cost(problem) -> None:
    gpu = ProblemSpec(model="llama-3.2-1b", noc="hgx-h200x8", chip="h200-sxm").load()
    plena = ProblemSpec(model="llama-3.2-1b", noc="illustrative_gpu_node_8").load()
    g = recheck.modelled_search_cpu_seconds(_result(1000), gpu)
    p = recheck.modelled_search_cpu_seconds(_result(1000), plena)
    assert g - recheck.SEARCH_CPU_SECONDS_FIXED > 2 * (p - recheck.SEARCH_CPU_SECONDS_FIXED)


def test_explicit_k_sla_or_percentile_is_not_sized() -> None:
    assert recheck.default_top_k(3, SearchRequest()) == 3
    assert recheck.default_top_k(None, SearchRequest()) is None
    assert recheck.default_top_k(None, SearchRequest(max_tpot_ms=50)) == recheck.DEFAULT_RECHECK
    assert recheck.default_top_k(None, SearchRequest(percentile="p99")) == recheck.DEFAULT_RECHECK


def test_recheck_front_sizes_only_when_asked_and_the_table_says_so(problem) -> None:
    from plena_opt import api

    spec = ProblemSpec(model="llama-3.1-8b", noc="illustrative_gpu_cluster_32")
    res = api.search_plans(SearchRequest(problem=spec, storage=":memory:"), problem)
    deep = res.front[0].model_copy(update={"plan": {**res.front[0].plan, "tp": 1, "pp": 32}})
    res.front = [res.front[0], deep, *res.front[1:]]
    sized = api.recheck_front(res, problem, top_k=None, samples=50)
    assert len(sized) == 1
    assert len(api.recheck_front(res, problem, top_k=2, samples=50)) == 2
    text = recheck.render_recheck(res, sized, 50, "none", None)
    left = min(recheck.DEFAULT_RECHECK, len(res.front)) - 1
    assert f"({left} more front plan(s) not re-checked" in text and "--recheck K" in text
    assert "not re-checked" not in recheck.render_recheck(res, sized, 50, "none", 1)
