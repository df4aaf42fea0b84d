"""The metric registry at the edges (issue 27 item 4): an estimate's gRPC message is filled from
the declarations by name (and stays in step with them and with the estimate's and cost's
fields), ``GET /api/metrics`` serves the declarations the planner page builds its table from,
a planner point carries every declared figure under its SI name, and ``plena-opt search``'s
text table shows E2E under load in the declaration's display unit (and not without a load)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re

import pytest
from plena_client import pb

from plena_opt import metrics
from plena_opt.api.wire import cost_from_proto, metrics_from_proto, metrics_to_proto
from plena_opt.cli.main import main
from plena_opt.metrics import METRICS

PLAN = {"tp": 8, "ep": 1, "dp": 1, "pp": 1, "cp": 1, "moe_tp_mode": "tp", "comm_overlap": "none"}
# PlanMetrics doubles that are the plan's breakdown, not a declared figure of it
BREAKDOWN = {"weight_bytes_per_device", "kv_cache_bytes_per_device", "decode_step_seconds"}
SEARCH = ["search", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
          "--input-seq", "1024", "--output-seq", "128", "--batch-sizes", "16", "--trials", "12",
          "--objectives", "ttft,tps-per-device", "--storage", ":memory:", "--quiet"]  # fmt: skip
LOAD = ["--concurrency", "16", "--engine", "vllm"]


def _registry_fields() -> set[str]:
    return {n for m in METRICS for n in (m.name, *m.interval_names)}


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.name)
def test_each_declared_metric_reaches_the_estimate_message_by_name(metric) -> None:
    d = {"plan": PLAN, metric.name: 1.25}
    d |= dict(zip(metric.interval_names, (0.5, 2.0), strict=False))
    msg = metrics_to_proto(d)
    assert getattr(msg, metric.name) == 1.25
    for end, want in zip(metric.interval_names, (0.5, 2.0), strict=False):
        assert msg.HasField(end) and getattr(msg, end) == want
    fields = pb.PlanMetrics.DESCRIPTOR.fields_by_name
    others = _registry_fields() - {metric.name, *metric.interval_names}
    assert not [n for n in others if fields[n].has_presence and msg.HasField(n)]  # None: unset


def test_an_estimate_travels_whole_and_its_figures_are_declared() -> None:
    from plena_opt import api
    from plena_opt.estimate.cost import COST_FIELDS
    from plena_opt.estimate.evaluator import PlanMetrics

    problem = api.load_problem(model="llama-3.1-8b", noc="hgx-h200x8", chip="h200-sxm",
                               output_seq=64)  # fmt: skip
    est = api.estimate_plan(problem, api.Plan(tp=8))
    msg = metrics_to_proto(est.metrics, est.cost)
    assert metrics_from_proto(msg) == est.metrics and cost_from_proto(msg) == est.cost
    carried = {**est.metrics.to_dict(), **est.cost.to_dict()}
    declared = [m.name for m in METRICS if carried.get(m.name) is not None]
    assert {"ttft_seconds", "tps", "energy_per_token_joules", "usd_per_million_output_tokens"} <= (
        set(declared)
    )
    for name in declared:
        assert getattr(msg, name) == carried[name], name
    # in step: every figure an estimate or its cost carries is a declared metric (or the plan's
    # breakdown), so the registry loop of metrics_to_proto drops none of them
    doubles = {
        n for n, f in pb.PlanMetrics.DESCRIPTOR.fields_by_name.items() if f.type == f.TYPE_DOUBLE
    }
    estimate_doubles = {f.name for f in dataclasses.fields(PlanMetrics)} & doubles
    assert estimate_doubles - BREAKDOWN <= _registry_fields()
    assert set(COST_FIELDS) - {"cost_note"} <= _registry_fields()


def test_the_web_app_serves_the_registry(monkeypatch) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    client = TestClient(create_app(storage=None), base_url="http://127.0.0.1")
    got = client.get("/api/metrics").json()
    assert [g["name"] for g in got] == [m.name for m in METRICS]
    for g, m in zip(got, METRICS, strict=True):
        assert g == {k: getattr(m, k) for k in g}
    e2e = next(g for g in got if g["name"] == "e2e_seconds")
    assert (e2e["label"], e2e["display_unit"], e2e["display_scale"]) == ("E2E", "ms", 1e3)
    changed = tuple(dataclasses.replace(m, description="patched " + m.name) for m in METRICS)
    monkeypatch.setattr(metrics, "METRICS", changed)
    assert {g["description"] for g in client.get("/api/metrics").json()} == {
        "patched " + m.name for m in METRICS
    }


def test_planner_points_carry_every_declared_figure() -> None:
    from types import SimpleNamespace

    from plena_opt.api.planner_figures import entry_figures, serving_figures

    names = _registry_fields()
    entry = SimpleNamespace(**{m.field: 2.0 for m in METRICS}, ttft_seconds_low=0.001)
    f = entry_figures(entry)  # type: ignore[arg-type]
    assert set(f) == names and f["ttft_seconds"] == 2.0 / 1e3 and f["e2e_seconds"] == 2.0
    assert f["ttft_seconds_low"] == 0.001 and f["tpot_seconds_high"] is None
    s = serving_figures({"ttft_seconds": 0.1, "tps_per_user": 50.0, "energy_j_per_token": 0.3})
    assert set(s) == names
    assert (s["ttft_seconds"], s["tps_per_sequence"], s["energy_per_token_joules"]) == (
        0.1, 50.0, 0.3
    )  # fmt: skip


def _cli(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


def test_the_search_table_shows_e2e_under_load_in_its_declared_unit() -> None:
    e2e = metrics.BY_NAME["e2e_seconds"]
    text = _cli([*SEARCH, *LOAD]).splitlines()
    doc = json.loads(_cli([*SEARCH, *LOAD, "--json"]))
    want = {e["key"]: e["e2e_seconds"] for e in doc["front"]}
    head = next(i for i, line in enumerate(text) if line.startswith("plan "))
    cells = [re.split(r"\s{2,}", line.strip()) for line in text[head:]]
    col = cells[0].index(e2e.heading)
    assert e2e.heading == "E2E ms" and cells[0][col - 1] == "TTFT ms"
    rows = [r for r in cells[2:] if r[-1] in want]
    assert rows and {r[-1] for r in rows} == set(want)
    for r in rows:  # the declared display unit: SI × 1e3, two decimals
        assert r[col] == f"{want[r[-1]] * e2e.display_scale:.2f}", r
    static = _cli(SEARCH)
    assert "TTFT ms" in static and "E2E ms" not in static
