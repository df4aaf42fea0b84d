"""Typed messages of the gRPC API: estimates, simulation figures and model descriptions carry
the same numbers as the (deprecated) JSON-in-string fields, exactly."""

from __future__ import annotations

import json

import pytest
from plena_client import PlenaClient, pb, system_spec


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from plena_server.app import start_server

    store = tmp_path_factory.mktemp("typed") / "s.log"
    running = start_server("127.0.0.1", 0, str(store), workers=2)
    try:
        with PlenaClient(f"127.0.0.1:{running.port}") as c:
            yield c
    finally:
        running.drain(1.0)


def test_distributed_estimate_is_typed(client):
    system = system_spec("gpt-oss-20b", "illustrative_gpu_node_8", pb.ProfileSource(
        fixed_bandwidth=pb.FixedBandwidthMemory(bandwidth_gbytes_per_s=1000)))  # fmt: skip
    reply = client.estimate(system, pb.Plan(tp=2, ep=4), pb.Workload(routing="random"))
    doc, est = json.loads(reply.estimate_json), reply.estimate
    assert reply.mode == "distributed"
    for name in ("ttft_seconds", "tps", "tps_per_sequence", "decode_seconds", "micro_batch",
                 "weight_bytes_per_device", "kv_cache_bytes_per_device", "batch_size"):  # fmt: skip
        assert getattr(est, name) == doc[name], name
    assert est.routing == "random" and est.plan.ep == 4 and est.noc_name == doc["noc"]["name"]
    assert est.HasField("fits_in_memory") is False  # fixed bandwidth without capacity: unknown
    for typed, ref in ((est.prefill, doc["prefill"]), (est.first_token_decode,
                                                      doc["first_token_decode"])):  # fmt: skip
        assert [s.seconds for s in typed.stages] == [s["seconds"] for s in ref["stages"]]
        assert typed.period_seconds == ref["period_seconds"]
        comm = [{c.name: c.value for c in s.comm_seconds} for s in typed.stages]
        assert comm == [s["comm_seconds"] for s in ref["stages"]]
    assert est.ttft_seconds == reply.metrics.ttft_seconds


def test_single_chip_estimate_is_typed(client):
    system = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b"))
    reply = client.estimate(system, pb.Plan(), pb.Workload(batch_size=4, output_seq_len=16))
    doc, est = json.loads(reply.estimate_json), reply.estimate
    assert reply.mode == "single_chip" and not reply.HasField("metrics")
    assert est.model_name == "llama-3.1-8b" and not est.HasField("plan")
    assert est.ttft_seconds == doc["ttft_seconds"] and est.tps == doc["tps"]
    assert est.weight_bytes_per_device == doc["weight_footprint_bytes"]
    assert est.memory_capacity_bytes == doc["memory_capacity_bytes"]


def test_serving_simulation_is_typed(client):
    req = pb.SimulateRequest(
        inference=pb.InferenceTarget(
            system=system_spec("llama-3.1-8b", "illustrative_gpu_node_8"),
            plan=pb.Plan(tp=2, pp=4),
            workload=pb.Workload(output_seq_len=32),
            max_window_steps=8,
        ),
        samples=0,
    )
    reply = client.simulate(req)
    doc, s = json.loads(reply.result_json), reply.serving
    assert s.analytic_ttft_seconds == doc["analytic"]["ttft_seconds"]
    assert s.analytic_tps == doc["analytic"]["tps"]
    assert s.isolated_ttft_seconds == doc["simulated"]["isolated_ttft_seconds"]
    assert s.steady_decode_tps == doc["simulated"]["steady_decode_tps"]
    assert list(s.window_ttft_seconds) == doc["simulated"]["window_ttft_seconds"]
    assert list(s.causes) == doc["causes"]


def test_models_are_described_by_typed_fields(client):
    for info in client.list_models():
        doc = json.loads(info.describe_json)
        d = info.description
        assert (d.name, d.layers, d.hidden_size, d.num_experts) == (
            doc["name"], doc["layers"], doc["hidden_size"], doc["num_experts"])  # fmt: skip


def test_profiles_are_described_by_typed_fields(client):
    seen = set()
    for info in client.list_profiles():
        doc = json.loads(info.describe_json)
        which = info.WhichOneof("description")
        seen.add(which)
        if which == "noc":
            d = info.noc
            assert (d.name, d.num_devices) == (doc["name"], doc["num_devices"])
            assert [lv.link_bandwidth_gbytes_per_s for lv in d.levels] == [
                lv["link_bandwidth_gbytes_per_s"] for lv in doc["layers"]
            ]
            assert [list(lv.shape) for lv in d.levels] == [lv["shape"] for lv in doc["layers"]]
            assert dict(d.energy_pj_per_bit) == (doc.get("energy_pj_per_bit") or {})
        elif which == "memory":
            d = info.memory
            assert d.usable_bandwidth_bytes_per_s == doc["usable_bandwidth_bytes_per_s"]
            assert d.HasField("capacity_bytes") == (doc["capacity_bytes"] is not None)
            assert d.kind == doc["kind"]
        else:
            assert which == "chip" and info.chip.name == doc["name"]
    assert seen == {"noc", "memory", "chip"}
