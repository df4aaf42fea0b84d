"""A real ``plena-opt serve`` process on loopback: health, reflection, binding, SIGTERM drain."""

from __future__ import annotations

import argparse
import threading

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from plena_server.process import ServerProcess

SERVICE = "plena_opt.v1.PlenaOpt"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "studies.log"
    with ServerProcess(store) as proc:
        yield proc


@pytest.fixture()
def channel(server):
    with grpc.insecure_channel(server.target) as ch:
        yield ch


def test_health_service_reports_serving(channel):
    stub = health_pb2_grpc.HealthStub(channel)
    for name in ("", SERVICE):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as err:
        stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_reflection_lists_and_describes_the_service(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    services = set(db.get_services())
    assert {
        SERVICE,
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= services
    pool = DescriptorPool(db)
    svc = pool.FindServiceByName(SERVICE)
    assert {m.name for m in svc.methods} >= {
        "Search",
        "StreamSearch",
        "Estimate",
        "Simulate",
        "ListModels",
        "ListProfiles",
        "GetStudy",
    }
    estimate = pool.FindMessageTypeByName("plena_opt.v1.EstimateRequest")
    assert [f.name for f in estimate.fields] == ["system", "workload", "plan", "load"]


def test_serve_binds_loopback_by_default():
    from plena_opt.cli import serve_cmd

    parser = argparse.ArgumentParser()
    serve_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["serve"])
    assert (args.host, args.port) == ("127.0.0.1", 50051)


def test_serve_rejects_bad_flags(capsys):
    from plena_server.__main__ import main

    assert main(["--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
    assert main(["--max-searches", "0"]) == 2
    assert "--max-searches" in capsys.readouterr().err


def test_sigterm_sets_not_serving_and_exits_cleanly(tmp_path):
    proc = ServerProcess(tmp_path / "s.log", "--grace", "2").start()
    try:
        with grpc.insecure_channel(proc.target) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            seen: list[int] = []
            watching = threading.Event()

            def watch() -> None:
                try:
                    for reply in stub.Watch(
                        health_pb2.HealthCheckRequest(service=SERVICE), timeout=30
                    ):
                        seen.append(reply.status)
                        watching.set()
                except grpc.RpcError:
                    pass

            t = threading.Thread(target=watch)
            t.start()
            assert watching.wait(10)
            assert proc.terminate(timeout=20) == 0
            t.join(10)
        assert seen[0] == health_pb2.HealthCheckResponse.SERVING
        assert health_pb2.HealthCheckResponse.NOT_SERVING in seen
        assert "stopped" in proc.stderr_text()
    finally:
        proc.kill()


def test_request_limits_are_resource_exhausted(tmp_path):
    """Devices, inline-document size and Monte Carlo samples are capped (in-process server)."""
    from plena_client import PlenaClient, PlenaRpcError, pb, system_spec
    from plena_server.app import start_server
    from plena_server.limits import ServerLimits

    limits = ServerLimits(max_devices=8, max_inline_json_bytes=1024, max_samples=10)
    running = start_server("127.0.0.1", 0, str(tmp_path / "s.log"), workers=2, limits=limits)
    try:
        with PlenaClient(f"127.0.0.1:{running.port}") as client:
            cases = [
                (
                    lambda: client.estimate(
                        system_spec("llama-3.1-8b", "illustrative_gpu_cluster_32"),
                        pb.Plan(tp=8, dp=4),
                    ),
                    "system.noc",
                ),
                (
                    lambda: client.estimate(
                        system_spec({"pad": "x" * 2000}, "illustrative_gpu_node_8"), pb.Plan(tp=8)
                    ),
                    "system.model.hf_config_json",
                ),
                (
                    lambda: client.simulate(
                        pb.SimulateRequest(
                            samples=11, training=pb.TrainingSchedule(schedule="1f1b")
                        )
                    ),
                    "samples",
                ),
            ]
            for call, field in cases:
                with pytest.raises(PlenaRpcError) as err:
                    call()
                assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert err.value.field == field
            # within the limits the same server answers
            ok = client.estimate(
                system_spec("llama-3.1-8b", "illustrative_gpu_node_8"), pb.Plan(tp=8)
            )
            assert ok.metrics.tps > 0
    finally:
        running.drain(1)
