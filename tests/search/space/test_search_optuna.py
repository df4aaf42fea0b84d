"""The Optuna layer: constraint adapter on both API generations, best_trials, storage."""

from __future__ import annotations

import warnings

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.search.space.constraint_adapter import (
    ConstraintAdapter,
    core_constraints_available,
    trial_constraints,
)
from plena_opt.search.space.samplers import make_sampler
from plena_opt.search.storage.storage import list_studies, load_existing_study, open_storage


class _OldTrial:  # Optuna 4.x's Trial has no set_constraint
    def suggest_float(self) -> None: ...


def test_adapter_branch_selection() -> None:
    assert core_constraints_available(_OldTrial) is False
    assert core_constraints_available(optuna.trial.Trial) is hasattr(
        optuna.trial.Trial, "set_constraint"
    )
    assert ConstraintAdapter(core=False).sampler_kwargs().keys() == {"constraints_func"}
    assert ConstraintAdapter(core=True).sampler_kwargs() == {}
    assert ConstraintAdapter(core=False).system_attrs({"a": 1.0, "b": -1.0}) == {
        "constraints": [1.0, -1.0]
    }
    assert ConstraintAdapter(core=True).system_attrs({"a": 1.0}) == {"constraints:a": 1.0}


def _run(adapter: ConstraintAdapter, sampler_name: str) -> optuna.Study:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constraints_func is deprecated on 5.x (FutureWarning)
        sampler = make_sampler(sampler_name, 0, adapter, 30)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    for _ in range(20):
        t = study.ask()
        x = t.suggest_float("x", 0, 1)
        adapter.record(t, {"c": x - 0.5})  # feasible when x ≤ 0.5
        study.tell(t, [x, 1 - x])
    return study


@pytest.mark.parametrize("core", [True, False])
@pytest.mark.parametrize("sampler_name", ["tpe", "nsga2"])
def test_both_adapter_branches_store_constraints(core: bool, sampler_name: str) -> None:
    if core and not core_constraints_available():
        pytest.skip("this Optuna has no core constraint API")
    study = _run(ConstraintAdapter(core=core), sampler_name)
    for t in study.trials:
        assert trial_constraints(t) == {"c": pytest.approx(t.params["x"] - 0.5)}
        stored = t.system_attrs
        if core:
            assert stored["constraints:c"] == pytest.approx(t.params["x"] - 0.5)
        else:  # the sampler called constraints_func after the trial and stored the list
            assert list(stored["constraints"]) == [pytest.approx(t.params["x"] - 0.5)]
    # spec §1.1: verify best_trials drops infeasible trials on the installed version
    best = study.best_trials
    assert best and all(t.params["x"] <= 0.5 for t in best)


def test_best_trials_excludes_infeasible_added_trials() -> None:
    adapter = ConstraintAdapter()
    study = optuna.create_study(directions=["minimize"], sampler=optuna.samplers.RandomSampler(0))
    dist = {"x": optuna.distributions.FloatDistribution(0, 10)}
    for x, c in [(1.0, 1.0), (2.0, -1.0), (3.0, -2.0)]:
        study.add_trial(
            create_trial(
                params={"x": x},
                distributions=dist,
                values=[x],
                system_attrs=adapter.system_attrs({"m": c}),
            )
        )
    assert [t.params["x"] for t in study.best_trials] == [2.0]
    assert study.trials[0].state == TrialState.COMPLETE


def test_storage_urls(tmp_path) -> None:
    with pytest.raises(PlenaInputError, match="unknown scheme 'ftp'"):
        open_storage("ftp://host/x")
    with pytest.raises(PlenaInputError, match="does not exist"):
        open_storage(str(tmp_path / "missing" / "s.log"))
    with pytest.raises(PlenaInputError, match="is a directory"):
        open_storage(str(tmp_path))
    with pytest.raises(PlenaInputError, match="cannot open"):
        open_storage("sqlite:////nonexistent-dir/x/y.db")
    storage = open_storage(str(tmp_path / "s.log"))
    study = optuna.create_study(
        study_name="a",
        storage=storage,
        directions=["minimize"],
        sampler=optuna.samplers.RandomSampler(0),
    )
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    rows = list_studies(open_storage(str(tmp_path / "s.log")))
    assert [(r["name"], r["n_trials"], r["trials_by_state"]) for r in rows] == [
        ("a", 3, {"complete": 3})
    ]
    assert load_existing_study("a", storage).study_name == "a"
    with pytest.raises(PlenaNotFoundError, match="known: a"):
        load_existing_study("b", storage)
    sqlite = open_storage(f"sqlite:///{tmp_path / 's.db'}")
    assert list_studies(sqlite) == []
