"""The planner API of ``plena-opt ui`` (``/api/planner/…``): a search started as a job ends with
the answer the library gives for the same request, bad fields are 422 with the CLI's message,
cancel stops a running search, one plan's breakdown matches ``estimate``, the bundle zip holds
the files of ``plena-opt export --out-dir``, and the simulator form takes a chip."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt import api  # noqa: E402
from plena_opt.api.planner import planner_search, run_planner  # noqa: E402
from plena_opt.cli.main import main  # noqa: E402
from plena_opt.stop import StopToken  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402

SMALL = {
    "model": "llama-3.1-8b",
    "chip": "h200-sxm",
    "noc": "hgx-h200x8",
    "input_seq": 1024,
    "output_seq": 128,
    "trials": 40,
    "max_ttft_ms": 500,
    "serving": "both",
    "engine": "vllm",
    "concurrency": 16,
}
# a space of thousands of plans (32 devices × 12 batch sizes): still running when cancelled
LONG = {
    **SMALL,
    "noc": "h200x32",
    "serving": "aggregated",
    "sampler": "exhaustive",
    "trials": 20000,
    # 48 batch sizes: tens of thousands of plans, still running when cancelled or counted, also on
    # a loaded CI machine
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


@pytest.fixture(scope="module")
def done(client) -> dict:
    r = client.post("/api/planner/jobs", json=SMALL)
    assert r.status_code == 200, r.text
    v = _wait(client, r.json()["id"])
    assert v["state"] == "done", v
    return v


def test_a_job_gives_the_librarys_answer(done) -> None:
    ps = planner_search(SMALL)
    want = run_planner(ps, StopToken())
    got = done["answer"]
    assert [p["key"] for p in got["points"]] == [p["key"] for p in want.points]
    assert got["recommendation"]["key"] == want.recommendation.key
    modes = {p["mode"] for p in got["points"]}
    assert modes == {"aggregated", "disaggregated"}
    assert done["progress"]["done"] == got["summary"]["evaluated"] == 40
    assert done["progress"]["front_size"] >= 1 and done["progress"]["hypervolume"] > 0
    assert done["command"].startswith("plena-opt search --model llama-3.1-8b --chip h200-sxm")


def test_the_command_reproduces_the_search(done, capsys, tmp_path) -> None:
    import json
    import shlex

    argv = shlex.split(done["command"])[1:] + ["--json", "--quiet", "--recheck", "0"]
    argv += ["--storage", str(tmp_path / "s.log")]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    agg = doc["serving"]["comparison"]["aggregated"]["front"]
    assert [e["key"] for e in agg] == [
        p["key"] for p in done["answer"]["points"] if p["mode"] == "aggregated"
    ]
    assert doc["recommendation"]["key"] == done["answer"]["recommendation"]["key"]


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [
        ("max_ttft_ms", -1, "--max-ttft-ms"),
        ("objectives", ["x"], "--objectives"),
        ("trials", 0, "--trials"),
        ("input_seq", 0, "--input-seq"),
        ("concurrency", 0, "--concurrency"),
    ],
)
def test_bad_fields_are_422_with_the_clis_message(client, capsys, field, value, flag) -> None:
    r = client.post("/api/planner/jobs", json={**SMALL, field: value})
    assert r.status_code == 422, r.text
    doc = r.json()
    assert doc["field"] == field
    if field == "concurrency":  # the CLI's estimate checks it
        argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "h200-sxm", "--noc"]
        argv += ["hgx-h200x8", "--tp", "8", "--concurrency", "0"]
    else:
        text = ",".join(value) if isinstance(value, list) else str(value)
        argv = ["search", "--model", "llama-3.1-8b", "--storage", ":memory:", flag, text]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().removeprefix("error: ")
    assert doc["detail"][0]["msg"] in err, (doc, err)


def test_unknown_names_and_jobs(client, done) -> None:
    r = client.post("/api/planner/jobs", json={**SMALL, "chip": "nope"})
    assert r.status_code == 422 and r.json()["field"] == "chip"
    assert client.get("/api/planner/jobs/nope").status_code == 404
    key = done["answer"]["points"][0]["key"]
    assert client.get("/api/planner/jobs/nope/plan", params={"key": key}).status_code == 404
    r = client.get(f"/api/planner/jobs/{done['id']}/plan", params={"key": "tp3-x"})
    assert r.status_code == 404 and r.json()["field"] == "key"


def test_cancel_stops_a_running_search(client) -> None:
    job = client.post("/api/planner/jobs", json=LONG).json()["id"]
    end = time.monotonic() + 60
    while client.get(f"/api/planner/jobs/{job}").json()["progress"].get("done", 0) == 0:
        assert time.monotonic() < end
        time.sleep(0.02)
    assert client.post(f"/api/planner/jobs/{job}/cancel").status_code == 200
    v = _wait(client, job, 30)
    assert v["state"] == "cancelled", v["state"]
    assert v["answer"]["summary"]["partial"] is True
    assert v["answer"]["summary"]["evaluated"] < v["answer"]["summary"]["legal_points"]
    assert v["stopped_after_s"] is not None
    if v["answer"]["summary"]["front_size"]:  # answered from the front it found
        assert v["answer"]["recommendation"]["key"] in {p["key"] for p in v["answer"]["points"]}


def test_a_plan_breakdown_is_the_estimate(client, done) -> None:
    agg = next(p for p in done["answer"]["points"] if p["mode"] == "aggregated")
    d = client.get(f"/api/planner/jobs/{done['id']}/plan", params={"key": agg["key"]}).json()
    (pool,) = d["pools"]
    plan, batch, _ = _parse(agg["key"])
    spec = {k: SMALL[k] for k in ("model", "chip", "noc", "input_seq", "output_seq")}
    est = api.estimate_plan(api.load_problem(spec, batch_size=batch), plan).document
    stage = est["prefill"]["stages"][0]
    assert pool["prefill"][0]["compute_ms"] == pytest.approx(stage["compute_seconds"] * 1e3)
    assert pool["prefill"][0]["hbm_ms"] == pytest.approx(stage["memory_seconds"] * 1e3)
    assert pool["weight_bytes"] == est["weight_bytes_per_device"]
    assert pool["capacity_bytes"] == est["memory_capacity_bytes"]
    load = pool["under_load"]
    assert load["engine"] == "vllm" and load["concurrency"] == 16
    assert 0 < load["ttft_ms"]["p50"] <= load["ttft_ms"]["p99"]
    disagg = next(p for p in done["answer"]["points"] if p["mode"] == "disaggregated")
    d = client.get(f"/api/planner/jobs/{done['id']}/plan", params={"key": disagg["key"]}).json()
    assert [p["role"] for p in d["pools"]] == ["prefill", "decode"] and d["disaggregated"]


def _parse(key: str):
    from plena_opt.export.launch import parse_point_key

    return parse_point_key(key)


def test_the_bundle_is_what_export_writes(client, done, tmp_path) -> None:
    key = done["answer"]["recommendation"]["export_command"].split()[2]
    r = client.get(f"/api/planner/jobs/{done['id']}/bundle", params={"key": key})
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    files = {
        n.split("/", 1)[1]: zipfile.ZipFile(io.BytesIO(r.content)).read(n).decode()
        for n in zipfile.ZipFile(io.BytesIO(r.content)).namelist()
    }
    out = tmp_path / "bundle"
    argv = ["export", key, "--model", "llama-3.1-8b", "--input-seq", "1024", "--output-seq"]
    assert main([*argv, "128", "--gpu", "h200-sxm", "--out-dir", str(out)]) == 0
    want = {p.name: p.read_text() for p in out.iterdir()}
    assert files == want
    assert "deployment.json" in files and any(n.endswith(".sh") for n in files)


def test_the_simulator_form_takes_a_chip(client) -> None:
    plan = {"tp": 8, "pp": 1, "batch_size": 4, "input_seq": 256, "output_seq": 16}
    body = {**plan, "model": "llama-3.1-8b", "noc": "hgx-h200x8"}
    gpu = client.post("/api/estimate", json={**body, "chip": "h200-sxm"})
    plena = client.post("/api/estimate", json=body)
    assert gpu.status_code == 200 and plena.status_code == 200, gpu.text
    want = api.estimate_plan(
        api.load_problem(
            model="llama-3.1-8b",
            noc="hgx-h200x8",
            chip="h200-sxm",
            batch_size=4,
            input_seq=256,
            output_seq=16,
        ),
        api.Plan(tp=8),
    ).document
    assert gpu.json()["ttft_ms"] == pytest.approx(want["ttft_seconds"] * 1e3)
    assert gpu.json()["ttft_ms"] != plena.json()["ttft_ms"]
    r = client.post("/api/estimate", json={**body, "chip": "../x.json"})
    assert r.status_code == 422 and r.json()["field"] == "serving.chip"


def test_a_third_running_search_is_503(client) -> None:
    jobs = [client.post("/api/planner/jobs", json=LONG).json()["id"] for _ in range(2)]
    try:  # each takes many seconds: both still run when the third asks
        assert [client.get(f"/api/planner/jobs/{j}").json()["state"] for j in jobs] == [
            "running",
            "running",
        ]
        r = client.post("/api/planner/jobs", json=LONG)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["field"] == "planner"
    finally:
        for j in jobs:
            client.post(f"/api/planner/jobs/{j}/cancel")
            _wait(client, j, 30)


@pytest.mark.parametrize("field", ["model", "chip", "noc"])
def test_paths_on_the_server_are_refused(client, field) -> None:
    for value in ("/etc/passwd", "../x.json", "profiles\\a", "x.json"):
        r = client.post("/api/planner/jobs", json={**SMALL, field: value})
        assert r.status_code == 422 and r.json()["field"] == field, r.text
        assert "not a path" in r.json()["message"]
