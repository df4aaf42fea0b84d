"""Workers in ``--store-plans front`` mode on PostgreSQL (issue 17): only each chunk's fronts are
trials, every plan's metrics are on its chunk. The study's front equals one process's exhaustive
front with 1, 2 and 4 workers, each plan is recorded exactly once (counted from the chunk
records), a SIGKILLed worker loses no finished chunk, and resume, ``--csv-all``, ``plena-opt
studies`` and optuna-dashboard read every plan or the exact front."""

from __future__ import annotations

import csv
import json
import os
import signal
import time

import optuna
import pytest
from optuna.trial import TrialState

from plena_opt import api
from plena_opt.cli.main import main
from plena_opt.search.record import PLAN_ATTR, POINT_ATTR
from plena_opt.search.space.space import Point
from plena_opt.search.storage.chunk_store import RECORDS_ATTR, decode_records
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import front_trials, is_scored, trials_completed
from plena_opt.search.workers.workers import queue_name
from tests.search.storage.test_search_store import _dashboard_get
from tests.search.workers.test_search_workers import PROBLEM, _request, _worker

pytestmark = pytest.mark.postgres
LEGAL = 300  # plans of test_search_workers' space (180 before MoE splits, issue 24)


def _load(url: str, study: str) -> optuna.Study:
    return optuna.load_study(study_name=study, storage=open_storage(url))


def _chunk_keys(url: str, study: str) -> dict[int, list[str]]:
    """Plan keys recorded on each COMPLETE chunk trial (by trial id)."""
    queue = _load(url, queue_name(study))
    return {
        t._trial_id: [p.key for p, _ in decode_records(t.user_attrs[RECORDS_ATTR])]
        for t in queue.get_trials(states=(TrialState.COMPLETE,))
    }


@pytest.fixture(scope="module")
def single():
    return api.search_plans(_request(":memory:", "one"))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_front_mode_front_equals_one_process(n, single, postgres_url) -> None:
    study = f"f{n}"
    info, reports = api.run_local_workers(
        _request(postgres_url, study), n, heartbeat_s=1, chunk_plans=16, store_plans="front"
    )
    assert info.store_plans == "front" and info.legal_points == LEGAL and len(reports) == n
    recorded = [k for keys in _chunk_keys(postgres_url, study).values() for k in keys]
    assert len(recorded) == len(set(recorded)) == LEGAL  # every plan recorded exactly once
    assert set(recorded) == {Point.from_dict(e.plan).key for e in single.scored}
    s = _load(postgres_url, study)
    trials = s.get_trials()
    assert len(trials) < LEGAL // 2  # only the chunks' fronts are trials
    assert all(is_scored(t) for t in trials)
    assert set(t.user_attrs[POINT_ATTR] for t in trials) <= set(recorded)
    front = front_trials(s)
    assert single.front and [t.user_attrs[PLAN_ATTR] for t in front] == [
        e.plan for e in single.front
    ]
    assert [t.values for t in front] == [
        [e.ttft_ms, e.tps, e.energy_j_per_token] for e in single.front
    ]
    assert trials_completed(s) == LEGAL
    # resume: the study reads back whole, nothing is scored again, same front and every plan
    res = api.search_plans(_request(postgres_url, study))
    assert res.evaluated == 0 and res.reused == LEGAL == len(res.scored)
    assert [e.plan for e in res.front] == [e.plan for e in single.front]
    assert all(e.trial_number is not None for e in res.front)
    assert sorted(json.dumps(e.plan, sort_keys=True) for e in res.scored) == sorted(
        json.dumps(e.plan, sort_keys=True) for e in single.scored
    )
    if n == 2:  # optuna-dashboard's HTTP API: its best trials are the CLI's front
        summaries = _dashboard_get(postgres_url, "/api/studies")["study_summaries"]
        sid = next(x["study_id"] for x in summaries if x["study_name"] == study)
        detail = _dashboard_get(postgres_url, f"/api/studies/{sid}?after=0")
        assert sorted(t["number"] for t in detail["best_trials"]) == sorted(
            e.trial_number for e in res.front
        )


def test_sigkilled_front_worker_loses_no_finished_chunk(postgres_url) -> None:
    api.prepare_workers(_request(postgres_url, "kill"), chunk_plans=8, store_plans="front")
    victim = _worker(postgres_url, "kill", "--throttle-ms", "40")  # ~0.3 s per chunk
    deadline = time.monotonic() + 60

    def running() -> int:
        queue = _load(postgres_url, queue_name("kill"))
        return sum(t.state == TrialState.RUNNING for t in queue.get_trials(deepcopy=False))

    while len(_chunk_keys(postgres_url, "kill")) < 3 or not running():
        assert victim.poll() is None and time.monotonic() < deadline, victim.stderr.read()
        time.sleep(0.02)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert running() == 1  # the victim's chunk, left RUNNING by the kill
    before = _chunk_keys(postgres_url, "kill")
    trials_before = {
        t._trial_id: t.user_attrs[POINT_ATTR] for t in _load(postgres_url, "kill").get_trials()
    }
    assert 3 <= len(before) < LEGAL // 8
    rescuer = _worker(postgres_url, "kill")
    out, err = rescuer.communicate(timeout=120)
    assert rescuer.returncode == 0, err
    after = _chunk_keys(postgres_url, "kill")
    assert all(after[i] == keys for i, keys in before.items())  # every finished chunk kept
    recorded = [k for keys in after.values() for k in keys]
    assert len(recorded) == len(set(recorded)) == LEGAL  # the rest recorded, nothing twice
    trials_after = {
        t._trial_id: t.user_attrs[POINT_ATTR] for t in _load(postgres_url, "kill").get_trials()
    }
    assert all(trials_after.get(i) == k for i, k in trials_before.items())
    assert len(trials_after) == len(set(trials_after.values()))  # no plan trial twice
    states = [t.state for t in _load(postgres_url, queue_name("kill")).get_trials()]
    assert json.loads(out)["stale_failed"] == states.count(TrialState.FAIL) == 1
    assert states.count(TrialState.COMPLETE) == LEGAL // 8 + 1


def test_cli_front_mode_csv_all_and_studies(postgres_url, tmp_path, capsys) -> None:
    csv_all = tmp_path / "all.csv"
    argv = ["search", "--model", PROBLEM.model, "--noc", PROBLEM.noc, "--input-seq", "256",
            "--output-seq", "8", "--batch-sizes", "4,16,64", "--quiet", "--recheck", "0",
            "--storage", postgres_url, "--study", "cli", "--json"]  # fmt: skip
    assert main([*argv, "--workers", "2", "--csv-all", str(csv_all)]) == 0  # front: default
    res = json.loads(capsys.readouterr().out)
    assert res["evaluated"] == 0 and res["reused"] == res["legal_points"] == LEGAL
    with csv_all.open() as fh:
        assert len(list(csv.DictReader(fh))) == LEGAL  # every plan, not only the fronts
    assert len(_load(postgres_url, "cli").get_trials()) < LEGAL // 2
    assert main(["studies", "--storage", postgres_url, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["cli"] and rows[0]["trials_completed"] == LEGAL
    assert main([*argv[:-1], "--store-plans", "front"]) == 2
    assert "--store-plans needs --workers" in capsys.readouterr().err
