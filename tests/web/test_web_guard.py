"""The web app refuses rebound Host names (400), a missing or wrong token (401) and simulations
beyond the running slots (503), as the gRPC server bounds its Simulates (issue 29)."""

from __future__ import annotations

import base64
import re
import signal
import subprocess
import sys
import threading

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.api.limits import LimitError, WorkSlots  # noqa: E402
from plena_opt.errors import PlenaInputError  # noqa: E402
from plena_opt.web import guard  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402

TOKEN = "s3cret-token-0123456789"
TRAINING = {"mode": "training", "samples": 2}


def _client(**kw) -> TestClient:
    return TestClient(create_app(storage=None, **kw), base_url="http://127.0.0.1")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "localhost:1", "[::1]:8765"])
def test_loopback_host_names_are_answered(host):
    r = _client().get("/api/catalog", headers={"host": host})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("host", ["rebind.attacker.example", "evil:8765", "127.0.0.2", "0.0.0.0"])
@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/"), ("GET", "/api/studies"), ("POST", "/api/simulate")]
)
def test_other_host_names_are_refused(host, method, path):
    r = _client().request(method, path, headers={"host": host}, json=TRAINING)
    assert r.status_code == 400 and r.text == "Invalid host header"


def test_the_bound_address_and_allowed_hosts_are_answered():
    c = _client(bound_host="10.1.2.3", allowed_hosts=["ui.team.example", "*.corp.example"])
    for host in ("10.1.2.3:8765", "ui.team.example", "a.corp.example", "UI.Team.Example"):
        assert c.get("/api/catalog", headers={"host": host}).status_code == 200, host
    for host in ("10.1.2.4", "team.example", "corp.example.evil"):
        assert c.get("/api/catalog", headers={"host": host}).status_code == 400, host
    v6 = _client(bound_host="fd00::5")
    assert v6.get("/api/catalog", headers={"host": "[fd00::5]:1"}).status_code == 200


def test_a_wildcard_bind_address_is_not_an_allowed_host():
    assert guard.allowed_hosts("0.0.0.0") == list(guard.LOOPBACK_HOSTS)
    assert guard.allowed_hosts("::") == list(guard.LOOPBACK_HOSTS)


@pytest.mark.parametrize(
    "bad", ["*", "host:8080", "two words", "a/b", "", "x" * 300, "a" * 40 + "!"]
)
def test_allowed_host_must_be_a_name(bad):
    with pytest.raises(PlenaInputError, match="--allowed-host"):
        guard.check_allowed_host(bad)


def test_allowed_host_accepts_names_and_addresses():
    assert guard.check_allowed_host("Box.Local") == "box.local"
    assert guard.check_allowed_host("::1") == "[::1]"
    assert guard.check_allowed_host("[fd00::1]") == "[fd00::1]"
    assert guard.check_allowed_host("*.corp.example") == "*.corp.example"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong-token-0123456789"},
        {"authorization": f"Bearer {TOKEN}x"},
        {"authorization": f"bearer{TOKEN}"},
        {"authorization": TOKEN},
        {"authorization": "Basic " + base64.b64encode(b"user:nope").decode()},
        {"authorization": "Basic !!!"},
    ],
)
def test_a_missing_or_wrong_token_is_401_without_detail(headers):
    c = _client(auth_token=TOKEN)
    for method, path in (("GET", "/"), ("GET", "/api/studies"), ("POST", "/api/simulate")):
        r = c.request(method, path, headers=headers, json=TRAINING)
        assert r.status_code == 401 and r.content == b""
        assert r.headers["www-authenticate"].startswith("Basic")


def test_the_token_lets_requests_in():
    c = _client(auth_token=TOKEN)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    assert c.get("/api/studies", headers=bearer).status_code == 200
    assert c.post("/api/simulate", headers=bearer, json=TRAINING).status_code == 200
    basic = {"authorization": "Basic " + base64.b64encode(f"me:{TOKEN}".encode()).decode()}
    assert c.get("/", headers=basic).status_code == 200  # what a browser sends after its prompt


def test_the_host_is_checked_before_the_token():
    c = _client(auth_token=TOKEN)
    r = c.get("/api/studies", headers={"host": "evil.example", "authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 400


def test_work_slots_bound_count_and_bytes():
    slots = WorkSlots(count=2, total_bytes=100)
    with slots.slot(60):
        with pytest.raises(LimitError) as info:
            with slots.slot(50):
                pass
        assert info.value.busy and "MiB" in str(info.value)
        with slots.slot(40):
            assert slots.active() == 2
            with pytest.raises(LimitError, match="2 simulations are running"):
                with slots.slot(0):
                    pass
    assert slots.active() == 0
    with slots.slot(100):
        pass


def test_a_simulation_beyond_the_running_slots_is_503(monkeypatch):
    from plena_opt.web import limits, service

    started, release = threading.Event(), threading.Event()
    real = service.run_training

    def slow(*args, **kw):
        started.set()
        release.wait(30)
        return real(*args, **kw)

    monkeypatch.setattr(service, "run_training", slow)
    monkeypatch.setattr(limits, "MAX_CONCURRENT_SIMULATIONS", 1)
    monkeypatch.setattr(limits, "WorkSlots", lambda: WorkSlots(count=1))
    c = _client()
    first: dict = {}
    t = threading.Thread(target=lambda: first.update(r=c.post("/api/simulate", json=TRAINING)))
    t.start()
    try:
        assert started.wait(30)
        r = c.post("/api/simulate", json=TRAINING | {"seed": 9})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["field"] == "request" and "retry later" in r.json()["detail"][0]["msg"]
    finally:
        release.set()
        t.join(60)
    assert first["r"].status_code == 200
    assert c.post("/api/simulate", json=TRAINING | {"seed": 9}).status_code == 200


def test_a_simulation_above_the_memory_bound_is_422_naming_samples():
    body = {
        "mode": "training",
        "training": {"pp": 64, "microbatches": 512},  # 65,536 ops × 2048 samples/block
        "samples": 3000,
    }
    r = _client().post("/api/simulate", json=body)
    assert r.status_code == 422 and r.json()["field"] == "samples"
    assert "MiB" in r.json()["detail"][0]["msg"]


def test_ui_cli_allowed_host_and_token(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    argv = [sys.executable, "-m", "plena_opt.cli.main", "ui", "--port", "0"]
    argv += ["--storage", str(tmp_path / "s.log"), "--allowed-host", "ui.team.example"]
    argv += ["--auth-token-file", str(token_file)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = re.match(r"plena-opt ui on (http://127\.0\.0\.1:\d+/)", proc.stdout.readline())
        assert m
        url, auth = m.group(1) + "api/studies", {"authorization": f"Bearer {TOKEN}"}
        assert httpx.get(url, timeout=10).status_code == 401
        assert httpx.get(url, headers=auth, timeout=10).json() == []
        named = auth | {"host": "ui.team.example"}
        assert httpx.get(url, headers=named, timeout=10).status_code == 200
        other = auth | {"host": "other.example"}
        assert httpx.get(url, headers=other, timeout=10).status_code == 400
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--allowed-host", "*"], "--allowed-host must be a host name"),
        (["--auth-token-file", "/nonexistent/token"], "--auth-token-file: cannot read"),
        (["--auth-token-file", "SHORT"], "at least 16 characters"),
    ],
)
def test_ui_cli_refuses_bad_flags(tmp_path, capsys, extra, message):
    from plena_opt.cli.main import main

    short = tmp_path / "short"
    short.write_text("abc\n")
    extra = [str(short) if e == "SHORT" else e for e in extra]
    assert main(["ui", "--port", "0", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
