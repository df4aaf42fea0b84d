"""``run_search`` on a tiny in-test evaluator: exact fronts, caching, resume, stop, SLAs, seeds."""

from __future__ import annotations

import importlib.util

import optuna
import pytest
from optuna.trial import TrialState

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.space.space import factorisations
from tests.search.run.test_search_fakes import FakeEvaluator, fake_factory


def _brute_front(devices: int, batches: list[int], **kw) -> dict[tuple, tuple]:
    """Independent enumeration + dominance check: {(plan fields, batch): (ttft, tps, energy)}."""
    rows = {}
    for b in batches:
        ev = FakeEvaluator(devices=devices, batch=b, **kw)
        for tp, ep, dp, pp, cp in factorisations(devices):
            for ov in ("none", "full"):
                plan = Plan(tp, ep, dp, pp, cp, "replace", ov)
                try:
                    ev.check(plan)
                except ValueError:
                    continue
                m = ev.evaluate_batch([plan])[0]
                if m.fits_in_memory:
                    rows[(tp, ep, dp, pp, cp, ov, b)] = (
                        m.ttft_seconds * 1e3,
                        m.tps,
                        m.energy_per_token_joules,
                    )
    front = {}
    for k, (t, s, e) in rows.items():
        dominated = any(
            t2 <= t and s2 >= s and e2 <= e and (t2 < t or s2 > s or e2 < e)
            for t2, s2, e2 in rows.values()
        )
        if not dominated:
            front[k] = (t, s, e)
    return front


def _space_points(devices: int) -> list:
    from plena_opt.search.space.space import PlanSpace

    return PlanSpace(devices, [16], FakeEvaluator(devices=devices).check).points


def _as_dict(result) -> dict[tuple, tuple]:
    out = {}
    for e in result.front:
        p = e.plan
        key = (p["tp"], p["ep"], p["dp"], p["pp"], p["cp"], p["comm_overlap"], p["batch_size"])
        out[key] = (e.ttft_ms, e.tps, e.energy_j_per_token)
    return out


def test_exhaustive_front_equals_brute_force() -> None:
    factory, calls = fake_factory(devices=16)
    req = SearchRequest(storage=":memory:", batch_sizes=[4, 64], sampler="exhaustive")
    res = run_search(req, evaluator_factory=factory)
    assert _as_dict(res) == _brute_front(16, [4, 64])
    assert res.sampler == "exhaustive" and not res.partial
    assert len(calls) == res.legal_points == res.evaluated  # each legal point scored once
    assert len({(p, b) for p, b in calls}) == len(calls)
    assert res.hv_ratio == pytest.approx(1.0) and res.exact_front_size == len(res.front)
    tps = [e.tps for e in res.front]
    assert tps == sorted(tps, reverse=True)
    assert res.infeasible.get("memory", 0) > 0  # the fake makes some plans not fit


@pytest.mark.parametrize("sampler", ["tpe", "nsga2", "gp"])
def test_sampled_search_never_scores_a_plan_twice(sampler: str) -> None:
    factory, calls = fake_factory(devices=16)
    if sampler == "gp" and importlib.util.find_spec("torch") is None:
        with pytest.raises(PlenaInputError, match="needs PyTorch"):
            run_search(SearchRequest(storage=":memory:", sampler="gp"), evaluator_factory=factory)
        return
    trials = 12 if sampler == "gp" else 40
    req = SearchRequest(
        storage=":memory:",
        batch_sizes=[4, 64],
        sampler=sampler,
        trials=trials,
        seed=0,
        compare_exact=False,
    )
    res = run_search(req, evaluator_factory=factory)
    assert len(calls) == len(set(calls)) == res.evaluated <= trials
    exact = _brute_front(16, [4, 64])
    for key, vals in _as_dict(res).items():  # every sampled front plan is legal and priced right
        if key in exact:
            assert vals == exact[key]
    assert res.hv_ratio is None and res.sampler == sampler


def test_sampled_front_reports_ratio_to_exact_front() -> None:
    factory, _ = fake_factory(devices=16)
    req = SearchRequest(storage=":memory:", batch_sizes=[4, 64], sampler="tpe", trials=60, seed=1)
    res = run_search(req, evaluator_factory=factory)
    assert res.evaluated <= 60 and res.exact_front_size == len(_brute_front(16, [4, 64]))
    assert 0 < res.hv_ratio <= 1.0 + 1e-12


def test_seed_makes_runs_reproducible() -> None:
    def params(seed: int) -> list[dict]:
        factory, _ = fake_factory(devices=16)
        req = SearchRequest(
            storage=":memory:",
            study="s",
            batch_sizes=[4, 64],
            sampler="tpe",
            trials=25,
            seed=seed,
            compare_exact=False,
        )
        return [e.plan for e in run_search(req, evaluator_factory=factory).front]

    assert params(7) == params(7)


