"""The metric registry (``plena_opt.metrics``, issue 27 item 4) and the intervals it carries to
the edge (issue 30 item 4): every declared metric has its proto and front-entry fields (a
declaration without them fails here, shown on a made-up metric); the objectives, the CSV columns
and the gRPC front read the declarations; ``--csv`` and gRPC carry the ``*_low``/``*_high`` that
``--json`` has."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest
from plena_client import PlenaClient, pb

from plena_opt.cli.main import main
from plena_opt.metrics import INTERVAL_BASIS, METRICS, Metric, columns, interval_fields
from plena_opt.search.result import FrontEntry

SEARCH = ["search", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
          "--input-seq", "2048", "--output-seq", "256", "--batch-sizes", "32", "--trials", "40",
          "--objectives", "ttft,tps-per-device", "--concurrency", "32", "--engine", "vllm",
          "--max-ttft-ms", "500", "--quiet"]  # fmt: skip
# PlanMetrics fields every summary has (plain doubles); every other metric is an optional field
REQUIRED = {"ttft_seconds", "tps", "tps_per_sequence"}


def missing_fields(metrics: tuple[Metric, ...]) -> list[str]:
    """Where a declaration has no field: ``PlanMetrics.<name>`` (optional unless required, and
    its ``_low``/``_high``), ``FrontEntry.<field>`` and the interval ends on a front entry and a
    ``Recommendation``."""
    proto = pb.PlanMetrics.DESCRIPTOR.fields_by_name
    rec = pb.Recommendation.DESCRIPTOR.fields_by_name
    entry = {*FrontEntry.model_fields, *FrontEntry.model_computed_fields}
    out = []
    for m in metrics:
        f = proto.get(m.name)
        if f is None or (m.name not in REQUIRED and not f.has_presence):
            out.append(f"PlanMetrics.{m.name}")
        if m.field not in entry:
            out.append(f"FrontEntry.{m.field}")
        for end in m.interval_names:
            out += [f"PlanMetrics.{end}"] * (end not in proto or not proto[end].has_presence)
            out += [f"FrontEntry.{end}"] * (end not in entry)
            out += [f"Recommendation.{end}"] * (end not in rec)
    return out


def test_every_declared_metric_has_its_proto_and_front_entry_fields() -> None:
    assert missing_fields(METRICS) == []
    for name in INTERVAL_BASIS:
        assert name in pb.PlanMetrics.DESCRIPTOR.fields_by_name
        assert name in pb.Recommendation.DESCRIPTOR.fields_by_name
        assert name in FrontEntry.model_fields


def test_a_declaration_without_its_fields_fails_loudly() -> None:
    made_up = Metric("made_up_seconds", "s", "minimize", "nothing", interval=True)
    assert missing_fields((*METRICS, made_up)) == [
        "PlanMetrics.made_up_seconds",
        "FrontEntry.made_up_seconds",
        *(f"{where}.made_up_seconds_{end}"
          for end in ("low", "high") for where in ("PlanMetrics", "FrontEntry", "Recommendation")),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="direction"):
        Metric("x", "s", "smaller", "bad direction")


def test_the_objectives_are_the_declared_metrics() -> None:
    from types import SimpleNamespace

    from plena_opt.search.space.objectives import OBJECTIVES

    declared = [m for m in METRICS if m.objective]
    assert {m.objective for m in declared} | {"tps-per-user"} == set(OBJECTIVES)
    figures = SimpleNamespace(**{m.name: 0.25 for m in METRICS})
    for m in declared:
        o = OBJECTIVES[str(m.objective)]
        assert (o.name, o.direction, o.unit) == (m.field, m.direction, m.field_unit)
        assert o.value(figures) == 0.25 * m.scale  # the study keeps TTFT in ms
    assert OBJECTIVES["ttft"].value(figures) == 250.0


def _run(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


def test_csv_carries_the_intervals_json_has_and_the_study_its_units(tmp_path) -> None:
    import optuna

    store, path = tmp_path / "s.log", tmp_path / "front.csv"
    doc = json.loads(_run([*SEARCH, "--storage", str(store), "--csv", str(path), "--json"]))
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert set(columns()) <= set(reader.fieldnames or ())
    assert len(rows) == len(doc["front"]) > 0
    for row, entry in zip(rows, doc["front"], strict=True):
        assert row["interval_group"] == entry["interval_group"] == "vllm|h100-sxm|9-32"
        for m in METRICS:
            if not m.interval:
                continue
            low, value, high = (float(row[n]) for n in (f"{m.name}_low", m.name, f"{m.name}_high"))
            assert (low, high) == (entry[f"{m.name}_low"], entry[f"{m.name}_high"])
            assert low < value < high, m.name
        load = entry["under_load"]  # E2E: TTFT + (output − 1)·TPOT of the steady state's means
        assert float(row["e2e_seconds"]) == entry["e2e_seconds"] == load["e2e_mean_seconds"]
        assert entry["e2e_seconds"] == pytest.approx(
            load["ttft_mean_seconds"] + 255 * load["tpot_mean_seconds"], rel=1e-12
        )
    study = optuna.load_study(study_name=doc["study_name"], storage=_journal(store))
    assert study.user_attrs["objective_units"] == {"ttft_ms": "ms", "tps_per_device": "tokens/s"}


def test_a_static_search_has_no_e2e_latency(tmp_path) -> None:
    at = SEARCH.index("--concurrency")
    static = SEARCH[:at] + SEARCH[at + 4 :]  # without --concurrency 32 --engine vllm
    assert "--engine" not in static and "--batch-sizes" in static
    path = tmp_path / "front.csv"
    doc = json.loads(_run([*static, "--storage", str(tmp_path / "s.log"), "--csv", str(path),
                           "--json"]))  # fmt: skip
    assert doc["front"] and all(e["e2e_seconds"] is None for e in doc["front"])
    with open(path, newline="") as f:
        assert all(row["e2e_seconds"] == "" for row in csv.DictReader(f))


def _journal(path):
    from plena_opt.api.studies import open_store

    return open_store(str(path))


def test_the_grpc_front_and_recommendation_carry_the_intervals(server) -> None:
    req = pb.SearchRequest(
        system=pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b")),
        workload=pb.Workload(batch_size=32, input_seq_len=2048, output_seq_len=256),
        load=pb.ServingLoad(concurrency=32, engine="vllm"),
    )
    req.system.noc.name, req.system.chip.name = "hgx-h100x8", "h100-sxm"
    req.options.trials, req.options.study_name = 40, "metric-intervals"
    with PlenaClient(server) as client:
        reply = client.search(req)
    front = json.loads(reply.result_json)["front"]
    assert reply.front and len(reply.front) == len(front)
    for msg, entry in zip(reply.front, front, strict=True):
        assert msg.interval_group == "vllm|h100-sxm|9-32" and msg.interval_level == 0.9
        for name in interval_fields():
            assert msg.HasField(name) and getattr(msg, name) == entry[name], name
        assert msg.ttft_seconds_low < msg.ttft_seconds < msg.ttft_seconds_high
        assert msg.tpot_seconds == pytest.approx(1 / msg.tps_per_sequence)
        assert msg.e2e_seconds == entry["e2e_seconds"] == entry["under_load"]["e2e_mean_seconds"]
    rec = reply.recommendation
    picked = next(e for e in front if e["label"] == rec.label)
    for name in interval_fields():
        assert rec.HasField(name) and getattr(rec, name) == picked[name], name


def test_the_grpc_estimate_under_load_carries_the_interval_ends_json_has(server) -> None:
    from plena_opt import api
    from plena_opt.estimate.plan import Plan

    system = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b"))
    system.noc.name, system.chip.name = "hgx-h100x8", "h100-sxm"
    workload = pb.Workload(input_seq_len=1024, output_seq_len=128)
    with PlenaClient(server) as client:
        reply = client.estimate(system, pb.Plan(tp=8), workload,
                                load=pb.ServingLoad(concurrency=32, engine="vllm"))  # fmt: skip
    problem = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                               input_seq=1024, output_seq=128)  # fmt: skip
    bars = api.serve_under_load(problem, Plan(tp=8), "vllm", concurrency=32).error_bars()
    assert bars is not None
    band = reply.under_load.error_band
    for name in ("ttft_mean_seconds_low", "ttft_mean_seconds_high", "tpot_mean_seconds_low",
                 "tpot_mean_seconds_high"):  # fmt: skip
        assert getattr(band, name) == bars[name], name
    assert band.ttft_mean_seconds_low < band.ttft_mean_seconds_high
