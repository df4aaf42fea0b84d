"""Server lifecycle under load: SIGTERM drains an in-flight search; kill -9 loses no trial."""

from __future__ import annotations

import threading
import time

import pytest
from plena_client import PlenaClient, PlenaRpcError, pb, system_spec
from plena_server.process import ServerProcess


def _long_request(study: str, trials: int = 20000) -> pb.SearchRequest:
    return pb.SearchRequest(
        system=system_spec("gpt-oss-20b", "torus_mesh_switch_64"),
        options=pb.SearchOptions(
            seed=1,
            trials=trials,
            sampler="tpe",
            study_name=study,
            batch_sizes=range(1, 41),
            compare_exact=False,
        ),
    )


def _wait_running(client: PlenaClient, study: str, min_trials: int = 1) -> int:
    t0 = time.monotonic()
    while True:
        assert time.monotonic() - t0 < 30, f"{study} never started"
        try:
            s = client.get_study(study)
            if s.running and s.trials_completed >= min_trials:
                return s.trials_completed
        except PlenaRpcError:
            pass
        time.sleep(0.05)


def test_sigterm_returns_the_partial_front_and_exits_within_the_grace(tmp_path):
    proc = ServerProcess(tmp_path / "s.log", "--grace", "5").start()
    try:
        client = PlenaClient(proc.target)
        out: dict = {}

        def search() -> None:
            try:
                out["result"] = client.search(_long_request("drain-1"), timeout=60)
            except PlenaRpcError as exc:
                out["error"] = exc

        t = threading.Thread(target=search)
        t.start()
        _wait_running(client, "drain-1", min_trials=3)
        t0 = time.monotonic()
        assert proc.terminate(timeout=15) == 0
        assert time.monotonic() - t0 < 5 + 2
        t.join(5)
        result = out.get("result")
        assert result is not None, out.get("error")
        assert result.partial and result.stop_reason == "shutdown"
        assert result.trials_completed >= 3 and len(result.front) > 0
    finally:
        proc.kill()


def test_kill_9_mid_search_then_restart_resumes_without_losing_trials(tmp_path):
    store = tmp_path / "k.log"
    proc = ServerProcess(store).start()
    try:
        client = PlenaClient(proc.target)
        call = client._stub.Search.future(_long_request("crash-1"), timeout=60)
        before = _wait_running(client, "crash-1", min_trials=5)
        proc.kill()  # SIGKILL: no drain, a trial may be half done
        call.exception(timeout=10)
        client.close()
    finally:
        proc.kill()
    with ServerProcess(store) as again, PlenaClient(again.target) as client:
        study = client.get_study("crash-1")
        assert study.trials_completed >= before
        assert not study.running
        # Resume the same study with a small budget: every stored trial is reused, none rescored.
        resumed = client.search(_long_request("crash-1", trials=5), timeout=60)
        assert resumed.trials_completed >= study.trials_completed
        import json

        doc = json.loads(resumed.result_json)
        assert doc["reused"] >= 1
        assert doc["evaluated"] <= 5 + 16  # new plans only (+ the auto probe, at most 16)


@pytest.mark.parametrize("signal_name", ["SIGINT"])
def test_sigint_also_drains(tmp_path, signal_name):
    import signal

    proc = ServerProcess(tmp_path / "i.log").start()
    try:
        proc.proc.send_signal(getattr(signal, signal_name))
        assert proc.proc.wait(15) == 0
    finally:
        proc.kill()


def test_deadline_fallback_answers_from_the_stored_study(tmp_path):
    """If the library overruns the deadline, the RPC answers with the study's stored front."""
    from plena_server.studies import fallback_result, get_study

    from plena_opt.estimate.problem import ProblemSpec
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.run.runner import run_search

    store = str(tmp_path / "f.log")
    req = SearchRequest(
        problem=ProblemSpec(model="llama-3.1-8b", noc="illustrative_gpu_node_8"),
        sampler="exhaustive",
        study="fb-1",
        storage=store,
    )
    done = run_search(req)
    result = fallback_result(store, "fb-1", time.perf_counter())
    assert result.partial and result.stop_reason == "deadline" and not result.result_json
    assert result.trials_completed == done.trials
    assert sorted(m.label for m in result.front) == sorted(e.label for e in done.front)
    assert list(result.front) == list(get_study(store, "fb-1").front)
    empty = fallback_result(store, "never-started", time.perf_counter())
    assert empty.partial and len(empty.front) == 0


def test_stale_journal_lock_is_cleared_at_start(tmp_path):
    import os

    from plena_server.app import clear_stale_journal_lock

    journal = tmp_path / "j.log"
    journal.write_text("")
    lock = tmp_path / "j.log.lock"
    os.symlink(journal, lock)
    old = time.time() - 60
    os.utime(lock, (old, old), follow_symlinks=False)
    assert clear_stale_journal_lock(str(journal)) is True
    assert not os.path.lexists(lock)
    os.symlink(journal, lock)  # a live writer releases its lock within milliseconds: not ours
    threading.Timer(0.2, os.remove, args=(lock,)).start()
    assert clear_stale_journal_lock(str(journal), stale_after=2.0) is False
    assert clear_stale_journal_lock("sqlite:///x.db") is False
