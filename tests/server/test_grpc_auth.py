"""Who may use a shared gRPC server (issue 29): a bearer token (UNAUTHENTICATED with no detail
when missing or wrong; health stays open) and mutual TLS (a client certificate signed by the
operator's CA); the client library and ``--server`` send the credentials."""

from __future__ import annotations

import os
import shutil
import subprocess

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from plena_client import Credentials, PlenaClient, PlenaRpcError, pb, system_spec
from plena_server.app import TlsFiles, start_server

TOKEN = "team-token-0123456789abcdef"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    store = tmp_path_factory.mktemp("auth") / "s.log"
    running = start_server("127.0.0.1", 0, str(store), workers=2, auth_token=TOKEN)
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        running.server.stop(0)


def _client(target: str, token: str | None, **kw) -> PlenaClient:
    return PlenaClient(target, credentials=Credentials.load(token=token, environ={}, **kw))


def _estimate(client: PlenaClient) -> pb.EstimateResponse:
    system = system_spec("gpt-oss-20b", "illustrative_gpu_node_8")
    return client.estimate(system, pb.Plan(tp=8), timeout=30)


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789abcdef", TOKEN + "x", TOKEN[:-1]])
def test_a_missing_or_wrong_token_is_unauthenticated_without_detail(token_server, token):
    with _client(token_server, token) as c:
        for call in (c.list_models, c.list_studies, lambda: _estimate(c)):
            with pytest.raises(PlenaRpcError) as info:
                call()
            assert info.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert info.value.message == "" and info.value.field is None
        with pytest.raises(PlenaRpcError) as info:  # a server-streaming RPC too
            list(c.stream_search(pb.SearchRequest(), timeout=10))
        assert info.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_the_right_token_is_let_in(token_server):
    with _client(token_server, TOKEN) as c:
        assert c.list_models()
        assert _estimate(c).estimate.plan
        with pytest.raises(PlenaRpcError) as info:  # authenticated: the request itself is judged
            list(c.stream_search(pb.SearchRequest(), timeout=10))
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_the_token_comes_from_the_environment_or_a_file(token_server, tmp_path):
    with PlenaClient(
        token_server, credentials=Credentials.load(environ={"PLENA_OPT_TOKEN": TOKEN})
    ) as c:
        assert c.list_models()
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    with PlenaClient(token_server, credentials=Credentials.load(token_file=f, environ={})) as c:
        assert c.list_models()


def test_health_stays_open_without_the_token(token_server):
    with _client(token_server, None) as c:
        assert c.health() == "SERVING"


def test_reflection_needs_the_token(token_server):
    from grpc_reflection.v1alpha import reflection_pb2

    with grpc.insecure_channel(token_server) as ch:
        call = ch.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as info:
            list(call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _ca(tmp_path, name: str):
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
        "-out", str(cert), "-subj", f"/CN={name}",
    )  # fmt: skip
    return cert, key


def _signed(tmp_path, name: str, ca, san: str | None = None):
    """A certificate for ``name`` signed by ``ca`` (cert, key)."""
    cert, key, csr = tmp_path / f"{name}.pem", tmp_path / f"{name}.key", tmp_path / f"{name}.csr"
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", f"/CN={name}",
    )  # fmt: skip
    ext = tmp_path / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "extendedKeyUsage=clientAuth\n")
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-days", "1", "-out", str(cert), "-extfile", str(ext),
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("openssl is not installed")
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")
    ca, other_ca = _ca(d, "team-ca"), _ca(d, "other-ca")
    server = _signed(d, "server", ca, "DNS:localhost,IP:127.0.0.1")
    member, stranger = _signed(d, "member", ca), _signed(d, "stranger", other_ca)
    tls = TlsFiles(server[0], server[1], client_ca=ca[0])
    running = start_server("127.0.0.1", 0, str(d / "s.log"), workers=2, tls=tls)
    try:
        yield f"localhost:{running.port}", ca[0], member, stranger
    finally:
        running.server.stop(0)


