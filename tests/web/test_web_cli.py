"""``plena-opt ui`` (URL printed once listening, loopback, clean Ctrl-C, missing extra) and
``plena-opt simulate --simulate-comm``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from plena_opt.cli.main import main

pytest.importorskip("fastapi")


def test_ui_prints_its_url_and_stops_on_ctrl_c(tmp_path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plena_opt.cli.main",
            "ui",
            "--port",
            "0",
            "--storage",
            str(tmp_path / "s.log"),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        m = re.match(r"plena-opt ui on (http://127\.0\.0\.1:(\d+)/) \(Ctrl-C to stop\)", line)
        assert m, line
        page = httpx.get(m.group(1), timeout=10)
        assert page.status_code == 200 and "/static/app.js" in page.text
        assert httpx.get(m.group(1) + "api/studies", timeout=10).json() == []
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=15)
        err = proc.stderr.read()
        assert rc == 0 and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (tmp_path / "s.log").exists()  # listing studies creates no store


def test_ui_without_the_extra_says_how_to_install(tmp_path) -> None:
    code = (
        "import sys; sys.modules['uvicorn'] = None\n"
        "from plena_opt.cli.main import main\n"
        "sys.exit(main(['ui', '--port', '0']))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert "pip install 'plena-opt[ui]'" in r.stderr and "Traceback" not in r.stderr


def test_ui_rejects_a_bad_port(capsys) -> None:
    assert main(["ui", "--port", "70000"]) == 2
    assert "error: --port must be between 0 and 65535" in capsys.readouterr().err


def test_ui_storage_defaults_like_the_other_commands(monkeypatch, capsys) -> None:
    from plena_opt.cli.main import build_parser
    from plena_opt.search.storage.storage import DEFAULT_STORAGE

    with pytest.raises(SystemExit):
        main(["ui", "--help"])
    text = re.sub(r"-\n\s*", "-", capsys.readouterr().out)  # argparse wraps at hyphens too
    assert f"./{DEFAULT_STORAGE}" in text.replace("\n", " ")
    monkeypatch.setenv("PLENA_OPT_STORAGE", "from-env.log")
    assert build_parser().parse_args(["ui"]).storage == "from-env.log"


def _simulate(capsys, *args: str) -> tuple[int, dict | str]:
    rc = main(["simulate", *args])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 and "--json" in args else out + err)


def test_simulate_comm_flag(capsys) -> None:
    base = ["--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--samples", "0", "--json"]
    rc, off = _simulate(capsys, *base, "--durations", "F=1,B=2")
    assert rc == 0 and off["n_ops"] == 64 and off["makespan"] == 33.0
    rc, on = _simulate(capsys, *base, "--durations", "F=1,B=2,XF=0.5,XB=0.5", "--simulate-comm")
    assert rc == 0 and on["n_ops"] == 64 + 48 and on["makespan"] > 33.0
    rc, err = _simulate(capsys, *base, "--durations", "F=1,B=2,XF=0.5")
    assert rc == 2 and "durations.XF" in err and "Traceback" not in err
    rc, err = _simulate(capsys, *base, "--simulate-comm", "--durations", "F=1,B=2")
    assert rc == 2 and "durations.XF is required" in err


def test_simulate_serving_without_comm(capsys) -> None:
    args = ["--pp", "2", "--tp", "4", "--noc", "illustrative_gpu_node_8", "--model", "gpt-oss-20b"]
    args += ["--input-seq", "256", "--output-seq", "8", "--samples", "0", "--json"]
    rc, on = _simulate(capsys, *args)
    rc2, off = _simulate(capsys, *args, "--no-simulate-comm")
    assert rc == rc2 == 0
    assert off["window"]["makespan"] < on["window"]["makespan"]
    assert any("communication not simulated" in c for c in off["causes"])


def test_simulate_comm_is_local_only(capsys) -> None:
    rc, err = _simulate(capsys, "--schedule", "1f1b", "--durations", "F=1,B=2", "--simulate-comm",
                        "--server", "127.0.0.1:1")  # fmt: skip
    assert rc == 2 and "--simulate-comm" in err


def test_url_is_printed_once_listening() -> None:
    # the line comes after the socket is bound: a connection right after it succeeds
    proc = subprocess.Popen(
        [sys.executable, "-m", "plena_opt.cli.main", "ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        t0 = time.monotonic()
        line = proc.stdout.readline()
        url = line.split(" on ")[1].split()[0]
        assert httpx.get(url + "api/catalog", timeout=5).status_code == 200
        assert time.monotonic() - t0 < 30
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
