"""Workers through Optuna's gRPC storage proxy (issue 17): the proxy in-process over a temporary
SQLite file (and PostgreSQL when there is a server), two worker processes through it, the front
equal to one process's, every plan stored once; a silent chunk's lease goes stale and is retried."""

from __future__ import annotations

import socket

import optuna
import pytest
from optuna.trial import TrialState

from plena_opt import api
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.search.record import PLAN_ATTR, POINT_ATTR
from plena_opt.search.request import SearchRequest
from plena_opt.search.storage.chunk_store import chunk_keys
from plena_opt.search.storage.grpc_proxy import start_proxy
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import front_trials, is_scored, trials_completed
from plena_opt.search.workers.workers import queue_name, run_worker
from tests.search.workers.test_search_workers import PROBLEM

PLANS = 100  # batch 4 only (60 before MoE splits joined the space): one RPC each through the proxy


def _request(url: str, study: str) -> SearchRequest:
    return SearchRequest(problem=PROBLEM, batch_sizes=[4], storage=url, study=study,
                         sampler="exhaustive")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'proxy.db'}"


@pytest.fixture(params=["sqlite_url", pytest.param("postgres_url", marks=pytest.mark.postgres)])
def proxy(request):
    """``grpc://127.0.0.1:PORT`` of a proxy running in this process over a fresh store."""
    port = _free_port()
    server = start_proxy(request.getfixturevalue(request.param), "127.0.0.1", port)
    yield f"grpc://127.0.0.1:{port}"
    server.stop(0)


def _plans(url: str, study: str) -> list[str]:
    trials = optuna.load_study(study_name=study, storage=open_storage(url)).get_trials()
    return [t.user_attrs[POINT_ATTR] for t in trials if is_scored(t)]


def test_two_workers_through_the_proxy(proxy) -> None:
    info, reports = api.run_local_workers(_request(proxy, "g"), 2, chunk_plans=8)
    assert len(reports) == 2
    scored = sum(r["plans_scored"] for r in reports)
    # a chunk whose lease lapsed under load is failed and scored again (stored once, below):
    # at most one chunk of 8 per stale failure or reclaimed chunk
    retried = sum(r["stale_failed"] + r["reclaimed"] for r in reports)
    assert PLANS <= scored <= PLANS + 8 * retried, (scored, reports)
    keys = _plans(proxy, "g")
    assert len(keys) == len(set(keys)) == info.legal_points == PLANS  # each plan stored once
    single = api.search_plans(_request(":memory:", "one"))
    front = front_trials(optuna.load_study(study_name="g", storage=open_storage(proxy)))
    assert [t.user_attrs[PLAN_ATTR] for t in front] == [e.plan for e in single.front]


def test_front_mode_through_the_proxy(proxy) -> None:
    info, _ = api.run_local_workers(_request(proxy, "gf"), 2, chunk_plans=8, store_plans="front")
    study = optuna.load_study(study_name="gf", storage=open_storage(proxy))
    keys = _plans(proxy, "gf")
    assert len(keys) == len(set(keys)) < PLANS  # only the chunks' fronts are trials
    assert len(chunk_keys(study)) == trials_completed(study) == info.legal_points == PLANS
    single = api.search_plans(_request(":memory:", "one"))
    assert [t.user_attrs[PLAN_ATTR] for t in front_trials(study)] == [e.plan for e in single.front]


def test_a_silent_chunk_is_failed_by_lease_and_retried(proxy) -> None:
    api.prepare_workers(_request(proxy, "lease"), chunk_plans=8)
    queue = optuna.load_study(study_name=queue_name("lease"), storage=open_storage(proxy))
    victim = queue.get_trials(states=(TrialState.WAITING,))[0]
    assert queue._storage.set_trial_state_values(victim._trial_id, TrialState.RUNNING)
    report = run_worker(proxy, "lease", heartbeat_s=1)  # the claimer never beats: a dead worker
    assert report.stale_failed == 1 and report.plans_scored == PLANS
    states = [t.state for t in queue.get_trials()]
    assert states.count(TrialState.FAIL) == 1 and states.count(TrialState.COMPLETE) == -(
        -PLANS // 8
    )
    keys = _plans(proxy, "lease")
    assert len(keys) == len(set(keys)) == PLANS


def test_proxy_refusals(sqlite_url, tmp_path, capsys) -> None:
    port = _free_port()
    with pytest.raises(PlenaInputError, match="no gRPC storage proxy answers"):
        from plena_opt.search.storage.grpc_proxy import open_grpc

        open_grpc(f"grpc://127.0.0.1:{port}", timeout_s=0.5)
    with pytest.raises(PlenaInputError, match="grpc://HOST:PORT"):
        open_storage("grpc://nohost")
    with pytest.raises(PlenaInputError, match="does not serve journal files"):
        start_proxy(str(tmp_path / "x.log"), "127.0.0.1", port)
    assert main(["storage-proxy", "--storage", sqlite_url, "--port", "0"]) == 2
    assert "--port must be 1..65535" in capsys.readouterr().err
