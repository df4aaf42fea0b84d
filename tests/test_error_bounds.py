"""Error messages stay far below the gRPC response-header limit on every path (issue 10): unknown
names list at most the first few valid ones, long inputs are echoed truncated."""

from __future__ import annotations

import json

import grpc
import optuna
import pytest
from plena_client import pb, system_spec
from plena_proto import plena_opt_pb2_grpc as pb_grpc
from plena_server.app import start_server

from plena_opt.errors import MAX_MESSAGE, MAX_NAMES, PlenaInputError, clip, echo, name_list

LONG = "x" * 200_000
STUDIES = 150


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = tmp_path_factory.mktemp("bounds") / "s.log"
    store = JournalStorage(JournalFileBackend(str(path)))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for i in range(STUDIES):
        optuna.create_study(study_name=f"study-{i:03d}-" + "n" * 100, storage=store)
    running = start_server("127.0.0.1", 0, str(path), workers=2)
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield pb_grpc.PlenaOptStub(channel)
    channel.close()
    running.server.stop(0)


def _error(call, request) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=20)
    return info.value


def _assert_bounded(err: grpc.RpcError, code: grpc.StatusCode) -> str:
    assert err.code() == code, err.details()
    details = err.details()
    assert len(details.encode()) <= MAX_MESSAGE
    assert "x" * 100 not in details
    return details


def test_get_study_unknown_lists_only_the_first_names(stub):
    details = _assert_bounded(_error(stub.GetStudy, pb.GetStudyRequest(study_name="nope")), NOT)
    assert details.count("study-") == MAX_NAMES
    assert f"({STUDIES - MAX_NAMES} more)" in details


NOT = grpc.StatusCode.NOT_FOUND
BAD = grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("method", "request_", "code"),
    [
        ("GetStudy", pb.GetStudyRequest(study_name=LONG), NOT),
        ("CancelSearch", pb.CancelSearchRequest(study_name=LONG), NOT),
        (
            "Estimate",
            pb.EstimateRequest(
                system=system_spec(LONG, "illustrative_gpu_node_8"), plan=pb.Plan(tp=8)
            ),
            NOT,
        ),
        (
            "Estimate",
            pb.EstimateRequest(
                system=pb.SystemSpec(
                    model=pb.ModelSource(name="llama-3.1-8b"),
                    noc=pb.ProfileSource(name=LONG),
                ),
                plan=pb.Plan(tp=8),
            ),
            NOT,
        ),
        (
            "Estimate",
            pb.EstimateRequest(
                system=pb.SystemSpec(
                    model=pb.ModelSource(name="llama-3.1-8b"),
                    noc=pb.ProfileSource(name="illustrative_gpu_node_8"),
                    memory=pb.ProfileSource(name="mem" + LONG[:50_000]),
                    chip=pb.ProfileSource(name="chip" + LONG[:50_000]),
                ),
                plan=pb.Plan(tp=8),
            ),
            NOT,
        ),
        (
            "Estimate",
            pb.EstimateRequest(
                system=pb.SystemSpec(
                    model=pb.ModelSource(
                        hf_config_json=json.dumps({"x" * 100_000: 1}), display_name=LONG
                    ),
                    noc=pb.ProfileSource(name="illustrative_gpu_node_8"),
                ),
                plan=pb.Plan(tp=8),
            ),
            BAD,
        ),
    ],
)
def test_long_inputs_are_echoed_truncated(stub, method, request_, code):
    _assert_bounded(_error(getattr(stub, method), request_), code)


def test_message_helpers_bound_bytes_and_names():
    assert clip("é" * 5000).encode().__len__() <= MAX_MESSAGE
    assert clip("\ud800 ok") == "\\ud800 ok"  # a lone surrogate cannot go into a header
    assert echo("a" * 1000).startswith("'" + "a" * 64 + "'…") and "(1000 characters)" in echo(
        "a" * 1000
    )
    assert echo("short") == "'short'"
    assert name_list([]) == "(none)"
    assert name_list([f"n{i}" for i in range(25)]).endswith("n9, … (15 more)")
    err = PlenaInputError("f" * 5000, "r" * 100_000)
    assert len(str(err).encode()) <= MAX_MESSAGE and len(err.field) <= MAX_MESSAGE // 4
