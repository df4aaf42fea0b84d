"""Deadlines, cancellation and SIGTERM reach the re-check and Simulate at fine grain: they answer
with what is done (partial, stop_reason) and free their slot within about 1 s (issue 10)."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from plena_client import PlenaClient, PlenaRpcError, pb, system_spec
from plena_server.app import start_server
from plena_server.limits import ServerLimits
from plena_server.process import ServerProcess

# 1F1B with 8 stages and 250 micro-batches: 4,000 ops; 50,000 samples is the server's work limit
# (ops × samples = 2e8) and takes 1.5-10 s here, depending on the load.
LONG_SIM = pb.SimulateRequest(
    training=pb.TrainingSchedule(
        schedule="1f1b", pp_size=8, microbatches=250, base_ms={"F": 1.0, "B": 2.0}
    ),
    samples=50_000,
)


def _recheck_search(study: str) -> pb.SearchRequest:
    """A quick exhaustive search (about 1 s, 14 front plans) followed by a long re-check
    (100,000 samples each, with traces: the serving window is sampled too, 0.5-3 s a plan; a
    re-check without traces samples only the TTFT and steady-decode windows and takes about
    3 s for all 14). 8k prompts: at 2k a faster evaluator let a clean CI machine finish all 14
    re-checks inside the 4 s budget (whole search 5.9 s here at load 1.0; 8.1 s with 8k)."""
    return pb.SearchRequest(
        system=system_spec("llama-3.1-70b", "illustrative_gpu_cluster_32"),
        workload=pb.Workload(input_seq_len=8192),
        options=pb.SearchOptions(
            sampler="exhaustive",
            study_name=study,
            recheck_top_k=16,
            mc_samples=100_000,
            batch_sizes=[1, 4, 16, 64, 256],
            include_traces=True,
        ),
    )


@pytest.fixture()
def server(tmp_path):
    running = start_server("127.0.0.1", 0, str(tmp_path / "s.log"), workers=4)
    client = PlenaClient(f"127.0.0.1:{running.port}")
    yield running, client
    client.close()
    running.server.stop(0)


def _until(predicate, timeout: float) -> float:
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.01)
    return time.monotonic() - t0


def _warm(client: PlenaClient) -> None:
    """One small Simulate, so that the first-call imports are not timed."""
    small = pb.SimulateRequest()
    small.CopyFrom(LONG_SIM)
    small.samples = 10
    assert not client.simulate(small, timeout=30).partial


def test_simulate_at_the_work_limit_answers_partial_at_its_deadline(server):
    running, client = server
    _warm(client)
    t0 = time.monotonic()
    reply = client.simulate(LONG_SIM, timeout=1.2)  # the whole run takes 1.5-10 s here
    assert time.monotonic() - t0 < 1.2
    assert reply.partial and reply.stop_reason == "deadline"
    # the whole sample blocks done (none if the machine is so loaded that not one finished)
    for dist in reply.distributions:
        assert 0 < dist.samples < 50_000 and dist.samples % 2048 == 0
    assert reply.makespan > 0
    _until(lambda: running.servicer.simulations.active() == 0, 1.0)


def test_a_cancelled_simulate_frees_its_slot_within_a_second(server):
    running, client = server
    call = client._stub.Simulate.future(LONG_SIM, timeout=30)
    _until(lambda: running.servicer.simulations.active() == 1, 10)
    time.sleep(0.3)
    call.cancel()
    assert _until(lambda: running.servicer.simulations.active() == 0, 1.0) < 1.0


def test_simulates_are_bounded_in_number_and_memory(tmp_path):
    limits = ServerLimits(max_concurrent_simulates=1, max_simulate_bytes=64 * 1024 * 1024)
    running = start_server("127.0.0.1", 0, str(tmp_path / "s.log"), workers=2, limits=limits)
    try:
        with PlenaClient(f"127.0.0.1:{running.port}") as client:
            with pytest.raises(PlenaRpcError) as info:
                client.simulate(LONG_SIM, timeout=10)  # 8,000 ops × 2048 samples: ~140 MiB
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "MiB" in info.value.message
            small = pb.SimulateRequest()
            small.CopyFrom(LONG_SIM)
            small.training.microbatches = 100  # 3,200 ops: ~56 MiB, under the cap
            call = client._stub.Simulate.future(small, timeout=30)
            _until(lambda: running.servicer.simulations.active() == 1, 10)
            with pytest.raises(PlenaRpcError) as info:
                client.simulate(small, timeout=10)
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            call.cancel()
    finally:
        running.server.stop(0)


def test_search_recheck_stops_at_the_deadline_and_frees_the_slot(server):
    running, client = server
    t0 = time.monotonic()
    # the search takes 1-3 s, the re-check of its 14 plans with traces about 5-7 s more (a deadline
    # in the search itself also answers partial, "re-check skipped: the search was stopped")
    # a 5 s deadline: budget 4.0 s (20 % margin), inside the re-check (a clean CI machine ran
    # 13 of 14 plans in 4.8 s); the 1.0 s margin leaves room for the reply on a loaded machine
    # (at 4 s, margin 0.8 s, one reply missed the deadline at load 5.8)
    result = client.search(_recheck_search("dl-1"), timeout=5.0)
    assert time.monotonic() - t0 < 5.0
    assert (result.partial, result.stop_reason) == (True, "deadline"), result.warnings
    assert len(result.recheck) < len(result.front)
    assert any("stopped" in w for w in result.warnings), result.warnings
    _until(lambda: not running.servicer.registry.is_running("dl-1"), 1.0)


def test_cancel_during_the_recheck_answers_cancelled_within_a_second(server):
    running, client = server
    events = client.stream_search(_recheck_search("cx-1"), timeout=60)
    cancelled_at = None
    result = None
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "progress" and event.progress.stage == pb.STAGE_RECHECK and cancelled_at is None:
            assert client.cancel_search("cx-1")
            cancelled_at = time.monotonic()
        if kind == "result":
            result = event.result
    assert cancelled_at is not None and result is not None
    assert time.monotonic() - cancelled_at < 1.0
    assert result.partial and result.stop_reason == "cancelled"
    assert len(result.recheck) < len(result.front)
    _until(lambda: not running.servicer.registry.is_running("cx-1"), 1.0)


def test_sigterm_answers_simulates_and_rechecks_and_health_says_not_serving(tmp_path):
    proc = ServerProcess(tmp_path / "t.log", "--grace", "5").start()
    try:
        client = PlenaClient(proc.target)
        out: dict = {}

        def simulate() -> None:
            out["sim"] = client.simulate(LONG_SIM, timeout=30)

        def search() -> None:
            for event in client.stream_search(_recheck_search("term-1"), timeout=30):
                if event.WhichOneof("event") == "progress":
                    if event.progress.stage == pb.STAGE_RECHECK:
                        out["rechecking"] = True
                elif event.WhichOneof("event") == "result":
                    out["search"] = event.result

        threads = [threading.Thread(target=search), threading.Thread(target=simulate)]
        threads[0].start()
        _until(lambda: out.get("rechecking"), 30)
        threads[1].start()  # the Simulate runs 1.5-10 s: SIGTERM comes well inside it
        time.sleep(0.5)
        seen: list = []
        with grpc.insecure_channel(proc.target) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            health.Check(health_pb2.HealthCheckRequest(), timeout=5)  # connected
            t0 = time.monotonic()
            proc.proc.send_signal(__import__("signal").SIGTERM)
            while time.monotonic() - t0 < 10:
                try:
                    seen.append(health.Check(health_pb2.HealthCheckRequest(), timeout=1).status)
                except grpc.RpcError as exc:
                    seen.append(exc.code())
                    break
                time.sleep(0.02)
        assert proc.proc.wait(15) == 0
        for t in threads:
            t.join(5)
        assert health_pb2.HealthCheckResponse.NOT_SERVING in seen, seen
        assert out["sim"].partial and out["sim"].stop_reason == "shutdown"
        assert out["search"].partial and out["search"].stop_reason == "shutdown"
    finally:
        proc.kill()


def test_lazily_imported_libraries_are_loaded_before_serving(server):
    """Two RPC threads importing a module for the first time can deadlock in importlib (seen
    once in 10,000 fuzzed requests as INTERNAL ``_DeadlockError``); the server imports them
    before it serves."""
    import sys

    from plena_server.app import PRELOAD

    from plena_opt.api.warm import MODULES

    assert set(PRELOAD) | set(MODULES) <= set(sys.modules)


@pytest.fixture()
def slow_workers(monkeypatch):
    """Each pool worker of the serving comparison priced at least 50 ms later (the server runs
    in this process), so that its ~600 workers take over 30 s whatever the load."""
    import plena_opt.search.serving.disaggregated as dis

    real = dis.price_worker

    def slow(*a, **kw):
        time.sleep(0.05)
        return real(*a, **kw)

    monkeypatch.setattr(dis, "price_worker", slow)


def _serving_search(study: str) -> pb.SearchRequest:
    """A quick exhaustive search (1-3 s) followed by a serving comparison of both modes
    (workers of 5 pool sizes × 5 batches priced one by one, then paired)."""
    request = _recheck_search(study)
    request.options.recheck_top_k = 0
    request.options.serving = "both"
    return request


def test_cancel_during_the_serving_comparison_answers_a_partial_comparison(server, slow_workers):
    running, client = server
    cancelled_at = result = None
    for event in client.stream_search(_serving_search("sv-1"), timeout=60):
        kind = event.WhichOneof("event")
        if kind == "progress" and event.progress.stage == pb.STAGE_SERVING and not cancelled_at:
            assert client.cancel_search("sv-1")
            cancelled_at = time.monotonic()
        if kind == "result":
            result = event.result
    assert cancelled_at is not None and result is not None
    assert time.monotonic() - cancelled_at < 1.0
    assert (result.partial, result.stop_reason) == (True, "cancelled"), result.warnings
    cmp = result.serving.comparison
    assert cmp.partial and cmp.stop_reason == "cancelled"
    assert not cmp.HasField("verdict") and not cmp.HasField("study_name")  # partial: not stored
    assert any("serving comparison stopped (cancelled)" in w for w in result.warnings)
    assert len(result.front) > 0 and result.trials_completed > 0  # the search itself is whole
    _until(lambda: not running.servicer.registry.is_running("sv-1"), 1.0)


def test_the_serving_comparison_stops_at_the_rpc_deadline(server, slow_workers):
    running, client = server
    t0 = time.monotonic()
    # the search takes 0.5-3 s (over 5 s once under CI load: the deadline then fell before the
    # comparison began), the comparison over 30 s
    result = client.search(_serving_search("sv-2"), timeout=12.0)
    assert time.monotonic() - t0 < 12.0
    assert (result.partial, result.stop_reason) == (True, "deadline"), result.warnings
    assert result.serving.comparison.partial
    assert result.serving.comparison.stop_reason == "deadline"
    _until(lambda: not running.servicer.registry.is_running("sv-2"), 1.0)
