"""The planner carries every serving option of ``estimate``/``search`` (issue 23, item 4): the
engine version, the lengths' range ratio, MoE routing, the KV cache format, EPLB's redundant
experts and speculative decoding. Each one prices the plan view as ``plena-opt estimate`` with
the same flag prices that plan (and changes it from the default: the test can fail), a search
under load with them is the CLI's search (its command reproduces it), and a bad value is 422
naming the field with the CLI's message."""

from __future__ import annotations

import json
import shlex

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.cli.main import main  # noqa: E402
from plena_opt.web.app import create_app  # noqa: E402
from tests.web_support import planner_job_done  # noqa: E402

# an MoE model on two GPUs: routing and EPLB move its expert-parallel plans
BASE = {"model": "qwen3-30b-a3b", "chip": "h200-sxm", "noc": "hgx-h200x8", "devices": 2,
        "input_seq": 1024, "output_seq": 256, "batch_sizes": "16", "trials": 8,
        "serving": "aggregated", "engine": "vllm", "concurrency": 16}  # fmt: skip
CLI = ["--model", "qwen3-30b-a3b", "--chip", "h200-sxm", "--noc", "hgx-h200x8", "--devices", "2",
       "--input-seq", "1024", "--output-seq", "256", "--engine", "vllm"]  # fmt: skip
# field, value, the estimate flags of the same value
OPTIONS = [
    ("range_ratio", 0.5, ["--range-ratio", "0.5"]),
    ("routing", "power_law", ["--routing", "power_law"]),
    ("kv_precision", "fp8", ["--kv-precision", "fp8"]),
    ("eplb_redundant", 2, ["--eplb-redundant", "2"]),
    ("speculative", 2, ["--speculative", "2"]),
    ("speculative_method", "mtp", ["--speculative", "1", "--speculative-method", "mtp"]),
    ("acceptance", [0.9, 0.8], ["--speculative", "2", "--acceptance", "0.9,0.8"]),
    ("engine_version", "0.34.0", ["--engine-version", "0.34.0"]),
]
# what a field needs besides itself (the speculative setting's method and rates need its K)
WITH = {"speculative_method": {"speculative": 1}, "acceptance": {"speculative": 2}}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def _done(client: TestClient, body: dict) -> dict:
    return planner_job_done(client, body)


def _pool(client: TestClient, body: dict) -> tuple[str, dict]:
    """The plan view of the job's first expert-parallel plan (its key, its pool)."""
    job = _done(client, body)
    keys = [p["key"] for p in job["answer"]["points"]]
    key = next(k for k in keys if "-ep2-" in k)
    r = client.get(f"/api/planner/jobs/{job['id']}/plan", params={"key": key})
    assert r.status_code == 200, r.text
    return key, r.json()["pools"][0]


