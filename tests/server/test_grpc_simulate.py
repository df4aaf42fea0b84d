"""Simulate and Estimate over gRPC: same numbers and same CLI output as local mode."""

from __future__ import annotations

import argparse
import contextlib
import io
import json

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb, system_spec
from plena_proto.traces import unpack_trace
from plena_server.process import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("sim") / "studies.log"
    with ServerProcess(store) as proc:
        yield proc


@pytest.fixture(scope="module")
def client(server):
    with PlenaClient(server.target) as c:
        yield c


def _args(command: str, argv: list[str], server: ServerProcess) -> argparse.Namespace:
    import importlib

    module = importlib.import_module(f"plena_opt.cli.{command}_cmd")
    parser = argparse.ArgumentParser()
    module.register(parser.add_subparsers())
    args = parser.parse_args([command, *argv])
    args.server = server.target
    return args


def _local(argv: list[str]) -> tuple[int, str, str]:
    from plena_opt.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _remote(fn, args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = fn(args)
        except Exception as exc:  # the CLI dispatcher turns PlenaInputError into exit 2
            from plena_opt.errors import PlenaInputError

            if not isinstance(exc, PlenaInputError):
                raise
            print(f"error: {exc}", file=err)
            rc = 2
    return rc, out.getvalue(), err.getvalue()


SCHEDULE = [
    "--schedule",
    "1f1b",
    "--pp",
    "4",
    "--microbatches",
    "8",
    "--durations",
    "F=1,B=2",
    "--samples",
    "500",
    "--seed",
    "7",
]
PLAN = [
    "--model",
    "llama-3.1-70b",
    "--noc",
    "illustrative_gpu_cluster_32",
    "--tp",
    "8",
    "--pp",
    "4",
    "--samples",
    "300",
    "--max-window-steps",
    "8",
]


@pytest.mark.parametrize("argv", [SCHEDULE, SCHEDULE + ["--json"], PLAN, PLAN + ["--json"]])
def test_remote_simulate_prints_what_local_prints(server, argv):
    from plena_opt.cli.remote import remote_simulate

    local = _local(["simulate", *argv])
    remote = _remote(remote_simulate, _args("simulate", argv, server))
    assert local[0] == 0
    assert remote == local


def test_remote_simulate_writes_the_same_trace_files(server, tmp_path):
    from plena_opt.cli.remote import remote_simulate

    a, b = tmp_path / "local.json", tmp_path / "remote.json"
    _local(["simulate", *SCHEDULE, "--trace", str(a)])
    _remote(remote_simulate, _args("simulate", [*SCHEDULE, "--trace", str(b)], server))
    for name in ("", ".p50", ".p99"):
        la, rb = a.with_suffix(f"{name}.json"), b.with_suffix(f"{name}.json")
        assert json.loads(la.read_text()) == json.loads(rb.read_text())


@pytest.mark.parametrize(
    "argv",
    [
        ["--noc", "illustrative_gpu_cluster_32", "--tp", "8", "--pp", "4"],
        [
            "--noc",
            "illustrative_gpu_node_8",
            "--model",
            "gpt-oss-20b",
            "--tp",
            "2",
            "--ep",
            "4",
            "--json",
        ],
        ["--model", "llama-3.1-8b"],  # single chip (no --noc)
        [
            "--noc",
            "illustrative_gpu_node_8",
            "--fixed-bandwidth-gbs",
            "900",
            "--fixed-capacity-gib",
            "16",
            "--tp",
            "8",
            "--include-lm-head",
        ],
        ["--noc", "illustrative_gpu_node_8", "--tp", "3"],  # illegal plan: same error, exit 2
        ["--noc", "illustrative_gpu_node_8", "--model", "no-such-model"],
    ],
)
def test_remote_estimate_prints_what_local_prints(server, argv):
    from plena_opt.cli.remote import remote_estimate

    local = _local(["estimate", *argv])
    remote = _remote(remote_estimate, _args("estimate", argv, server))
    assert remote == local


def test_remote_estimate_sends_local_files_inline(server, tmp_path):
    from plena_opt.cli.remote import remote_estimate
    from plena_opt.models import builtin_config

    cfg = tmp_path / "my-model" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(builtin_config("llama-3.2-1b")))
    argv = ["--model-path", str(cfg), "--noc", "illustrative_gpu_node_8", "--tp", "8"]
    local = _local(["estimate", *argv])
    remote = _remote(remote_estimate, _args("estimate", argv, server))
    assert local[0] == 0 and remote == local
    assert "my-model" in local[1]


