"""Property-based fuzzing of requests: no INTERNAL/UNKNOWN, no hang, server healthy afterwards.

About 2000 cheap malformed requests against an in-process server on 127.0.0.1 (each call has a 5 s
deadline, so a hang fails as DEADLINE_EXCEEDED).
"""

from __future__ import annotations

import json

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plena_proto import plena_opt_pb2 as pb
from plena_proto import plena_opt_pb2_grpc as pb_grpc
from plena_server.app import start_server

ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNIMPLEMENTED,  # only for an RPC whose library is missing from a build
}


def fuzz(examples: int) -> settings:
    """Deterministic (derandomized) runs of ``examples`` cases, no per-example deadline."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,
        database=None,
    )


MODELS = ["llama-3.1-8b", "gpt-oss-20b", "fictional-moe-128", "nope", "", "../etc/passwd"]
NOCS = ["illustrative_gpu_node_8", "illustrative_gpu_cluster_32", "x", "/tmp", ""]
MEMS = ["fictional_stacked_dram", "unbounded", "fixed", ""]
HF_KEYS = [
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "num_local_experts",
    "num_experts_per_tok",
    "head_dim",
    "layer_types",
    "sliding_window",
    "model_type",
    "n_shared_experts",
    "mlp_types",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
json_docs = st.one_of(
    st.text(max_size=40),
    st.dictionaries(st.sampled_from(HF_KEYS), json_values, max_size=8).map(json.dumps),
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),
)
ints = st.one_of(
    st.sampled_from([1, 2, 4, 8]), st.integers(-5, 70), st.integers(-(2**63), 2**63 - 1)
)
floats = st.floats(allow_nan=True, allow_infinity=True)
VALID_TEXT = [
    "",
    "replace",
    "keep",
    "none",
    "full",
    "serial",
    "stage-roofline",
    "balanced",
    "random",
]
texts = st.one_of(st.sampled_from(VALID_TEXT), st.text(max_size=12))


def _base_config() -> dict:
    from plena_opt.models import builtin_config

    return builtin_config("llama-3.2-1b")


@st.composite
def perturbed_configs(draw):
    """A real HF config with one to three keys replaced by fuzzed values (or deleted)."""
    cfg = _base_config()
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(HF_KEYS))
        if draw(st.booleans()) and key in cfg:
            del cfg[key]
        else:
            cfg[key] = draw(json_values)
    return json.dumps(cfg, allow_nan=True)


@st.composite
def model_sources(draw):
    kind = draw(st.sampled_from(["valid"] * 4 + ["perturbed", "perturbed", "name", "json", "none"]))
    if kind == "valid":
        return pb.ModelSource(name=draw(st.sampled_from(MODELS[:3])))
    if kind == "perturbed":
        return pb.ModelSource(hf_config_json=draw(perturbed_configs()), display_name="fuzz")
    if kind == "name":
        return pb.ModelSource(name=draw(st.sampled_from(MODELS) | st.text(max_size=10)))
    if kind == "json":
        return pb.ModelSource(
            hf_config_json=draw(json_docs), display_name=draw(st.text(max_size=5))
        )
    return pb.ModelSource()


@st.composite
def profile_sources(draw, names):
    kind = draw(st.sampled_from(["valid", "valid", "valid", "name", "json", "fixed", "none"]))
    if kind == "valid":
        return pb.ProfileSource(name=names[0])
    if kind == "name":
        return pb.ProfileSource(name=draw(st.sampled_from(names) | st.text(max_size=10)))
    if kind == "json":
        return pb.ProfileSource(json=draw(json_docs))
    if kind == "fixed":
        fb = pb.FixedBandwidthMemory(bandwidth_gbytes_per_s=draw(floats))
        if draw(st.booleans()):
            fb.capacity_gib = draw(floats)
        return pb.ProfileSource(fixed_bandwidth=fb)
    return pb.ProfileSource()


@st.composite
def systems(draw):
    return pb.SystemSpec(
        model=draw(model_sources()),
        noc=draw(profile_sources(NOCS)),
        memory=draw(profile_sources(MEMS)),
        chip=draw(profile_sources(["plena-default", "chip?"]) | st.just(pb.ProfileSource())),
    )


@st.composite
def workloads(draw):
    w = pb.Workload(
        overlap_policy=draw(texts), routing=draw(texts), include_lm_head=draw(st.booleans())
    )
    for name in ("batch_size", "input_seq_len", "output_seq_len"):
        if draw(st.booleans()):
            setattr(w, name, draw(st.integers(-3, 300) | ints))
    if draw(st.booleans()):
        w.frequency_hz = draw(floats)
    return w


@st.composite
def plans(draw):
    p = pb.Plan(moe_tp_mode=draw(texts), comm_overlap=draw(texts))
    for name in ("tp", "ep", "dp", "pp", "cp"):
        if draw(st.booleans()):
            setattr(p, name, draw(ints))
    return p


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    from plena_server.limits import ServerLimits

    store = tmp_path_factory.mktemp("fuzz") / "studies.log"
    running = start_server("127.0.0.1", 0, str(store), workers=4, limits=ServerLimits())
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield pb_grpc.PlenaOptStub(channel), channel
    channel.close()
    running.drain(1)


def _code(call, request) -> grpc.StatusCode:
    try:
        call(request, timeout=5)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@fuzz(500)
@given(system=systems(), workload=workloads(), plan=plans())
def test_fuzzed_estimate_never_internal(stub, system, workload, plan):
    code = _code(stub[0].Estimate, pb.EstimateRequest(system=system, workload=workload, plan=plan))
    assert code in ALLOWED - {grpc.StatusCode.UNIMPLEMENTED}


VALID_SYSTEMS = [
    pb.SystemSpec(model=pb.ModelSource(name=m), noc=pb.ProfileSource(name=n))
    for m, n in [
        ("llama-3.1-8b", "illustrative_gpu_node_8"),
        ("gpt-oss-20b", "illustrative_gpu_node_8"),
        ("fictional-moe-128", "illustrative_gpu_cluster_32"),
    ]
]


@fuzz(300)
@given(system=st.sampled_from(VALID_SYSTEMS), workload=workloads(), plan=plans())
def test_fuzzed_plan_and_workload_on_a_valid_system(stub, system, workload, plan):
    request = pb.EstimateRequest(system=system, workload=workload, plan=plan)
    code = _code(stub[0].Estimate, request)
    assert code in {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT}


@fuzz(500)
@given(
    system=systems(),
    workload=workloads(),
    trials=st.one_of(st.integers(-(2**63), 0), st.integers(20001, 2**63 - 1)),
    sampler=texts,
    objectives=st.lists(st.sampled_from(["ttft", "tps", "energy", "speed", ""]), max_size=4),
    batch_sizes=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    study=st.text(max_size=20),
    stream=st.booleans(),
)
def test_fuzzed_search_never_internal(
    stub, system, workload, trials, sampler, objectives, batch_sizes, study, stream
):
    # trials is always out of range, so no fuzzed search runs: each is a cheap rejection.
    options = pb.SearchOptions(
        trials=trials,
        sampler=sampler,
        objectives=objectives,
        batch_sizes=batch_sizes,
        study_name=study,
    )
    request = pb.SearchRequest(system=system, workload=workload, options=options)
    if stream:
        try:
            list(stub[0].StreamSearch(request, timeout=5))
            code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            code = exc.code()
    else:
        code = _code(stub[0].Search, request)
    assert code in ALLOWED - {grpc.StatusCode.OK, grpc.StatusCode.UNIMPLEMENTED}


METHODS = [
    ("Search", False),
    ("StreamSearch", True),
    ("Estimate", False),
    ("Simulate", False),
    ("ListProfiles", False),
    ("GetStudy", False),
    ("ListStudies", False),
    ("CancelSearch", False),
]


@fuzz(400)
@given(method=st.sampled_from(METHODS), data=st.binary(max_size=64))
def test_fuzzed_raw_bytes_are_invalid_argument_not_internal(stub, method, data):
    name, streaming = method
    path = f"/plena_opt.v1.PlenaOpt/{name}"
    channel = stub[1]
    make = channel.unary_stream if streaming else channel.unary_unary
    call = make(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        result = call(data, timeout=5)
        if streaming:
            list(result)
        code = grpc.StatusCode.OK
    except grpc.RpcError as exc:
        code = exc.code()
    assert code in ALLOWED


@fuzz(300)
@given(
    name=st.text(max_size=30),
    kind=st.integers(-5, 10),
    which=st.sampled_from(["get", "cancel", "profiles", "simulate"]),
    samples=ints,
)
def test_fuzzed_small_rpcs_never_internal(stub, name, kind, which, samples):
    s = stub[0]
    if which == "get":
        code = _code(s.GetStudy, pb.GetStudyRequest(study_name=name))
        assert code in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}
    elif which == "cancel":
        code = _code(s.CancelSearch, pb.CancelSearchRequest(study_name=name))
        assert code in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}
    elif which == "profiles":
        code = _code(s.ListProfiles, pb.ListProfilesRequest(kind=kind))
        ok = 0 <= kind <= 3
        assert code == (grpc.StatusCode.OK if ok else grpc.StatusCode.INVALID_ARGUMENT)
    else:
        request = pb.SimulateRequest(samples=samples, seed=samples)
        assert _code(s.Simulate, request) in ALLOWED - {grpc.StatusCode.OK}


def test_server_is_healthy_after_fuzzing(stub):
    health = health_pb2_grpc.HealthStub(stub[1])
    reply = health.Check(health_pb2.HealthCheckRequest(service="plena_opt.v1.PlenaOpt"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    models = stub[0].ListModels(pb.ListModelsRequest(), timeout=5)
    assert len(models.models) > 0