def _estimate(key: str, flags: list[str], capsys) -> dict:
    tp, ep, dp, pp, cp, mode, overlap, batch = key.split("-")
    plan = ["--tp", tp[2:], "--ep", ep[2:], "--dp", dp[2:], "--pp", pp[2:], "--cp", cp[2:],
            "--moe-tp-mode", mode, "--comm-overlap", overlap,
            "--batch-size", batch[1:]]  # fmt: skip
    assert main(["estimate", *CLI, *plan, "--concurrency", "16", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _figures(pool: dict) -> list[float]:
    """The plan view's numbers (ms, bytes): static TTFT, TPOT, KV; means under load; the
    speculative TPOT (0 without)."""
    u = pool["under_load"]
    spec = (u.get("speculative") or {}).get("tpot_with_ms", 0.0)
    return [pool["ttft_ms"], pool["tpot_ms"], pool["kv_bytes"], u["ttft_ms"]["mean"],
            u["tpot_ms"]["mean"], u["tpot_ms"]["p99"], spec]  # fmt: skip


def _cli_figures(doc: dict) -> list[float]:
    """The same numbers of ``estimate --json`` (seconds → ms)."""
    replay = doc["serving_under_load"]["replay"]
    spec = (doc.get("speculative") or {}).get("tpot_with", 0.0) * 1e3
    return [doc["ttft_seconds"] * 1e3, doc["first_token_decode"]["period_seconds"] * 1e3,
            doc["kv_cache_bytes_per_device"], replay["ttft_seconds"]["mean"] * 1e3,
            replay["tpot_seconds"]["mean"] * 1e3, replay["tpot_seconds"]["p99"] * 1e3,
            spec]  # fmt: skip


@pytest.fixture(scope="module")
def default(client) -> tuple[str, dict]:
    return _pool(client, BASE)


@pytest.mark.parametrize(("field", "value", "flags"), OPTIONS, ids=[o[0] for o in OPTIONS])
def test_the_plan_view_is_the_clis_estimate_with_the_same_flag(
    client, default, field, value, flags, capsys
) -> None:
    key, pool = _pool(client, {**BASE, **WITH.get(field, {}), field: value})
    got, want = _figures(pool), _cli_figures(_estimate(key, flags, capsys))
    assert got == pytest.approx(want, rel=1e-9)
    assert key == default[0]
    if field == "engine_version":  # one version is modelled per engine: the default's numbers
        assert pool["under_load"]["engine_version"] == "0.34.0"
        assert got == pytest.approx(_figures(default[1]), rel=1e-12)
        return
    assert got != pytest.approx(_figures(default[1]), rel=1e-6)  # the option moves the plan
    if field == "range_ratio":
        assert pool["under_load"]["range_ratio"] == 0.5
    if field in ("speculative", "speculative_method", "acceptance"):
        spec = pool["under_load"]["speculative"]
        cli = _estimate(key, flags, capsys)["speculative"]
        assert spec["method"] == cli["method"] and spec["acceptance"] == cli["acceptance"]
        assert spec["pays"] == cli["pays"] and spec["k"] == cli["k"] == int(flags[1])


def test_a_search_under_load_with_the_options_is_the_clis_search(client, capsys) -> None:
    opts = {"range_ratio": 0.5, "routing": "power_law", "kv_precision": "fp8",
            "eplb_redundant": 2, "engine_version": "0.34.0", "percentile": "p90"}  # fmt: skip
    job = _done(client, {**BASE, **opts})
    cmd = job["command"]
    for flag in ("--routing power_law", "--kv-precision fp8", "--eplb-redundant 2",
                 "--engine-version 0.34.0", "--range-ratio 0.5"):  # fmt: skip
        assert flag in cmd, cmd
    argv = [*shlex.split(cmd)[1:], "--json", "--quiet", "--storage", ":memory:"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["under_load"]["range_ratio"] == 0.5
    pts = [p for p in job["answer"]["points"] if p["feasible"]]
    got = [(p["label"], p["ttft_ms"], p["tps_per_user"], p["tps_per_gpu"]) for p in pts]
    want = [(e["label"], e["ttft_seconds"] * 1e3, e["tps_per_sequence"], e["tps_per_device"])
            for e in doc["front"]]  # fmt: skip
    assert [g[0] for g in got] == [w[0] for w in want] and got
    assert [x for g in got for x in g[1:]] == pytest.approx([x for w in want for x in w[1:]])
    plain = _done(client, {**BASE, "percentile": "p90"})  # without the options: other figures
    other = [(p["label"], p["ttft_ms"], p["tps_per_user"], p["tps_per_gpu"])
             for p in plain["answer"]["points"] if p["feasible"]]  # fmt: skip
    assert [x for g in got for x in g[1:]] != pytest.approx([x for g in other for x in g[1:]])


# the analytic model's knobs price PLENA chips (a GPU chip's pricing reads none of them)
ON_PLENA = {"model": "llama-3.1-8b", "chip": "plena-default", "noc": "single_device",
            "input_seq": 1024, "output_seq": 256, "batch_sizes": "4", "trials": 4,
            "serving": "aggregated"}  # fmt: skip
PLENA_OPTIONS = [
    ("include_lm_head", True, ["--include-lm-head"]),
    ("overlap", "serial", ["--overlap", "serial"]),
    ("frequency_hz", 2e9, ["--frequency-hz", "2000000000.0"]),
]


def _static(client: TestClient, body: dict) -> tuple[str, list[float], dict]:
    job = _done(client, body)
    key = job["answer"]["points"][0]["key"]
    r = client.get(f"/api/planner/jobs/{job['id']}/plan", params={"key": key})
    assert r.status_code == 200, r.text
    p = r.json()["pools"][0]
    return key, [p["ttft_ms"], p["tpot_ms"], p["kv_bytes"], p["weight_bytes"]], job


@pytest.mark.parametrize(
    ("field", "value", "flags"), PLENA_OPTIONS, ids=[o[0] for o in PLENA_OPTIONS]
)
def test_the_analytic_knobs_price_the_plan_view_as_the_cli(client, field, value, flags, capsys):
    key, got, job = _static(client, {**ON_PLENA, field: value})
    tp, ep, dp, pp, cp, mode, overlap, batch = key.split("-")
    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "plena-default", "--noc",
            "single_device", "--input-seq", "1024", "--output-seq", "256", "--tp", tp[2:],
            "--pp", pp[2:], "--comm-overlap", overlap, "--batch-size", batch[1:]]  # fmt: skip
    assert main([*argv, *flags, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    want = [doc["ttft_seconds"] * 1e3, doc["first_token_decode"]["period_seconds"] * 1e3,
            doc["kv_cache_bytes_per_device"], doc["weight_bytes_per_device"]]  # fmt: skip
    assert got == pytest.approx(want, rel=1e-9)
    assert got != pytest.approx(_static(client, ON_PLENA)[1], rel=1e-6)
    assert " ".join(flags) in job["command"]  # the search's command carries the flag
    again = [*shlex.split(job["command"])[1:], "--json", "--quiet", "--storage", ":memory:"]
    assert main(again) == 0
    front = json.loads(capsys.readouterr().out)["front"]
    mine = [p for p in job["answer"]["points"] if p["feasible"]]
    assert [e["label"] for e in front] == [p["label"] for p in mine]
    assert [e["ttft_seconds"] * 1e3 for e in front] == pytest.approx([p["ttft_ms"] for p in mine])


PLENA = {"chip": "plena-default", "noc": "single_device", "devices": None}
REFUSED = [
    ({"range_ratio": 1.0}, "range_ratio", "--range-ratio must be at least 0 and below 1"),
    ({"range_ratio": -0.1}, "range_ratio", "--range-ratio must be at least 0 and below 1"),
    ({"range_ratio": 0.2, "concurrency": None}, "range_ratio", "give --concurrency or"),
    ({"engine_version": "0.1.0"}, "engine_version", "modelled for version 0.34.0 only"),
    ({"engine_version": "v" * 1000}, "engine_version", "at most"),
    ({"engine_version": "0.34.0", **PLENA}, "engine", "needs a GPU --chip"),
    ({"speculative": 9}, "speculative", "must be 1..8"),
    ({"speculative": 0}, "speculative", "must be 1..8"),
    ({"speculative": 2, "concurrency": None}, "speculative", "give --concurrency or"),
    ({"speculative_method": "mtp"}, "speculative", "--speculative-method needs --speculative K"),
    ({"speculative": 2, "speculative_method": "medusa"}, "speculative_method", "must be one of"),
    ({"speculative": 2, "speculative_method": "ngram"}, "acceptance", "give --acceptance"),
    ({"speculative": 2, "acceptance": [0.5]}, "acceptance", "one rate per draft token"),
    ({"speculative": 2, "acceptance": [1.5, 0.5]}, "acceptance", "must be in (0, 1]"),
    ({"speculative": 8, "acceptance": [0.5] * 9}, "acceptance", "at most 8"),
    ({"routing": "/etc/passwd"}, "routing", "--routing must be one of balanced"),
    ({"routing": "skewed"}, "routing", "--routing must be one of balanced"),
    ({"routing": "deepseek_v3"}, "routing", "is not available"),
    ({"kv_precision": "fp3"}, "kv_precision", "fp3"),
    ({"kv_precision": "../kv.json"}, "kv_precision", "not a path"),
    ({"eplb_redundant": -1}, "eplb_redundant", "greater than or equal to 0"),
    ({"eplb_redundant": 70_000}, "eplb_redundant", "less than or equal to 65536"),
    ({"overlap": "parallel"}, "overlap", "'stage-roofline' or 'serial'"),
    ({"frequency_hz": 1e16}, "frequency_hz", "between 1 and 1e+15"),
    ({"frequency_hz": 0.0}, "frequency_hz", "greater than 0"),
    ({"include_lm_head": "maybe"}, "include_lm_head", "valid boolean"),
    ({"speculative_tokens": 2}, "speculative_tokens", "Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("change", "field", "words"), REFUSED)
def test_a_bad_option_is_422_naming_the_field(client, change, field, words) -> None:
    body = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    r = client.post("/api/planner/jobs", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    assert words in r.text, r.text


def test_the_catalog_offers_the_options_choices(client) -> None:
    c = client.get("/api/planner/catalog").json()
    assert c["engine_versions"] == {"vllm": "0.34.0", "sglang": "0.5.23", "trtllm": "00209af1"}
    assert "power_law" in c["routings"] and "balanced" in c["routings"]
    assert c["speculative_methods"] == ["mtp", "eagle", "ngram"]


def test_a_changed_knob_keeps_the_jobs_options(client, capsys) -> None:
    job = _done(client, {**BASE, "range_ratio": 0.5, "speculative": 2})
    key = next(p["key"] for p in job["answer"]["points"] if "-ep2-" in p["key"])
    body = {"key": key, "concurrency": 8}
    r = client.post(f"/api/planner/jobs/{job['id']}/reestimate", json=body)
    assert r.status_code == 200, r.text
    pool = r.json()["detail"]["pools"][0]
    u = pool["under_load"]
    assert u["concurrency"] == 8 and u["range_ratio"] == 0.5 and u["speculative"]["k"] == 2
    flags = ["--range-ratio", "0.5", "--speculative", "2", "--concurrency", "8"]  # last wins
    assert _figures(pool) == pytest.approx(_cli_figures(_estimate(key, flags, capsys)), rel=1e-9)
    at16 = _cli_figures(_estimate(key, flags[:-2], capsys))
    assert _figures(pool) != pytest.approx(at16, rel=1e-6)
