"""Issue 26: ``auto`` decides from counts (same sampler and front under a 10× slow clock), and a
sampler never spends a trial on a plan it already scored."""

from __future__ import annotations

import time

import pytest
from optuna.trial import TrialState

from plena_opt.search.request import SearchRequest
from plena_opt.search.run import modes, sampled
from plena_opt.search.run.runner import run_search
from tests.search.run.test_search_fakes import FakeEvaluator, fake_factory

# 838 legal plans × 8 batch sizes = 6,704 plans on the fake MoE evaluator (256 devices; 324
# before the explicit MoE splits of issue 24). FEW: the fake on 32 devices, 330 legal plans.
FEW = 32
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128]


def _slow_clocks(monkeypatch, factor: float = 10.0) -> None:
    """Every clock the search could read runs ``factor`` × slow: each interval reads longer."""
    for name in ("perf_counter", "process_time", "monotonic"):
        real = getattr(time, name)
        base = real()
        monkeypatch.setattr(time, name, lambda r=real, b=base: b + factor * (r() - b))


def _search(trials: int) -> tuple[str, list[str], int]:
    factory, _ = fake_factory(devices=256, experts=8)
    res = run_search(
        SearchRequest(
            storage=":memory:", batch_sizes=BATCHES, trials=trials, seed=0, compare_exact=False
        ),  # fmt: skip
        evaluator_factory=factory,
    )
    return res.sampler, sorted(e.label for e in res.front), res.evaluated


@pytest.mark.parametrize("trials", [20, 50])
def test_same_sampler_and_front_under_a_10x_slow_clock(monkeypatch, trials: int) -> None:
    normal = _search(trials)
    with monkeypatch.context() as m:
        _slow_clocks(m)
        slow = _search(trials)
    assert slow == normal
    exhaustive_s, sampler_s = modes.sampler_cost_model(
        SearchRequest(trials=trials, compare_exact=False), 2592, 2592, 256
    )
    assert normal[0] == ("exhaustive" if exhaustive_s <= sampler_s else "tpe")


def test_choice_follows_counts() -> None:
    req = SearchRequest(trials=200, compare_exact=False)
    cheap, dear = modes.sampler_cost_model(req, 300, 300, 256)
    assert cheap < dear  # 300 plans: scoring them all beats 200 TPE trials
    big_e, big_s = modes.sampler_cost_model(req, 100_000, 100_000, 256)
    assert big_e > big_s
    # a sampled front rated by scoring the rest anyway: exhaustive is never dearer
    e, s = modes.sampler_cost_model(SearchRequest(trials=200), 5_000, 5_000, 256)
    assert e <= s
    # 1,730 plans on 65,536 devices: each plan's routing makes the 200-trial sampler cheaper
    e, s = modes.sampler_cost_model(SearchRequest(trials=200), 1_730, 1_730, 65_536)
    assert s < e


def _sampler_study(monkeypatch) -> list:
    studies: list = []
    real_init = sampled.SampledRun.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        studies.append(self.study)

    monkeypatch.setattr(sampled.SampledRun, "__init__", init)
    return studies


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_space_just_above_the_budget_has_no_repeated_trials(monkeypatch, sampler) -> None:
    studies = _sampler_study(monkeypatch)
    factory, calls = fake_factory(devices=FEW, experts=8)  # 330 legal plans
    res = run_search(
        SearchRequest(
            storage=":memory:", sampler=sampler, trials=300, seed=0, compare_exact=False
        ),  # fmt: skip
        evaluator_factory=factory,
    )
    assert res.legal_points == 330 and res.evaluated == 300
    assert len(calls) == len(set(calls)) == 300  # every plan scored at most once
    told = [t for t in studies[0].trials if t.state == TrialState.COMPLETE]
    keys = [tuple(sorted(t.params.items())) for t in told]
    assert len(keys) == len(set(keys))  # no plan's values twice in the sampler's history
    # ask until new, bounded: at most STALE_STREAK stale asks before each new plan
    assert res.repeats + res.pruned_illegal <= sampled.STALE_STREAK * res.evaluated


def test_budget_above_the_space_enumerates_the_rest_and_stops() -> None:
    factory, calls = fake_factory(devices=FEW, experts=8)
    res = run_search(
        SearchRequest(
            storage=":memory:", sampler="tpe", trials=400, seed=0, compare_exact=False
        ),  # fmt: skip
        evaluator_factory=factory,
    )
    assert res.evaluated == len(calls) == len(set(calls)) == res.legal_points == 330
    assert res.repeats == 0 and not res.partial
    assert any("every one of the" in w for w in res.warnings)


class _GpuFake(FakeEvaluator):
    chip_kind = "gpu"


def test_a_gpu_chip_is_priced_with_its_own_per_plan_constant() -> None:
    """330 plans, 30 trials: at PLENA's per-plan cost scoring all of them is cheaper than 30 TPE
    trials, at the GPU one (``GPU_PLAN_CPU_SECONDS``, 2.5× dearer) TPE is."""
    assert modes.plan_cpu_seconds(256, "gpu") > modes.plan_cpu_seconds(256, "plena")
    req = SearchRequest(storage=":memory:", trials=30, seed=0, compare_exact=False)
    e, s = modes.sampler_cost_model(req, 330, 330, FEW, "plena")
    assert e <= s
    e, s = modes.sampler_cost_model(req, 330, 330, FEW, "gpu")
    assert s < e
    plena = run_search(req, evaluator_factory=fake_factory(devices=FEW, experts=8)[0])
    gpu = run_search(
        req, evaluator_factory=lambda b: _GpuFake(devices=FEW, experts=8, batch=b)
    )  # fmt: skip
    assert (plena.sampler, gpu.sampler) == ("exhaustive", "tpe")
    assert gpu.evaluated == 30 and plena.evaluated == plena.legal_points == 330
    with pytest.raises(ValueError, match="chip kind 'tpu'"):
        modes.plan_cpu_seconds(8, "tpu")


def test_the_evaluator_names_its_chip_kind() -> None:
    from plena_opt.estimate.problem import ProblemSpec

    gpu = ProblemSpec(model="llama-3.2-1b", noc="hgx-h200x8", chip="h200-sxm").load()
    plena = ProblemSpec(model="llama-3.2-1b", noc="illustrative_gpu_node_8").load()
    assert (gpu.evaluator().chip_kind, plena.evaluator().chip_kind) == ("gpu", "plena")


def test_default_seed_gives_the_same_search_twice(capsys) -> None:
    """No ``--seed``: the sampler still proposes the same plans in the same order, so two runs of
    one command print the same front (trial numbers included) — the default seed is fixed (0),
    not random (the 65,536-device TPE search differed from its first trial on before)."""
    import json

    from plena_opt.cli.main import main

    args = ["search", "--model", "llama-3.1-8b", "--sampler", "tpe", "--trials", "25"]
    runs = []
    for _ in range(2):
        assert main([*args, "--storage", ":memory:", "--json", "--quiet"]) == 0
        front = json.loads(capsys.readouterr().out)["front"]
        runs.append([(e["trial_number"], e["label"]) for e in front])
    assert runs[0] == runs[1] and runs[0]
    assert SearchRequest().seed == 0