def test_resume_rebuilds_cache_from_stored_trials(tmp_path) -> None:
    storage = str(tmp_path / "studies.log")
    factory, calls = fake_factory(devices=16)
    base = dict(storage=storage, study="resume", batch_sizes=[4, 64], seed=0)
    first = run_search(
        SearchRequest(**base, sampler="tpe", trials=20, compare_exact=False),
        evaluator_factory=factory,
    )
    n1 = len(calls)
    assert n1 == first.evaluated > 0
    second = run_search(SearchRequest(**base, sampler="exhaustive"), evaluator_factory=factory)
    assert second.reused == n1  # the cache came from the stored trials
    assert second.evaluated == second.legal_points - n1
    assert len(set(calls)) == len(calls) == second.legal_points  # nothing scored twice
    third = run_search(SearchRequest(**base, sampler="auto"), evaluator_factory=factory)
    assert third.evaluated == 0 and third.reused == third.legal_points
    assert _as_dict(third) == _brute_front(16, [4, 64])
    study = optuna.load_study(
        study_name="resume",
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage)),
    )
    assert study.metric_names == ["ttft_ms", "tps", "energy_j_per_token"]
    t = study.trials[-1]
    assert {"plan", "metrics", "point_key", "constraints"} <= set(t.user_attrs)
    assert {"tp", "ep", "pp", "cp", "comm_overlap", "batch_size"} <= set(t.params)


def test_resume_with_another_problem_is_refused(tmp_path) -> None:
    storage = str(tmp_path / "s.log")
    factory, _ = fake_factory(devices=8)
    run_search(
        SearchRequest(storage=storage, study="x", sampler="exhaustive"), evaluator_factory=factory
    )
    with pytest.raises(PlenaInputError, match="different search"):
        run_search(
            SearchRequest(storage=storage, study="x", sampler="exhaustive", objectives=["ttft"]),
            evaluator_factory=factory,
        )


def test_should_stop_keeps_finished_trials_and_marks_partial() -> None:
    factory, calls = fake_factory(devices=16)
    polls = {"n": 0}

    def stop() -> bool:
        polls["n"] += 1
        return polls["n"] > 20

    req = SearchRequest(  # 132 legal plans: a budget below it keeps the sampler asking
        storage=":memory:", study="p", batch_sizes=[4, 64], sampler="tpe", trials=100, seed=0
    )
    res = run_search(req, evaluator_factory=factory, should_stop=stop)
    assert res.partial and res.stop_reason == "cancelled"
    assert res.trials >= res.evaluated == len(calls) > 0
    assert res.hv_ratio is None  # no exact comparison on a stopped search


def test_deadline_stops_exhaustive_search_as_partial() -> None:
    factory, _ = fake_factory(devices=16)
    req = SearchRequest(
        storage=":memory:", batch_sizes=[4, 64], sampler="exhaustive", deadline=1e-9
    )
    res = run_search(req, evaluator_factory=factory)
    assert res.partial and res.stop_reason == "deadline" and res.evaluated == 0


def test_progress_reports() -> None:
    factory, _ = fake_factory(devices=16)
    seen = []
    run_search(
        SearchRequest(storage=":memory:", sampler="exhaustive", batch_sizes=[4, 64]),
        evaluator_factory=factory,
        progress=seen.append,
    )
    assert seen[-1].stage == "done" and seen[-1].front_size > 0
    assert seen[-1].hypervolume is not None and seen[-1].trials_per_s > 0


def test_sla_nothing_meets_reports_best_plan() -> None:
    factory, _ = fake_factory(devices=16)
    req = SearchRequest(storage=":memory:", sampler="exhaustive", max_ttft_ms=1e-6)
    res = run_search(req, evaluator_factory=factory)
    assert res.front == [] and res.best_infeasible is not None
    assert res.infeasible["max_ttft"] == res.legal_points
    # the TTFT excess dwarfs any memory excess, so the least-violating plan is the fastest one
    fastest = min(
        m.ttft_seconds * 1e3
        for plan in (p.plan for p in _space_points(16))
        for m in FakeEvaluator(devices=16).evaluate_batch([plan])
    )
    assert res.best_infeasible.ttft_ms == pytest.approx(fastest)
    assert res.best_infeasible.constraints["max_ttft"] > 0


