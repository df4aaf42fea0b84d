"""Many workers on one study in PostgreSQL (issue 17): same front as one process, each plan
scored and stored once, a SIGKILLed worker loses no finished trial and its chunk is retried."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from plena_opt import api
from plena_opt.cli.main import main
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.record import PLAN_ATTR, POINT_ATTR
from plena_opt.search.request import SearchRequest
from plena_opt.search.storage.storage import open_storage, sqlalchemy_url
from plena_opt.search.storage.trials import front_trials, is_scored
from plena_opt.search.workers.workers import queue_name

pytestmark = pytest.mark.postgres
PROBLEM = ProblemSpec(model="gpt-oss-20b", noc="illustrative_gpu_node_8", input_seq=256,
                      output_seq=8)  # fmt: skip
BATCHES = [4, 16, 64]  # 300 legal plans (180 before MoE splits joined the space, issue 24)
LEGAL = 300


def _request(url: str, study: str) -> SearchRequest:
    return SearchRequest(problem=PROBLEM, batch_sizes=BATCHES, storage=url, study=study,
                         sampler="exhaustive")  # fmt: skip


def _stored(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=open_storage(url)).get_trials()


def test_postgresql_urls_use_psycopg3() -> None:
    assert sqlalchemy_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert sqlalchemy_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert sqlalchemy_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert sqlalchemy_url("sqlite:///x.db") == "sqlite:///x.db"


def test_four_workers_front_equals_one_process(postgres_url) -> None:
    info, reports = api.run_local_workers(
        _request(postgres_url, "w4"), 4, heartbeat_s=1, chunk_plans=8
    )
    assert info.legal_points == LEGAL and len(reports) == 4
    assert sum(r["plans_scored"] for r in reports) == LEGAL  # nobody scored a plan twice
    trials = _stored(postgres_url, "w4")
    keys = [t.user_attrs[POINT_ATTR] for t in trials if is_scored(t)]
    assert len(trials) == len(keys) == len(set(keys)) == LEGAL  # every plan stored exactly once
    single = api.search_plans(_request(":memory:", "one"))
    study = optuna.load_study(study_name="w4", storage=open_storage(postgres_url))
    front = front_trials(study)
    assert single.front and [t.user_attrs[PLAN_ATTR] for t in front] == [
        e.plan for e in single.front
    ]
    assert [t.values for t in front] == [
        [e.ttft_ms, e.tps, e.energy_j_per_token] for e in single.front
    ]
    queue = optuna.load_study(study_name=queue_name("w4"), storage=open_storage(postgres_url))
    assert {t.state for t in queue.get_trials()} == {TrialState.COMPLETE}


def _worker(url: str, study: str, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "plena_opt.cli.main", "worker", "--storage", url,
           "--study", study, "--heartbeat", "1", "--json", *extra]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkilled_worker_loses_no_finished_trial(postgres_url) -> None:
    api.prepare_workers(_request(postgres_url, "kill"), chunk_plans=8)
    victim = _worker(postgres_url, "kill", "--throttle-ms", "40")  # ~0.3 s per chunk
    deadline = time.monotonic() + 60
    queue_storage = open_storage(postgres_url)

    def running_chunks() -> int:
        queue = optuna.load_study(study_name=queue_name("kill"), storage=queue_storage)
        return sum(t.state == TrialState.RUNNING for t in queue.get_trials(deepcopy=False))

    # kill mid-chunk: after 24 stored plans, at a moment a chunk is claimed (RUNNING); a chunk
    # takes ~0.3 s, so the kill lands inside it (killing between chunks would leave nothing
    # stale and would not exercise the heartbeat)
    while len(_stored(postgres_url, "kill")) < 24 or not running_chunks():
        assert victim.poll() is None and time.monotonic() < deadline, victim.stderr.read()
        time.sleep(0.02)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert running_chunks() == 1  # the victim's chunk, left RUNNING by the kill
    before = {t._trial_id: t.user_attrs[POINT_ATTR] for t in _stored(postgres_url, "kill")}
    assert 24 <= len(before) < LEGAL
    rescuer = _worker(postgres_url, "kill")
    out, err = rescuer.communicate(timeout=120)
    assert rescuer.returncode == 0, err
    report = json.loads(out)
    after = {t._trial_id: t.user_attrs[POINT_ATTR] for t in _stored(postgres_url, "kill")}
    assert all(after.get(i) == k for i, k in before.items())  # every finished trial kept
    assert len(after) == len(set(after.values())) == LEGAL  # the rest scored, nothing twice
    queue = optuna.load_study(study_name=queue_name("kill"), storage=open_storage(postgres_url))
    states = [t.state for t in queue.get_trials()]
    # the victim's chunk was RUNNING: failed by heartbeat and retried by the rescuer
    assert report["stale_failed"] == states.count(TrialState.FAIL) == 1
    assert states.count(TrialState.COMPLETE) == LEGAL // 8 + 1


def test_cli_search_workers_and_studies_read_the_database(postgres_url, capsys) -> None:
    argv = ["search", "--model", "gpt-oss-20b", "--noc", "illustrative_gpu_node_8",
            "--input-seq", "256", "--output-seq", "8", "--batch-sizes", "4,16", "--quiet",
            "--recheck", "0", "--storage", postgres_url, "--study", "cli", "--json"]  # fmt: skip
    assert main([*argv, "--workers", "2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (
        res["evaluated"] == 0 and res["reused"] == res["legal_points"] == 200
    )  # 120 before MoE splits
    assert main(["studies", "--storage", postgres_url, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["cli"]  # the work queue is not listed as a study
    assert rows[0]["trials_completed"] == 200


def test_worker_refusals(postgres_url, tmp_path, capsys) -> None:
    assert main(["worker", "--storage", postgres_url, "--study", "nope"]) == 2
    assert "has no work queue" in capsys.readouterr().err
    assert main(["worker", "--storage", str(tmp_path / "j.log"), "--study", "x"]) == 2
    assert "workers need an RDB URL" in capsys.readouterr().err


def _plan_trials(n: int, offset: int = 0) -> list[optuna.trial.FrozenTrial]:
    dist = optuna.distributions.CategoricalDistribution([1, 2, 4, 8])
    return [
        optuna.trial.create_trial(
            state=TrialState.COMPLETE if i % 3 else TrialState.PRUNED,
            values=[float(i + offset), float("inf")] if i % 3 else None,
            params={"tp": [1, 2, 4, 8][i % 4]},
            distributions={"tp": dist},
            user_attrs={"plan": {"tp": i}, "label": f"p{i}"},
            system_attrs={"constraints": [0.0, -1.5]},
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_bulk_insert_reads_back_like_add_trials(kind, tmp_path, request) -> None:
    from plena_opt.search.storage.rdb_bulk import add_finished_trials

    url = (f"sqlite:///{tmp_path}/b.db" if kind == "sqlite"
           else request.getfixturevalue("postgres_url"))  # fmt: skip
    storage = open_storage(url)
    ref = optuna.create_study(study_name="ref", storage=storage, directions=["minimize"] * 2)
    bulk = optuna.create_study(study_name="bulk", storage=storage, directions=["minimize"] * 2)
    ref.add_trials(_plan_trials(7))
    bulk.add_trials(_plan_trials(2))  # Optuna's own writes before and after ours: numbers go on
    add_finished_trials(bulk, _plan_trials(5, offset=2)[2:] + _plan_trials(7)[5:])
    got, want = bulk.get_trials(), ref.get_trials()
    assert [t.number for t in got] == list(range(7))
    for g, w in zip(got, want, strict=True):
        assert (g.state, g.params, g.user_attrs, g.system_attrs) == (
            w.state, w.params, w.user_attrs, w.system_attrs)  # fmt: skip
    assert [t.values for t in got[2:]] == [
        [float(i + 2), float("inf")] if i % 3 else None for i in range(2, 5)
    ] + [t.values for t in want[5:]]