def test_mtls_lets_in_a_client_certificate_of_the_ca(mtls):
    target, ca, member, _ = mtls
    creds = Credentials.load(root_ca=ca, client_cert=member[0], client_key=member[1], environ={})
    with PlenaClient(target, credentials=creds) as c:
        assert c.list_models() and c.health() == "SERVING"


@pytest.mark.parametrize("who", ["none", "stranger"])
def test_mtls_refuses_a_client_without_a_certificate_of_the_ca(mtls, who):
    target, ca, _, stranger = mtls
    files = {"client_cert": stranger[0], "client_key": stranger[1]} if who == "stranger" else {}
    creds = Credentials.load(root_ca=ca, environ={}, **files)
    with PlenaClient(target, credentials=creds) as c:
        with pytest.raises(PlenaRpcError) as info:
            c.list_models(timeout=5)
        assert info.value.code == grpc.StatusCode.UNAVAILABLE  # the TLS handshake fails
    with grpc.insecure_channel(target) as ch, pytest.raises(grpc.RpcError):
        health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3)


def test_client_cert_and_key_go_together(tmp_path):
    with pytest.raises(ValueError, match="go together"):
        Credentials.load(client_cert=tmp_path / "c.pem", environ={})


def test_cli_server_sends_the_token(token_server, tmp_path, capsys, monkeypatch):
    from plena_opt.cli.main import main

    monkeypatch.delenv("PLENA_OPT_TOKEN", raising=False)
    assert main(["studies", "--server", token_server]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "UNAUTHENTICATED" in err and "--token-file" in err
    f = tmp_path / "token"
    f.write_text(TOKEN)
    assert main(["studies", "--server", token_server, "--token-file", str(f)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("PLENA_OPT_TOKEN", TOKEN)
    assert main(["studies", "--server", token_server]) == 0


def test_cli_server_over_mutual_tls(mtls, capsys, monkeypatch):
    from plena_opt.cli.main import main

    monkeypatch.delenv("PLENA_OPT_TOKEN", raising=False)
    target, ca, member, _ = mtls
    argv = ["studies", "--server", target, "--server-ca", str(ca)]
    assert main([*argv, "--client-cert", str(member[0]), "--client-key", str(member[1])]) == 0
    capsys.readouterr()
    assert main([*argv, "--client-cert", str(member[0])]) == 2
    assert "--client-cert and --client-key go together" in capsys.readouterr().err


def test_cli_refuses_an_unreadable_credential_file(tmp_path, capsys):
    from plena_opt.cli.main import main

    argv = ["studies", "--server", "127.0.0.1:1", "--server-ca", str(tmp_path / "absent.pem")]
    assert main(argv) == 2
    assert "--server-ca: cannot read" in capsys.readouterr().err


def test_serve_flags_token_and_client_ca(tmp_path, capsys):
    from plena_server.__main__ import main

    assert main(["--tls-client-ca", str(tmp_path / "ca.pem")]) == 2
    assert "--tls-client-ca needs --tls-cert and --tls-key" in capsys.readouterr().err
    short = tmp_path / "short"
    short.write_text("abc")
    assert main(["--auth-token-file", str(short)]) == 2
    assert "at least 16 characters" in capsys.readouterr().err
    assert main(["--auth-token-file", str(tmp_path / "absent")]) == 2
    assert "--auth-token-file: cannot read" in capsys.readouterr().err


def test_serve_with_a_token_file_end_to_end(tmp_path):
    from plena_server.process import ServerProcess

    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    with ServerProcess(tmp_path / "s.log", "--auth-token-file", str(f)) as server:
        with _client(server.target, None) as c, pytest.raises(PlenaRpcError) as info:
            c.list_models()
        assert info.value.code == grpc.StatusCode.UNAUTHENTICATED
        with _client(server.target, TOKEN) as c:
            assert c.list_models()
