"""``plena-opt ui --calibration overlay.json`` (issue 23, item 6): the web app started with an
overlay prices the planner's plans under load with it (the plan view's engine host time per
step); a damaged overlay is refused at start naming the flag."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from plena_opt.cli.main import main
from tests.calibration_support import one_constant_overlay

pytest.importorskip("fastapi")
import httpx  # noqa: E402

SHIFT_S = 0.002  # the overlay's host time per vLLM step on an H100 (hand-made, not fitted)
OVERLAY = one_constant_overlay("vllm", "h100-sxm", SHIFT_S)
JOB = {"model": "llama-3.1-8b", "chip": "h100-sxm", "noc": "hgx-h100x8", "input_seq": 1024,
       "output_seq": 128, "batch_sizes": "16", "trials": 10, "serving": "aggregated",
       "engine": "vllm", "concurrency": 16}  # fmt: skip


def _plan_view(base: str) -> dict:
    job = httpx.post(base + "api/planner/jobs", json=JOB, timeout=30).json()
    end = time.monotonic() + 300
    while job["state"] == "running" and time.monotonic() < end:
        time.sleep(0.1)
        job = httpx.get(f"{base}api/planner/jobs/{job['id']}", timeout=30).json()
    assert job["state"] == "done", job
    key = job["answer"]["points"][0]["key"]
    view = httpx.get(f"{base}api/planner/jobs/{job['id']}/plan", params={"key": key}, timeout=60)
    return view.json()["pools"][0]["under_load"]


def test_the_ui_prices_under_load_with_the_overlay_it_was_started_with(tmp_path) -> None:
    path = tmp_path / "overlay.json"
    path.write_text(json.dumps(OVERLAY))
    argv = [sys.executable, "-m", "plena_opt.cli.main", "ui", "--port", "0", "--storage",
            str(tmp_path / "s.log"), "--calibration", str(path)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.match(r"plena-opt ui on (http://127\.0\.0\.1:\d+/)", line)
        assert m, line + proc.stderr.read()
        load = _plan_view(m.group(1))
        assert load["host_step_seconds"] == pytest.approx(SHIFT_S)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_without_an_overlay_the_plan_view_has_the_shipped_constant() -> None:
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    client = TestClient(create_app(storage=None), base_url="http://127.0.0.1")
    job = client.post("/api/planner/jobs", json=JOB).json()
    end = time.monotonic() + 300
    while job["state"] == "running" and time.monotonic() < end:
        time.sleep(0.05)
        job = client.get(f"/api/planner/jobs/{job['id']}").json()
    key = job["answer"]["points"][0]["key"]
    view = client.get(f"/api/planner/jobs/{job['id']}/plan", params={"key": key}).json()
    assert view["pools"][0]["under_load"]["host_step_seconds"] == 0.0


def test_a_damaged_overlay_is_refused_at_start(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**OVERLAY, "version": 2}))
    assert main(["ui", "--port", "0", "--calibration", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --calibration {bad}: calibration.version")
    assert "Traceback" not in err
