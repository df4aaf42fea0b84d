"""The planner API's later fields (issue 28): the front a running search has so far arrives with
its progress (bounded), one knob of an opened plan re-estimated without a new search (the CLI's
messages, 422 naming the field), a model directory on the machine running the UI (read as
``--model-path DIR`` reads it; only a folder with a bounded config.json), an uploaded NoC profile
(validated as ``--noc FILE``; at most 4,096 devices) and a workload by request rate."""

from __future__ import annotations

import json
import shlex
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.api.limits import MAX_CONFIG_BYTES, MAX_DEVICES  # noqa: E402
from plena_opt.api.plan_detail import plan_detail  # noqa: E402
from plena_opt.cli.main import main  # noqa: E402
from plena_opt.search.progress import PROGRESS_FRONT_POINTS, thin  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "plena_opt/models/configs"
SMALL = {
    "model": "llama-3.1-8b",
    "chip": "h200-sxm",
    "noc": "hgx-h200x8",
    "input_seq": 1024,
    "output_seq": 128,
    "trials": 40,
    "serving": "aggregated",
    "engine": "vllm",
    "concurrency": 16,
}
LONG = {
    **SMALL,
    "noc": "h200x32",
    "sampler": "exhaustive",
    "trials": 20000,
    # 48 batch sizes: still running when its first front arrives, also on a loaded CI machine
    # (12 sizes once finished before a progress report carried its front)
    "batch_sizes": ",".join(str(b) for b in range(1, 49)),
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def _wait(client: TestClient, job: str, timeout: float = 120.0) -> dict:
    end = time.monotonic() + timeout
    while True:
        v = client.get(f"/api/planner/jobs/{job}").json()
        if v["state"] != "running" or time.monotonic() > end:
            return v
        time.sleep(0.05)


def _run(client: TestClient, body: dict) -> dict:
    r = client.post("/api/planner/jobs", json=body)
    assert r.status_code == 200, r.text
    v = _wait(client, r.json()["id"])
    assert v["state"] == "done", v
    return v


def _refused(r, field: str) -> str:
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    return r.json()["detail"][0]["msg"]


def _cli_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err.strip().removeprefix("error: ")


@pytest.fixture(scope="module")
def done(client) -> dict:
    return _run(client, SMALL)


def test_thin_keeps_the_ends_and_the_order() -> None:
    items = list(range(200))
    got = thin(items, 64)
    assert len(got) == 64 and got[0] == 0 and got[-1] == 199 and got == sorted(set(got))
    assert thin(items[:10], 64) == items[:10]


def test_a_running_search_sends_its_front_so_far(client) -> None:
    job = client.post("/api/planner/jobs", json=LONG).json()["id"]
    try:
        end = time.monotonic() + 120
        while True:
            v = client.get(f"/api/planner/jobs/{job}").json()
            front = v["progress"].get("front") or []
            if front or v["state"] != "running":
                break
            assert time.monotonic() < end
            time.sleep(0.02)
        assert v["state"] == "running" and front  # drawn before the search ends
        assert len(front) == min(v["progress"]["front_size"], PROGRESS_FRONT_POINTS)
        assert all(p["feasible"] and p["tps_per_gpu"] > 0 for p in front)
        assert all(p["basis"] == "model, static batch (search so far)" for p in front)
    finally:
        client.post(f"/api/planner/jobs/{job}/cancel")
        _wait(client, job, 30)


def test_one_knob_is_re_estimated_as_the_plan_with_that_key(client, done) -> None:
    from plena_opt.api.planner import planner_search

    key = next(p["key"] for p in done["answer"]["points"] if "-b16" in p["key"])
    r = client.post(
        f"/api/planner/jobs/{done['id']}/reestimate", json={"key": key, "batch_size": 64}
    )
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["key"] == key.replace("-b16", "-b64") and got["changed"] == {"batch_size": 64}
    spec = planner_search(SMALL).request.problem
    want = plan_detail(spec, got["key"], "vllm", 16).to_dict()
    assert got["detail"]["pools"][0]["tps"] == pytest.approx(want["pools"][0]["tps"])
    before = client.get(f"/api/planner/jobs/{done['id']}/plan", params={"key": key}).json()
    assert got["detail"]["pools"][0]["tps"] != before["pools"][0]["tps"]
    r = client.post(
        f"/api/planner/jobs/{done['id']}/reestimate", json={"key": key, "request_rate": 2.0}
    )
    load = r.json()["detail"]["pools"][0]["under_load"]
    assert load["request_rate"] == 2.0 and load["concurrency"] is None


def test_a_bad_knob_is_422_naming_it_with_the_clis_message(client, done, capsys) -> None:
    key = done["answer"]["points"][0]["key"]
    url = f"/api/planner/jobs/{done['id']}/reestimate"
    base = ["estimate", "--model", "llama-3.1-8b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]
    cases = [
        ("tp", {"tp": 16}, ["--tp", "16"]),
        ("precision", {"precision": "nope"}, ["--tp", "8", "--precision", "nope"]),
        ("request_rate", {"request_rate": 0.0}, ["--tp", "8", "--request-rate", "0"]),
    ]
    for field, knob, flags in cases:
        msg = _refused(client.post(url, json={"key": key, **knob}), field)
        assert msg == _cli_error(base + flags, capsys)
    assert "--batch-size" in _refused(
        client.post(url, json={"key": key, "batch_size": 0}), "batch_size"
    )
    both = {"key": key, "concurrency": 4, "request_rate": 1.0}
    assert "not both" in _refused(client.post(url, json=both), "request_rate")
    r = client.post(url, json={"key": "tp3-x", "tp": 1})
    assert r.status_code == 404 and r.json()["field"] == "key"


@pytest.fixture()
def model_dir(tmp_path) -> Path:
    folder = tmp_path / "My-Llama-3.2-1B"
    folder.mkdir()
    shutil.copy(CONFIGS / "llama-3.2-1b.json", folder / "config.json")
    return folder


def test_a_model_directory_is_searched_as_model_path_would(client, model_dir, capsys, tmp_path):
    body = {k: v for k, v in SMALL.items() if k != "model"} | {"model_dir": str(model_dir)}
    v = _run(client, body)
    assert f"--model-path {model_dir}" in v["command"] and "--model " not in v["command"]
    argv = shlex.split(v["command"])[1:] + ["--json", "--quiet", "--recheck", "0"]
    assert main([*argv, "--storage", str(tmp_path / "s.log")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e["key"] for e in doc["front"]] == [p["key"] for p in v["answer"]["points"]]
    key = v["answer"]["points"][0]["key"]
    r = client.get(f"/api/planner/jobs/{v['id']}/bundle", params={"key": key})
    assert r.status_code == 200  # the engines load the directory


def test_a_model_directory_must_hold_a_bounded_config(client, model_dir, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "config.json", "wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)
    odd = tmp_path / "odd"
    (odd / "config.json").mkdir(parents=True)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    cases = {
        str(tmp_path / "missing"): "does not exist",
        str(model_dir / "config.json"): "is not a directory",
        str(empty): "holds no config.json",
        str(big): f"at most {MAX_CONFIG_BYTES:,}",
        str(odd): "holds no config.json file",
        str(bad): "is not valid JSON",
        "x" * 5000: "at most 4096 characters",
    }
    body = {k: v for k, v in SMALL.items() if k != "model"}
    for path, rule in cases.items():
        msg = _refused(
            client.post("/api/planner/jobs", json={**body, "model_dir": path}), "model_dir"
        )
        assert rule in msg, (path, msg)


def _noc(devices: int) -> dict:
    from deepstack.presets import switch_noc

    return switch_noc(devices).to_dict()


def test_an_uploaded_noc_profile_is_the_cluster(client) -> None:
    body = {k: v for k, v in SMALL.items() if k != "noc"} | {"noc_document": _noc(16)}
    v = _run(client, body | {"noc_name": "my-switch"})
    assert "--noc noc.json" in v["command"] and v["noc_uploaded"] is True
    assert max(p["devices"] for p in v["answer"]["points"]) == 16
    assert "noc_document" not in v["fields"]


def test_an_uploaded_noc_profile_is_validated_and_bounded(client) -> None:
    body = {k: v for k, v in SMALL.items() if k != "noc"}
    big = _noc(2 * MAX_DEVICES)
    msg = _refused(
        client.post("/api/planner/jobs", json={**body, "noc_document": big}), "noc_document"
    )
    assert f"at most {MAX_DEVICES:,}" in msg
    broken = _noc(16)
    broken["layers"]["L1"]["shape"] = [0, 4]
    r = client.post("/api/planner/jobs", json={**body, "noc_document": broken})
    assert r.status_code == 422 and r.json()["field"].startswith("noc_document")
    r = client.post("/api/planner/jobs", json={**body, "noc_document": {"kind": "nope"}})
    assert r.status_code == 422 and r.json()["field"].startswith("noc_document")


def test_a_workload_by_request_rate(client, capsys) -> None:
    body = {k: v for k, v in SMALL.items() if k != "concurrency"} | {"request_rate": 2.0}
    v = _run(client, body)
    key = v["answer"]["points"][0]["key"]
    d = client.get(f"/api/planner/jobs/{v['id']}/plan", params={"key": key}).json()
    load = d["pools"][0]["under_load"]
    assert (
        load["request_rate"] == 2.0 and load["concurrency"] is None and load["ttft_ms"]["p50"] > 0
    )
    msg = _refused(
        client.post("/api/planner/jobs", json={**SMALL, "request_rate": 1.0}), "request_rate"
    )
    assert "not both" in msg
    msg = _refused(
        client.post("/api/planner/jobs", json={**body, "request_rate": -1}), "request_rate"
    )
    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]
    assert msg == _cli_error([*argv, "--tp", "8", "--request-rate", "-1"], capsys)


def test_one_model_source_and_one_cluster(client, model_dir) -> None:
    both = {**SMALL, "model_dir": str(model_dir)}  # SMALL names a catalog model
    assert "not both" in _refused(client.post("/api/planner/jobs", json=both), "model_dir")
    noc = {**SMALL, "noc_document": _noc(16)}  # and a listed cluster
    assert "not both" in _refused(client.post("/api/planner/jobs", json=noc), "noc_document")
