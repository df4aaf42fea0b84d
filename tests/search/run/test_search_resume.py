"""A resumed search counts the plans its study holds: ``--trials N`` is N distinct plans in the
study in all, so the same search again on the same embedded journal scores nothing and prints the
same front, and a larger N scores only the difference (exhaustive, TPE, serving Optuna)."""

from __future__ import annotations

import optuna
import pytest

from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import trials_completed
from tests.search.run.test_search_fakes import fake_factory


def _front(res) -> list[dict]:
    return [e.model_dump(exclude={"trial_number"}) for e in res.front]


def _stored(url: str, study: str) -> int:
    return trials_completed(optuna.load_study(study_name=study, storage=open_storage(url)))


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_same_trials_scores_nothing_and_more_trials_score_the_difference(tmp_path, sampler):
    url = str(tmp_path / "s.log")
    factory, calls = fake_factory(devices=256, experts=8)  # 324 legal plans
    base = dict(storage=url, study="r", sampler=sampler, seed=0, compare_exact=False)
    first = run_search(SearchRequest(**base, trials=40), evaluator_factory=factory)
    assert first.evaluated == len(calls) == 40 == _stored(url, "r")
    again = run_search(SearchRequest(**base, trials=40), evaluator_factory=factory)
    assert len(calls) == 40 and again.evaluated == 0 and again.reused == 40
    assert _stored(url, "r") == 40 and _front(again) == _front(first)
    more = run_search(SearchRequest(**base, trials=70), evaluator_factory=factory)
    assert more.evaluated == 30 and len(calls) == len(set(calls)) == 70 == _stored(url, "r")
    fewer = run_search(SearchRequest(**base, trials=10), evaluator_factory=factory)
    assert fewer.evaluated == 0 and len(calls) == 70  # a smaller N never removes or scores


def test_auto_rerun_of_a_tpe_search_stays_tpe_and_scores_nothing(tmp_path, monkeypatch):
    """``auto`` on a space the cost model samples (a dear evaluator) picks TPE; the re-run holds
    ``trials`` plans already, so it neither samples nor falls back to scoring every plan."""
    from plena_opt.search.run import modes

    monkeypatch.setattr(modes, "PLAN_CPU_SECONDS", 0.004)
    url = str(tmp_path / "a.log")
    factory, calls = fake_factory(devices=256, experts=8)
    req = SearchRequest(storage=url, study="a", trials=30, seed=0, compare_exact=False)
    first = run_search(req, evaluator_factory=factory)
    assert first.sampler == "tpe" and len(calls) == 30
    again = run_search(req, evaluator_factory=factory)
    assert again.evaluated == 0 and len(calls) == 30 and _front(again) == _front(first)


def test_exhaustive_rerun_scores_nothing_and_an_interrupted_one_finishes(tmp_path):
    url = str(tmp_path / "e.log")
    factory, calls = fake_factory(devices=16)
    base = dict(storage=url, study="e", sampler="exhaustive", batch_sizes=[4, 64])
    stop_after = iter(range(10_000))
    part = run_search(
        SearchRequest(**base),
        evaluator_factory=factory,
        should_stop=lambda: next(stop_after) >= 1,  # stops after the first chunk
    )
    assert part.partial and 0 < part.evaluated < part.legal_points
    done = run_search(SearchRequest(**base), evaluator_factory=factory)
    assert done.evaluated == done.legal_points - part.evaluated and not done.partial
    again = run_search(SearchRequest(**base, trials=5_000), evaluator_factory=factory)
    assert again.evaluated == 0 and len(calls) == len(set(calls)) == done.legal_points
    assert _front(again) == _front(done)


def test_the_exact_front_a_sampled_front_is_rated_against_is_not_scored_again(tmp_path):
    url = str(tmp_path / "x.log")
    factory, calls = fake_factory(devices=256, experts=8)
    req = SearchRequest(storage=url, study="x", sampler="tpe", trials=40, seed=0)
    first = run_search(req, evaluator_factory=factory)
    assert first.exact_front_size and len(calls) == first.legal_points  # the rest, for rating
    again = run_search(req, evaluator_factory=factory)
    assert len(calls) == first.legal_points and again.evaluated == 0
    assert (again.exact_front_size, again.front_recall, again.hv_ratio) == (
        first.exact_front_size,
        first.front_recall,
        first.hv_ratio,
    )


def test_serving_optuna_counts_stored_deployments(tmp_path, monkeypatch):
    from plena_opt.search.serving import disaggregated
    from tests.search.serving.test_serving_optuna import _request, _run

    pairs: list = []
    real = disaggregated.pair_points

    def counting(noc, p, d, *a, **k):
        pairs.append(1)
        return real(noc, p, d, *a, **k)

    store = str(tmp_path / "s.log")
    first, _ = _run(_request(store))
    assert first["disaggregated"]["evaluated"] == 40
    monkeypatch.setattr(disaggregated, "pair_points", counting)
    again, _ = _run(_request(store))
    assert again["disaggregated"]["evaluated"] == 0
    assert again["disaggregated"]["front"] == first["disaggregated"]["front"]
    resumed = len(pairs)  # the 40 stored ones recombined from the priced workers, not new
    more, _ = _run(_request(store).model_copy(update={"trials": 55}))
    assert more["disaggregated"]["evaluated"] == 15
    study = optuna.load_study(study_name="o-serving", storage=open_storage(store))
    dis = [t for t in study.trials if t.params["serving"] == "disaggregated"]
    assert len(dis) == 55
    assert resumed == 40 and len(pairs) - resumed == 40 + 15


def test_cli_tpe_rerun_prints_the_same_front_and_more_trials_add_the_difference(
    tmp_path, monkeypatch, capsys
):
    import json

    from plena_opt.cli.main import main
    from tests.cli.test_cli_search import SMALL

    monkeypatch.chdir(tmp_path)
    argv = ["search", *SMALL, "--batch-sizes", "1,2,4,8,16,32,64", "--sampler", "tpe",
            "--seed", "0", "--recheck", "0", "--json"]  # fmt: skip

    def run(trials: int) -> dict:
        assert main([*argv, "--trials", str(trials)]) == 0
        return json.loads(capsys.readouterr().out.split("\nchosen plan")[0])

    first = run(20)
    assert first["evaluated"] == 20 < first["legal_points"]
    again = run(20)
    assert again["evaluated"] == 0 and again["reused"] == 20
    assert again["front"] == first["front"]
    more = run(30)
    assert more["evaluated"] == 10 and more["reused"] == 20
