"""The planner takes what the CLI and gRPC take (r17qa): a Hugging Face id as ``model`` (the
checkpoint facts resolve from it: NVFP4 weights, the ModelOpt fp8 KV), its plan view under load
equal to ``plena-opt estimate``'s replay of the same plan; and the workload bounds of every web
form are the library's (``estimate.plan.MAX_WORKLOAD``), refused past them naming the field."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.cli.main import main  # noqa: E402
from plena_opt.estimate.plan import MAX_WORKLOAD  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402
from tests.web_support import planner_job_done  # noqa: E402

QWEN = {"model": "nvidia/Qwen3-32B-NVFP4", "chip": "b200", "noc": "hgx-b200x8", "devices": 4,
        "engine": "trtllm", "concurrency": 64, "input_seq": 15000, "output_seq": 500,
        "trials": 8, "serving": "aggregated"}  # fmt: skip


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def _done(client: TestClient, body: dict) -> dict:
    return planner_job_done(client, body)


def test_a_hugging_face_id_plans_as_the_cli_estimates_it(client, capsys) -> None:
    job = _done(client, QWEN)
    key = next(f["key"] for f in job["progress"]["front"] if f["key"].startswith("tp4-"))
    r = client.get(f"/api/planner/jobs/{job['id']}/plan", params={"key": key})
    assert r.status_code == 200, r.text
    pool = r.json()["pools"][0]
    tp, ep, dp, pp, cp, mode, overlap, batch = key.split("-")
    argv = ["estimate", "--model", QWEN["model"], "--chip", "b200", "--noc", "hgx-b200x8",
            "--devices", "4", "--tp", tp[2:], "--ep", ep[2:], "--dp", dp[2:], "--pp", pp[2:],
            "--cp", cp[2:], "--moe-tp-mode", mode, "--comm-overlap", overlap,
            "--batch-size", batch[1:], "--engine", "trtllm", "--concurrency", "64",
            "--input-seq", "15000", "--output-seq", "500", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["chip"]["precision"] == "fp4" and doc["chip"]["checkpoint_kv_precision"] == "fp8"
    assert pool["ttft_ms"] == pytest.approx(doc["ttft_seconds"] * 1e3, rel=1e-12)
    replay = doc["serving_under_load"]["replay"]
    load = pool["under_load"]
    assert load["engine"] == "trtllm"
    assert load["ttft_ms"]["mean"] == pytest.approx(replay["ttft_seconds"]["mean"] * 1e3, rel=1e-9)
    assert load["tpot_ms"]["mean"] == pytest.approx(replay["tpot_seconds"]["mean"] * 1e3, rel=1e-9)


@pytest.mark.parametrize("model", ["nvidia/NotAModel-FP8", "a/b.json", "../etc/passwd", "/x/y"])
def test_an_id_that_is_no_model_or_a_path_is_422_naming_model(client, model) -> None:
    r = client.post("/api/planner/jobs", json={**QWEN, "model": model})
    assert r.status_code == 422 and r.json()["field"] == "model", r.text


@pytest.mark.parametrize(
    ("path", "field", "top"),
    [("/api/planner/jobs", "input_seq", MAX_WORKLOAD["input_seq_len"]),
     ("/api/planner/jobs", "output_seq", MAX_WORKLOAD["output_seq_len"]),
     ("/api/planner/jobs", "batch_sizes", MAX_WORKLOAD["batch_size"]),
     ("/api/estimate", "input_seq", MAX_WORKLOAD["input_seq_len"]),
     ("/api/estimate", "output_seq", MAX_WORKLOAD["output_seq_len"]),
     ("/api/estimate", "batch_size", MAX_WORKLOAD["batch_size"])],
)  # fmt: skip
def test_the_workload_bounds_are_the_clis(client, path, field, top) -> None:
    body = {**QWEN, "trials": 1} if path == "/api/planner/jobs" else {}
    value = str(top + 1) if field == "batch_sizes" else top + 1
    r = client.post(path, json={**body, field: value})
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert f"{top:,}" in r.text or str(top) in r.text, r.text
