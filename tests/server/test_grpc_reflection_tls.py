"""Reflection as grpc.reflection.v1 and v1alpha (a flag turns it off) and TLS with grpcio's own
server credentials (issue 10)."""

from __future__ import annotations

import os
import shutil
import subprocess

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from plena_server.app import TlsFiles, start_server

SERVICE = "plena_opt.v1.PlenaOpt"


def _list_services(channel: grpc.Channel, version: str) -> set[str]:
    """Ask ``grpc.reflection.<version>.ServerReflection`` for its services (the v1 and v1alpha
    messages are the same on the wire)."""
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    (reply,) = list(
        call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
    )
    return {s.name for s in reply.list_services_response.service}


def _describe(channel: grpc.Channel, version: str) -> bytes:
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    req = reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE)
    (reply,) = list(call(iter([req]), timeout=5))
    return b"".join(reply.file_descriptor_response.file_descriptor_proto)


@pytest.mark.parametrize("reflection_on", [True, False])
def test_reflection_v1_and_v1alpha_or_none(tmp_path, reflection_on):
    running = start_server(
        "127.0.0.1", 0, str(tmp_path / "s.log"), workers=2, reflection_on=reflection_on
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as ch:
            for version in ("v1", "v1alpha"):
                if reflection_on:
                    services = _list_services(ch, version)
                    assert {SERVICE, "grpc.health.v1.Health"} <= services
                    assert "grpc.reflection.v1.ServerReflection" in services
                    assert b"EstimateRequest" in _describe(ch, version)
                else:
                    with pytest.raises(grpc.RpcError) as info:
                        _list_services(ch, version)
                    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        running.server.stop(0)


def test_serve_has_a_no_reflection_flag():
    import argparse

    from plena_opt.cli import serve_cmd

    parser = argparse.ArgumentParser()
    serve_cmd.register(parser.add_subparsers())
    assert parser.parse_args(["serve"]).reflection is True
    assert parser.parse_args(["serve", "--no-reflection"]).reflection is False
    help_text = parser._subparsers._group_actions[0].choices["serve"].format_help()
    assert "no authentication" in help_text and "--tls-cert" in help_text


def _self_signed(tmp_path):
    """A throwaway self-signed certificate for localhost / 127.0.0.1 (openssl CLI)."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":  # .ci/run installs it
            pytest.fail("openssl is not installed")
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


def test_tls_serves_with_grpcio_server_credentials(tmp_path):
    cert, key = _self_signed(tmp_path)
    running = start_server(
        "127.0.0.1", 0, str(tmp_path / "s.log"), workers=2, tls=TlsFiles(cert, key)
    )
    try:
        target = f"localhost:{running.port}"
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(target, creds) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with grpc.insecure_channel(target) as ch:  # plaintext is refused
            with pytest.raises(grpc.RpcError) as info:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert info.value.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
    finally:
        running.server.stop(0)


def test_tls_flags_go_together_and_must_be_readable(tmp_path, capsys):
    from plena_server.__main__ import main

    assert main(["--tls-cert", str(tmp_path / "c.pem")]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert main(["--tls-cert", str(tmp_path / "c.pem"), "--tls-key", str(tmp_path / "k")]) == 2
    assert "cannot read" in capsys.readouterr().err
