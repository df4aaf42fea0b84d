"""One set of request bounds for every front end (issue 29): every field of every HTTP request
model and every gRPC request message has a bound, and the MoE noise expert count, which had none,
is refused by both (gRPC RESOURCE_EXHAUSTED, HTTP 422 naming the field)."""

from __future__ import annotations

import re
import types
import typing

import grpc
import pytest
from annotated_types import Le, Lt, MaxLen
from google.protobuf.descriptor import FieldDescriptor
from plena_client import PlenaClient, PlenaRpcError, pb
from pydantic import BaseModel

from plena_opt.api import limits
from plena_opt.api.request_bounds import PROTO_BOUNDS

# HTTP request fields bounded elsewhere than in their pydantic Field, each with the reason.
HTTP_UNBOUNDED = {
    "SimulateIn.noise": "a text ≤ MAX_NOISE_CHARS (validator) or a document parsed into the "
    "library NoiseSpec and then bounded by limits.check_noise; the body ≤ MAX_BODY_BYTES",
    "TraceIn.noise": "as SimulateIn.noise",
}


def _request_messages() -> list:
    out, todo = {}, [m.input_type for m in pb.DESCRIPTOR.services_by_name["PlenaOpt"].methods]
    while todo:
        m = todo.pop()
        if m.full_name in out:
            continue
        out[m.full_name] = m
        for f in m.fields:
            if f.type == FieldDescriptor.TYPE_MESSAGE and not f.message_type.GetOptions().map_entry:
                todo.append(f.message_type)
    return list(out.values())


def _proto_leaf_fields() -> set[str]:
    return {
        f"{m.name}.{f.name}"
        for m in _request_messages()
        for f in m.fields
        if f.type != FieldDescriptor.TYPE_MESSAGE or f.message_type.GetOptions().map_entry
    }


def test_every_proto_request_field_has_a_bound():
    fields = _proto_leaf_fields()
    assert "MoeImbalanceNoise.experts" in fields and "SimulateRequest.samples" in fields
    assert sorted(fields - set(PROTO_BOUNDS)) == []  # a new field needs its bound written down
    assert sorted(set(PROTO_BOUNDS) - fields) == []  # and a removed one its entry removed


def test_every_constant_a_proto_bound_names_exists():
    for field, rule in PROTO_BOUNDS.items():
        for name in re.findall(r"\bMAX_[A-Z_]+\b", rule):
            if name in ("MAX_WORKLOAD", "MAX_DURATION"):
                continue  # estimate.plan.MAX_WORKLOAD, simulator.engine.MAX_DURATION
            assert isinstance(getattr(limits, name, None), int | float), (field, name)


def _is_literal_or_bool(tp: object) -> bool:
    return tp is bool or typing.get_origin(tp) is typing.Literal


def _unbounded(model: type[BaseModel], seen: set[str]) -> list[str]:
    out: list[str] = []
    for name, info in model.model_fields.items():
        key = f"{model.__name__}.{name}"
        tp = info.annotation
        args = typing.get_args(tp)
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = tuple(a for a in args if a is not type(None))
            tp = args[0] if len(args) == 1 else tp
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ not in seen:
                seen.add(tp.__name__)
                out += _unbounded(tp, seen)
            continue
        if _is_literal_or_bool(tp) or key in HTTP_UNBOUNDED:
            continue
        meta = info.metadata
        if tp in (int, float):
            ok = any(isinstance(m, Le | Lt) for m in meta)
        else:  # str, dict, list
            ok = any(isinstance(m, MaxLen) for m in meta)
        if not ok:
            out.append(key)
    return out


def test_every_http_request_field_has_a_bound():
    from plena_opt.web import schemas

    models = [
        v
        for v in vars(schemas).values()
        if isinstance(v, type) and issubclass(v, BaseModel) and v.__name__.endswith("In")
    ]
    assert {"SimulateIn", "TraceIn", "EstimateIn", "ServingIn", "TrainingIn"} <= {
        m.__name__ for m in models
    }
    seen: set[str] = set()
    assert [f for m in models for f in _unbounded(m, seen)] == []


def test_the_walk_finds_an_unbounded_field():
    from pydantic import Field

    class ProbeIn(BaseModel):
        ok: int = Field(1, le=3)
        n: int = 1
        name: str = "x"

    assert _unbounded(ProbeIn, set()) == ["ProbeIn.n", "ProbeIn.name"]


HUGE_MOE = {"experts": 1 << 40, "tokens": 64, "top_k": 1, "ep": 1}


@pytest.mark.parametrize("path", ["/api/simulate", "/api/trace"])
@pytest.mark.parametrize(
    ("moe", "field"),
    [
        (HUGE_MOE, "noise.moe.experts"),
        ({"experts": limits.MAX_MOE_EXPERTS + 1, "tokens": 64}, "noise.moe.experts"),
        ({"experts": 8, "tokens": limits.MAX_MOE_TOKENS + 1}, "noise.moe.tokens"),
        ({"experts": 8, "tokens": 8, "alpha": 1e300}, "noise.moe.alpha"),
    ],
)
def test_web_refuses_moe_noise_above_the_bound(path, moe, field):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    client = TestClient(create_app(storage=None), base_url="http://127.0.0.1")
    body = {"mode": "training", "samples": 10, "noise": {"moe": moe}}
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_web_accepts_moe_noise_at_the_bound():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    client = TestClient(create_app(storage=None), base_url="http://127.0.0.1")
    moe = {"experts": limits.MAX_MOE_EXPERTS, "tokens": 64, "top_k": 2, "ep": 4}
    body = {"mode": "training", "samples": 4, "noise": {"moe": moe}}
    r = client.post("/api/simulate", json=body)
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def grpc_client(tmp_path_factory):
    from plena_server.app import start_server

    store = tmp_path_factory.mktemp("bounds") / "s.log"
    running = start_server("127.0.0.1", 0, str(store), workers=2)
    try:
        with PlenaClient(f"127.0.0.1:{running.port}") as c:
            yield c
    finally:
        running.server.stop(0)


