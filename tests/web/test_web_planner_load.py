"""The planner searches under load (issue 28): with a workload and a ``percentile`` the page's
search is ``plena-opt search --concurrency/--request-rate --engine --percentile`` (the figures
under load, said so), the command reproduces it, ``serving both`` runs the comparison under the
same load with the CLI's verdict, and what the CLI refuses is 422 naming the field with the
CLI's message. Without a percentile nothing changes."""

from __future__ import annotations

import json
import shlex

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.cli.main import main  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402
from tests.web_support import planner_job_done  # noqa: E402

LOADED = {
    "model": "llama-3.1-8b",
    "chip": "h200-sxm",
    "noc": "hgx-h200x8",
    "input_seq": 1024,
    "output_seq": 256,
    "batch_sizes": "4,16,64",
    "trials": 40,
    "serving": "aggregated",
    "engine": "vllm",
    "concurrency": 16,
    "percentile": "p90",
}
CLI = ["search", "--model", "llama-3.1-8b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]
CLI += ["--input-seq", "1024", "--output-seq", "256", "--batch-sizes", "4,16,64"]
CLI += ["--trials", "40", "--objectives", "ttft,tps"]
CLI += ["--concurrency", "16", "--engine", "vllm", "--percentile", "p90"]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def _job(client, body: dict) -> dict:
    return planner_job_done(client, body)


@pytest.fixture(scope="module")
def done(client) -> dict:
    return _job(client, LOADED)


@pytest.fixture(scope="module")
def compared(client) -> dict:
    return _job(client, {**LOADED, "serving": "both"})


def _cli(argv: list[str], capsys) -> dict:
    assert main([*argv, "--json", "--quiet", "--storage", ":memory:"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_front_is_the_clis_search_under_load_at_p90(done, capsys) -> None:
    doc = _cli(CLI, capsys)
    want = [(e["label"], e["tps_per_device"], e["tps_per_sequence"], e["ttft_seconds"] * 1e3)
            for e in doc["front"]]  # fmt: skip
    pts = [p for p in done["answer"]["points"] if p["feasible"]]
    got = [(p["label"], p["tps_per_gpu"], p["tps_per_user"], p["ttft_ms"]) for p in pts]
    assert [g[0] for g in got] == [w[0] for w in want] and len(got) >= 1
    flat = [x for g in got for x in g[1:]]
    assert flat == pytest.approx([x for w in want for x in w[1:]])
    assert {p["mode"] for p in pts} == {"aggregated"}  # --serving aggregated: no comparison
    # the figures are the under-load ones at p90, labelled so (not the static batch's)
    assert all(p["basis"] == "under load (16 clients, vllm, SLA at p90; steady state)" for p in pts)
    static = [e["static_ttft_seconds"] * 1e3 for e in doc["front"]]
    assert [p["ttft_ms"] for p in pts] != pytest.approx(static)
    s = done["answer"]["summary"]
    assert s["under_load"]["percentile"] == "p90" and s["under_load"]["concurrency"] == 16
    assert s["verdict"] is None and "aggregated plans only" in done["note"]


def test_serving_both_compares_the_modes_under_the_same_load_as_the_cli(compared, capsys) -> None:
    doc = _cli([*CLI, "--serving", "both"], capsys)
    cmp = doc["serving"]["comparison"]
    assert cmp["verdict"] and compared["answer"]["summary"]["verdict"] == cmp["verdict"]
    assert cmp["figures_basis"] == "under load (engine vllm 0.34.0, concurrency 16, p90)"
    pts = [p for p in compared["answer"]["points"] if p["feasible"]]
    assert {p["mode"] for p in pts} == {"aggregated", "disaggregated"}
    assert all(p["basis"] == cmp["figures_basis"] for p in pts)
    want = sorted(e["label"] for m in ("aggregated", "disaggregated") for e in cmp[m]["front"])
    assert sorted(p["label"] for p in pts) == want
    assert "the serving comparison priced under the same load" in compared["note"]
    assert "--serving both" in compared["command"]


def test_the_command_shows_the_load_flags_and_reproduces_it(done, capsys) -> None:
    cmd = done["command"]
    assert "--concurrency 16 --engine vllm --percentile p90" in cmd
    assert "--serving aggregated" in cmd
    doc = _cli(shlex.split(cmd)[1:], capsys)
    labels = [p["label"] for p in done["answer"]["points"] if p["feasible"]]
    assert [e["label"] for e in doc["front"]] == labels
    assert doc["under_load"]["percentile"] == "p90"


def test_a_request_rate_reaches_the_search_and_the_command(client) -> None:
    from plena_opt.api.planner import planner_search

    body = {k: v for k, v in LOADED.items() if k != "concurrency"} | {"request_rate": 2.0}
    ps = planner_search(body)
    assert ps.request.under_load and ps.request.request_rate == 2.0
    assert ps.request.percentile == "p90" and ps.request.serving == "aggregated"
    assert "--request-rate 2.0 --engine vllm --percentile p90" in ps.command
    assert "2 requests/s" in (ps.note or "")


def test_without_a_percentile_the_workload_prices_only_the_plan_view() -> None:
    from plena_opt.api.planner import planner_search

    body = {k: v for k, v in LOADED.items() if k != "percentile"} | {"serving": "both"}
    ps = planner_search(body)
    assert not ps.request.under_load and ps.request.serving == "both" and ps.note is None
    assert "--concurrency" not in ps.command and "--percentile" not in ps.command


def _refused(r, field: str) -> str:
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    return r.json()["detail"][0]["msg"]


def test_what_the_cli_refuses_under_load_is_422_naming_the_field(client, capsys) -> None:
    # both workloads: SearchRequest's rule
    both = {**LOADED, "request_rate": 1.0}
    assert "not both" in _refused(client.post("/api/planner/jobs", json=both), "request_rate")
    # a PLENA chip has no engine to schedule it: refused before the job starts
    plena = {**LOADED, "chip": "plena-default", "noc": "single_device", "batch_sizes": "4",
             "serving": "both"}  # fmt: skip
    r = client.post("/api/planner/jobs", json=plena)
    assert "needs a GPU --chip" in _refused(r, "engine")


def test_a_percentile_without_a_workload_and_a_bad_one_are_422(client) -> None:
    body = {k: v for k, v in LOADED.items() if k != "concurrency"}
    msg = _refused(client.post("/api/planner/jobs", json=body), "percentile")
    assert "--percentile p90" in msg and "--concurrency or --request-rate" in msg
    r = client.post("/api/planner/jobs", json={**LOADED, "percentile": "p95"})
    assert r.status_code == 422 and "percentile" in r.text