def test_simulate_response_fields(client):
    req = pb.SimulateRequest(
        training=pb.TrainingSchedule(
            schedule="gpipe", pp_size=2, microbatches=4, base_ms={"F": 1.0, "B": 2.0}
        ),
        noise=pb.NoiseSpec(jitter_sigma=0.0),
        samples=10,
        include_traces=True,
    )
    reply = client.simulate(req)
    # noise-free GPipe p=2, m=4, F=1, B=2: (m + p − 1)·(F + B) = 15 ms (pipeline-simulator §1.3)
    assert reply.mode == "training" and reply.time_unit == "ms"
    assert reply.makespan == pytest.approx(15.0, rel=1e-12)
    assert reply.distributions[0].p99 == pytest.approx(15.0, rel=1e-12)
    assert {t.trace_id for t in reply.traces} >= {"deterministic"}
    trace = unpack_trace(reply.traces[0])
    assert trace["traceEvents"]
    assert all(len(c) <= 64 * 1024 for t in reply.traces for c in t.chunks)


@pytest.mark.parametrize(
    ("request_", "code", "field"),
    [
        (pb.SimulateRequest(), grpc.StatusCode.INVALID_ARGUMENT, "target"),
        (
            pb.SimulateRequest(training=pb.TrainingSchedule(schedule="nope", base_ms={"F": 1})),
            grpc.StatusCode.INVALID_ARGUMENT,
            "training.schedule",
        ),
        (
            pb.SimulateRequest(training=pb.TrainingSchedule(schedule="1f1b", base_ms={"F": 1})),
            grpc.StatusCode.INVALID_ARGUMENT,
            "training.base_ms.B",
        ),
        (
            pb.SimulateRequest(
                training=pb.TrainingSchedule(schedule="1f1b", pp_size=0, base_ms={"F": 1, "B": 1})
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "training.pp_size",
        ),
        (
            pb.SimulateRequest(
                noise=pb.NoiseSpec(rank_sigma=5),
                training=pb.TrainingSchedule(schedule="1f1b", base_ms={"F": 1, "B": 1}),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "noise.rank_sigma",
        ),
        (
            pb.SimulateRequest(samples=10**9, training=pb.TrainingSchedule(schedule="1f1b")),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "samples",
        ),
        (
            pb.SimulateRequest(
                training=pb.TrainingSchedule(
                    schedule="1f1b", pp_size=10**6, base_ms={"F": 1, "B": 1}
                )
            ),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "training",
        ),
        (
            pb.SimulateRequest(
                inference=pb.InferenceTarget(
                    system=system_spec("llama-3.1-70b", "illustrative_gpu_cluster_32"),
                    plan=pb.Plan(tp=7),
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "inference.plan",
        ),
        (
            pb.SimulateRequest(
                inference=pb.InferenceTarget(
                    system=system_spec("nope", "illustrative_gpu_cluster_32")
                )
            ),
            grpc.StatusCode.NOT_FOUND,
            "inference.system.model.name",
        ),
    ],
)
def test_bad_simulate_requests(client, request_, code, field):
    with pytest.raises(PlenaRpcError) as err:
        client.simulate(request_)
    assert err.value.code == code
    assert err.value.field == field


@pytest.mark.parametrize(
    ("system", "plan", "code", "field"),
    [
        (
            system_spec("nope", "illustrative_gpu_node_8"),
            pb.Plan(),
            grpc.StatusCode.NOT_FOUND,
            "system.model.name",
        ),
        (
            system_spec("llama-3.1-8b", "no-noc"),
            pb.Plan(),
            grpc.StatusCode.NOT_FOUND,
            "system.noc.name",
        ),
        (
            system_spec("llama-3.1-8b", "../../etc/passwd"),
            pb.Plan(),
            grpc.StatusCode.NOT_FOUND,
            "system.noc.name",
        ),
        (
            system_spec({"hidden_size": "x"}, "illustrative_gpu_node_8"),
            pb.Plan(tp=8),
            grpc.StatusCode.INVALID_ARGUMENT,
            "system.model.hf_config_json",
        ),
        (
            system_spec("llama-3.1-8b", "illustrative_gpu_node_8"),
            pb.Plan(tp=-1),
            grpc.StatusCode.INVALID_ARGUMENT,
            "plan.tp",
        ),
        (
            system_spec("llama-3.1-8b", "illustrative_gpu_node_8"),
            pb.Plan(tp=8, ep=0),
            grpc.StatusCode.INVALID_ARGUMENT,
            "plan.ep",
        ),
        (
            system_spec("llama-3.1-8b", "illustrative_gpu_node_8"),
            pb.Plan(tp=3),
            grpc.StatusCode.INVALID_ARGUMENT,
            "plan",
        ),
        (
            system_spec("llama-3.1-8b", "illustrative_gpu_node_8", {"kind": 3}),
            pb.Plan(tp=8),
            grpc.StatusCode.INVALID_ARGUMENT,
            "system.memory.json",
        ),
    ],
)
def test_estimate_errors_name_the_field(client, system, plan, code, field):
    with pytest.raises(PlenaRpcError) as err:
        client.estimate(system, plan)
    assert err.value.code == code
    assert err.value.field.startswith(field)


# --- review fixes: the server applies the CLI's rules (one test per rule) ------------------------

_TRAIN = {"schedule": "1f1b", "pp_size": 2, "microbatches": 2}


@pytest.mark.parametrize("seed", [-3, 2**32])
def test_seed_outside_uint32_is_invalid_argument(client, seed):
    """Rule: 0 <= seed < 2**32, for training and inference targets alike."""
    for target in (
        {"training": pb.TrainingSchedule(**_TRAIN, base_ms={"F": 1, "B": 2})},
        {"inference": pb.InferenceTarget(system=system_spec("llama-3.1-8b", "x"))},
    ):
        with pytest.raises(PlenaRpcError) as err:
            client.simulate(pb.SimulateRequest(seed=seed, samples=10, **target))
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.field == "seed" and "2**32" in err.value.message


@pytest.mark.parametrize(
    ("base_ms", "field", "rule"),
    [
        ({"F": 1e308, "B": 1e308}, "training.base_ms.F", "<= 1e+15"),
        ({"F": 1.0, "B": float("nan")}, "training.base_ms.B", "finite"),
        ({"F": 1.0, "B": float("-inf")}, "training.base_ms.B", "finite"),
        ({"F": -1.0, "B": 2.0}, "training.base_ms.F", ">= 0"),
        ({"F": 1.0, "B": 2.0, "Z": 3.0}, "training.base_ms.Z", "not an op type"),
    ],
)
def test_bad_base_ms_is_invalid_argument(client, base_ms, field, rule):
    """Rule: base_ms as --durations: finite, 0 <= ms <= 1e15, op types of the schedule (1e308
    used to return OK with NaN statistics)."""
    with pytest.raises(PlenaRpcError) as err:
        client.simulate(
            pb.SimulateRequest(training=pb.TrainingSchedule(**_TRAIN, base_ms=base_ms), samples=10)
        )
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == field
    assert err.value.message.startswith(field) and rule in err.value.message


def test_base_ms_is_per_stage_for_interleaved(client):
    """Rule: base_ms is per stage; each of the v chunk ops takes F/v. (p,m,v) = (4,8,2), F=1,
    B=2 gives the §1.3 closed form m(F+B) + (p−1)(F+B)/v = 28.5."""
    reply = client.simulate(
        pb.SimulateRequest(
            training=pb.TrainingSchedule(
                schedule="interleaved-1f1b",
                pp_size=4,
                vpp_size=2,
                microbatches=8,
                base_ms={"F": 1.0, "B": 2.0},
            ),
            samples=0,
        )
    )
    assert reply.makespan == pytest.approx(28.5, rel=1e-12)
    doc = json.loads(reply.result_json)
    assert doc["durations"]["per_op_ms"] == {"F": 0.5, "B": 1.0}
    assert "chunk ops take F/v, B/v" in doc["durations"]["note"]


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--seed", "-3"], "error: --seed must be 0 <= seed < 2**32"),
        (["--max-window-steps", "0"], "error: --max-window-steps must be between 1 and 1,024"),
        (["--max-window-steps", "-4"], "error: --max-window-steps must be between 1 and 1,024"),
    ],
)
def test_remote_cli_applies_the_same_flag_rules(server, flags, needle):
    """Remote mode checks --seed and --max-window-steps like local mode (exit 2, names the flag)."""
    from plena_opt.cli.simulate_cmd import run

    argv = PLAN + flags
    assert _local(["simulate", *argv])[0] == 2
    rc, out, err = _remote(run, _args("simulate", argv, server))
    assert rc == 2 and out == "" and err.startswith(needle)
