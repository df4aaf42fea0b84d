"""A worker whose chunk another worker failed as stale (a late heartbeat) keeps going: its plans
stay stored once (``all``: the chunk's retry skips them; ``front``: nothing of the lost chunk is
stored, the retry records it whole), and the worker does not crash."""

from __future__ import annotations

import warnings

import optuna
import pytest
from optuna.trial import TrialState

from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.record import POINT_ATTR
from plena_opt.search.request import SearchRequest
from plena_opt.search.storage.chunk_store import chunk_keys
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import scored_trials
from plena_opt.search.workers import workers


def _retry(queue: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    with warnings.catch_warnings():  # the callback's name changed in Optuna 4.9
        warnings.simplefilter("ignore")
        retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or (
            optuna.storages.RetryFailedTrialCallback
        )
        retry()(queue, trial)


@pytest.mark.parametrize("mode", ["all", "front"])
def test_chunk_failed_by_another_worker_mid_scoring(mode, tmp_path, monkeypatch) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    req = SearchRequest(
        problem=ProblemSpec(model="llama-3.1-8b", noc="illustrative_gpu_node_8"),
        storage=url, study="r", sampler="exhaustive", batch_sizes=[4],
    )  # fmt: skip
    info = workers.prepare_queue(req, chunk_plans=5, store_plans=mode)
    score = workers._score
    failed: list[int] = []

    def score_then_lose_the_claim(s, todo, throttle_s, report):  # another's fail_stale_trials
        stored = score(s, todo, throttle_s, report)
        if not failed:
            queue = optuna.load_study(study_name=workers.queue_name("r"), storage=open_storage(url))
            running = queue.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            queue._storage.set_trial_state_values(running[0]._trial_id, TrialState.FAIL)
            _retry(queue, running[0])  # as fail_stale_trials does
            failed.append(running[0].number)
        return stored

    monkeypatch.setattr(workers, "_score", score_then_lose_the_claim)
    report = workers.run_worker(url, "r", heartbeat_s=1)
    assert report.reclaimed == 1 and failed
    study = optuna.load_study(study_name="r", storage=open_storage(url))
    keys = [t.user_attrs[POINT_ATTR] for t in scored_trials(study)]
    assert len(keys) == len(set(keys))  # no plan stored twice
    if mode == "all":
        assert len(keys) == info.legal_points  # every plan stored exactly once
        return
    queue = optuna.load_study(study_name=workers.queue_name("r"), storage=open_storage(url))
    done = queue.get_trials(states=(TrialState.COMPLETE,))
    assert sum(t.value for t in done) == info.legal_points  # the lost chunk recorded once
    assert set(keys) <= chunk_keys(study) and len(chunk_keys(study)) == info.legal_points