def _grpc_training(moe: pb.MoeImbalanceNoise) -> pb.SimulateRequest:
    training = pb.TrainingSchedule(schedule="1f1b", pp_size=2, microbatches=4)
    training.base_ms.update({"F": 1.0, "B": 2.0})
    noise = pb.NoiseSpec(moe=moe)
    return pb.SimulateRequest(training=training, noise=noise, samples=10)


@pytest.mark.parametrize(
    ("moe", "field"),
    [
        (pb.MoeImbalanceNoise(experts=1 << 40, tokens=64), "noise.moe.experts"),
        (pb.MoeImbalanceNoise(experts=limits.MAX_MOE_EXPERTS + 1, tokens=64), "noise.moe.experts"),
        (pb.MoeImbalanceNoise(experts=8, tokens=limits.MAX_MOE_TOKENS + 1), "noise.moe.tokens"),
    ],
)
def test_grpc_refuses_moe_noise_above_the_bound(grpc_client, moe, field):
    with pytest.raises(PlenaRpcError) as info:
        grpc_client.simulate(_grpc_training(moe), timeout=30)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert info.value.field == field


def test_grpc_search_recheck_noise_is_bounded_too(grpc_client):
    from plena_client import system_spec

    request = pb.SearchRequest(
        system=system_spec("gpt-oss-20b", "illustrative_gpu_node_8"),
        options=pb.SearchOptions(
            trials=1, noise=pb.NoiseSpec(moe=pb.MoeImbalanceNoise(experts=1 << 20, tokens=8))
        ),
    )
    with pytest.raises(PlenaRpcError) as info:
        grpc_client.search(request, timeout=30)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert info.value.field == "options.noise.moe.experts"


@pytest.mark.parametrize("value", [limits.MAX_SLA * 10, 1e300, float("inf"), -1.0])
def test_grpc_refuses_a_cost_cap_outside_the_sla_range(grpc_client, value):
    from plena_client import system_spec

    request = pb.SearchRequest(
        system=system_spec("gpt-oss-20b", "illustrative_gpu_node_8"),
        options=pb.SearchOptions(trials=1, max_cost_per_mtok=value),
    )
    with pytest.raises(PlenaRpcError) as info:
        grpc_client.search(request, timeout=30)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field == "options.max_cost_per_mtok"


def test_grpc_and_web_share_one_set_of_bounds():
    from plena_server.limits import ServerLimits
    from plena_server.simulate_job import MAX_TRAINING_OPS, MAX_WINDOW_STEPS

    from plena_opt.web import limits as web

    s = ServerLimits()
    assert s.max_samples == web.MAX_SAMPLES == limits.MAX_SAMPLES
    assert s.max_inline_json_bytes == web.MAX_BODY_BYTES == limits.MAX_BODY_BYTES
    assert s.max_devices == web.MAX_DEGREE == limits.MAX_DEVICES
    assert s.max_concurrent_simulates == web.MAX_CONCURRENT_SIMULATIONS
    assert s.max_simulate_bytes == web.MAX_SIMULATION_BYTES
    assert MAX_WINDOW_STEPS == web.MAX_WINDOW_STEPS and MAX_TRAINING_OPS == limits.MAX_TRAINING_OPS


def test_trials_and_batch_size_lists_have_one_bound_in_every_front_end():
    from plena_server.limits import ServerLimits
    from plena_server.search_request import MAX_BATCH_SIZES as GRPC_BATCH_SIZES

    from plena_opt import bounds
    from plena_opt.web.planner_routes import PlannerIn

    # the CLI's trials bound (search.request) is the gRPC server's default and the web planner's
    assert ServerLimits().max_trials == limits.MAX_TRIALS == bounds.MAX_TRIALS
    trials = PlannerIn.model_fields["trials"].metadata
    assert any(isinstance(m, Le) and m.le == bounds.MAX_TRIALS for m in trials)
    assert GRPC_BATCH_SIZES == limits.MAX_BATCH_SIZES


def test_web_refuses_a_straggler_factor_above_the_bound():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    client = TestClient(create_app(storage=None), base_url="http://127.0.0.1")
    noise = {"straggler": {"probability": 0.1, "factor_high": limits.MAX_STRAGGLER_FACTOR * 10}}
    r = client.post("/api/simulate", json={"mode": "training", "samples": 10, "noise": noise})
    assert r.status_code == 422 and r.json()["field"] == "noise.straggler.factor_high"
    assert r.json()["detail"][0]["msg"] == (
        "noise.straggler.factor_high must be between 1 and 100, got 1000"
    )