def test_sla_filters_front() -> None:
    factory, _ = fake_factory(devices=16)
    free = run_search(
        SearchRequest(storage=":memory:", sampler="exhaustive"), evaluator_factory=factory
    )
    limit = sorted(e.ttft_ms for e in free.front)[len(free.front) // 2]
    res = run_search(
        SearchRequest(storage=":memory:", sampler="exhaustive", max_ttft_ms=limit),
        evaluator_factory=factory,
    )
    assert res.front and all(e.ttft_ms <= limit for e in res.front)
    assert res.constraints == ["memory", "max_ttft"]


def test_auto_picks_exhaustive_for_small_spaces() -> None:
    factory, _ = fake_factory(devices=8)
    res = run_search(SearchRequest(storage=":memory:"), evaluator_factory=factory)
    assert res.sampler == "exhaustive" and res.evaluated == res.legal_points


def test_no_legal_plan_is_an_input_error() -> None:
    factory, _ = fake_factory(devices=8, heads=3, layers=0)
    with pytest.raises(PlenaInputError, match="no legal plan on 8 devices"):
        run_search(SearchRequest(storage=":memory:"), evaluator_factory=factory)


def test_illegal_suggestions_are_pruned_with_reason() -> None:
    factory, calls = fake_factory(devices=16)
    req = SearchRequest(
        storage=":memory:", study="i", sampler="tpe", trials=30, seed=2, compare_exact=False
    )
    res = run_search(req, evaluator_factory=factory)
    assert res.pruned_illegal > 0  # tp·ep·pp·cp not dividing 16 happens for random suggestions
    assert all(p.world_size == 16 for p, _ in calls)


def test_moe_search_space_and_energy_missing() -> None:
    factory, _ = fake_factory(devices=8, experts=8)
    res = run_search(
        SearchRequest(storage=":memory:", sampler="exhaustive"), evaluator_factory=factory
    )
    modes = {e.plan["moe_tp_mode"] for e in res.front} | {"replace"}
    assert modes <= {"replace", "keep"} and res.legal_points > 0


def test_every_plan_is_stored_once(tmp_path) -> None:
    """Repeats and illegal suggestions are answered without reaching the store (issue 10)."""
    factory, _ = fake_factory(devices=16)
    storage = str(tmp_path / "t.log")
    req = SearchRequest(
        storage=storage, study="t", sampler="tpe", trials=15, seed=4, compare_exact=False
    )
    res = run_search(req, evaluator_factory=factory)
    assert res.repeats + res.pruned_illegal > 0  # the sampler did repeat itself
    assert res.trials == res.trials_completed == res.evaluated == 15
    study = optuna.load_study(
        study_name="t",
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage)),
    )
    keys = [t.user_attrs["point_key"] for t in study.trials]
    assert len(keys) == len(set(keys)) == 15
    states = [t.state for t in study.trials]
    assert TrialState.RUNNING not in states
    for t in study.trials:
        if t.state == TrialState.PRUNED:  # stored PRUNED only when infeasible, with the reason
            assert t.user_attrs["infeasible"] and not t.user_attrs["feasible"]


def test_energy_objective_needs_energy_data() -> None:
    factory, _ = fake_factory(devices=8, energy=False)
    with pytest.raises(PlenaInputError, match="energy per token is not available"):
        run_search(SearchRequest(storage=":memory:"), evaluator_factory=factory)
    res = run_search(
        SearchRequest(storage=":memory:", objectives=["ttft", "tps"]), evaluator_factory=factory
    )
    assert res.front and all(e.energy_j_per_token is None for e in res.front)


def test_front_matches_optuna_best_trials(tmp_path) -> None:
    storage = str(tmp_path / "b.log")
    factory, _ = fake_factory(devices=16)
    req = SearchRequest(storage=storage, study="b", batch_sizes=[4, 64], sampler="exhaustive")
    res = run_search(req, evaluator_factory=factory)
    study = optuna.load_study(
        study_name="b",
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage)),
    )
    # Optuna's own constrained Pareto set (infeasible trials dropped) agrees with ours
    assert {t.user_attrs["point_key"] for t in study.best_trials} == {
        "tp{tp}-ep{ep}-dp{dp}-pp{pp}-cp{cp}-{moe_tp_mode}-{comm_overlap}-b{batch_size}".format(
            **e.plan
        )
        for e in res.front
    }
    assert all(e.trial_number is not None for e in res.front)


def test_search_on_the_4x_constraint_path(tmp_path, monkeypatch) -> None:
    """Force the Optuna 4.x branch (constraints_func) of the adapter on this install."""
    import warnings

    from plena_opt.search.run import session

    monkeypatch.setattr(session, "ConstraintAdapter", lambda: runner_adapter(core=False))
    storage = str(tmp_path / "old.log")
    factory, calls = fake_factory(devices=16)
    req = SearchRequest(storage=storage, study="old", batch_sizes=[4, 64], sampler="tpe",
                        trials=30, seed=0, compare_exact=False)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # constraints_func is deprecated on 5.x
        res = run_search(req, evaluator_factory=factory)
    assert len(calls) == len(set(calls)) == res.evaluated
    study = optuna.load_study(
        study_name="old",
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage)),
    )
    told = [t for t in study.trials if t.state == TrialState.COMPLETE]
    # stored trials carry the list format (optuna-dashboard, 4.x) whichever branch samples
    assert told and all(
        list(t.system_attrs["constraints"]) == list(t.user_attrs["constraints"].values())
        for t in told
    )


def runner_adapter(core: bool):
    from plena_opt.search.space.constraint_adapter import ConstraintAdapter

    return ConstraintAdapter(core=core)
