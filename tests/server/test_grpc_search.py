"""Search / StreamSearch / GetStudy / CancelSearch against a real server process on loopback."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import threading
import time

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb, system_spec
from plena_server.process import ServerProcess

SMALL = ["--model", "gpt-oss-20b", "--noc", "illustrative_gpu_cluster_32", "--seed", "3"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "studies.log"
    with ServerProcess(store, "--max-searches", "2") as proc:
        yield proc


@pytest.fixture(scope="module")
def client(server):
    with PlenaClient(server.target) as c:
        yield c


def _search_args(argv: list[str]) -> argparse.Namespace:
    from plena_opt.cli import search_cmd

    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers())
    return parser.parse_args(["search", *argv])


def _long_request(study: str) -> pb.SearchRequest:
    """A search that cannot finish in a test: TPE over 40 batch sizes × 270 plans."""
    return pb.SearchRequest(
        system=system_spec("gpt-oss-20b", "torus_mesh_switch_64"),
        options=pb.SearchOptions(
            seed=1,
            trials=20000,
            sampler="tpe",
            study_name=study,
            batch_sizes=range(1, 41),
            compare_exact=False,
        ),
    )


def _comparable(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("storage", "elapsed_s", "elapsed_seconds")}


def test_unary_search_equals_local_run_for_the_same_seed(client, tmp_path):
    from plena_opt.cli.remote import search_request_from_args
    from plena_opt.cli.search_cmd import request_from_args
    from plena_opt.search.run.runner import run_search

    argv = [
        *SMALL,
        "--trials",
        "40",
        "--sampler",
        "tpe",
        "--study",
        "parity-unary",
        "--recheck",
        "0",
    ]
    args = _search_args(argv)
    from plena_opt.api.robust import annotate_front

    request = request_from_args(args).model_copy(update={"storage": str(tmp_path / "l.log")})
    local = run_search(request)
    annotate_front(local, request, request.problem.load())  # the server marks its front too
    remote = client.search(search_request_from_args(args), timeout=120)
    assert not remote.partial and remote.stop_reason == "completed"
    assert _comparable(json.loads(remote.result_json)) == _comparable(local.model_dump(mode="json"))
    # typed fields carry the same front (ms → s)
    assert [m.ttft_seconds * 1e3 for m in remote.front] == pytest.approx(
        [e.ttft_ms for e in local.front], rel=1e-15
    )
    assert [m.label for m in remote.front] == [e.label for e in local.front]


def test_remote_cli_prints_the_same_text_as_local(server, tmp_path):
    from plena_opt.cli.main import main
    from plena_opt.cli.remote import remote_search

    argv2 = [
        *SMALL,
        "--trials",
        "30",
        "--sampler",
        "nsga2",
        "--study",
        "parity-cli-2",
        "--recheck",
        "2",
        "--samples",
        "200",
    ]
    local2 = io.StringIO()
    with contextlib.redirect_stdout(local2):
        assert main(["search", *argv2, "--storage", str(tmp_path / "x.log")]) == 0
    args2 = _search_args(argv2)
    args2.server = server.target
    remote2 = io.StringIO()
    with contextlib.redirect_stdout(remote2):
        assert remote_search(args2) == 0
    # Same text except the store's path in the header line.
    expected = local2.getvalue().replace(str(tmp_path / "x.log"), str(server.storage))
    assert remote2.getvalue() == expected
    assert "Pareto front" in expected and "Monte Carlo re-check of the top 2 plans" in expected


def test_remote_cli_json_and_traces_equal_local(server, tmp_path):
    from plena_opt.cli.main import main
    from plena_opt.cli.remote import remote_search

    argv = [
        *SMALL,
        "--trials",
        "20",
        "--sampler",
        "tpe",
        "--study",
        "parity-json",
        "--json",
        "--recheck",
        "2",
        "--samples",
        "100",
    ]
    local_dir, remote_dir = tmp_path / "local", tmp_path / "remote"
    local_dir.mkdir()
    remote_dir.mkdir()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            main(
                [
                    "search",
                    *argv,
                    "--storage",
                    str(tmp_path / "l.log"),
                    "--trace-dir",
                    str(local_dir),
                ]
            )
            == 0
        )
    args = _search_args([*argv, "--trace-dir", str(remote_dir)])
    args.server = server.target
    rout = io.StringIO()
    with contextlib.redirect_stdout(rout):
        assert remote_search(args) == 0
    local = json.loads(out.getvalue().replace(str(local_dir), "DIR"))
    remote = json.loads(rout.getvalue().replace(str(remote_dir), "DIR"))
    assert _comparable(remote) == _comparable(local)
    assert len(local["recheck"]) == 2 and local["recheck"][0]["trace_paths"]
    names = sorted(p.name for p in local_dir.iterdir())
    assert names == sorted(p.name for p in remote_dir.iterdir()) and names
    for name in names:
        assert json.loads((local_dir / name).read_text()) == json.loads(
            (remote_dir / name).read_text()
        )


def test_stream_search_reports_progress_then_the_result(client):
    req = pb.SearchRequest(
        system=system_spec("gpt-oss-20b", "illustrative_gpu_cluster_32"),
        options=pb.SearchOptions(seed=5, trials=30, sampler="tpe", study_name="stream-1"),
    )
    events = list(client.stream_search(req, timeout=120))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "result" and kinds.count("result") == 1
    progress = [e.progress for e in events if e.WhichOneof("event") == "progress"]
    assert progress, "no progress events"
    done = [p.trials_done for p in progress if p.trials_total == 30]  # the sampler stage
    assert done == sorted(done) and done[-1] > 0
    assert all(p.study_name == "stream-1" for p in progress)
    assert {p.stage for p in progress} <= {pb.STAGE_SEARCH, pb.STAGE_DONE}
    assert any(p.front_size > 0 and p.hypervolume > 0 for p in progress)
    result = events[-1].result
    assert result.study_name == "stream-1" and len(result.front) > 0
    # the same request, unary, on a fresh study gives the same front
    req.options.study_name = "stream-1-unary"
    unary = client.search(req, timeout=120)
    assert [m.label for m in unary.front] == [m.label for m in result.front]


def test_get_study_returns_the_stored_front(client):
    req = pb.SearchRequest(
        system=system_spec("llama-3.1-70b", "illustrative_gpu_cluster_32"),
        options=pb.SearchOptions(seed=2, sampler="exhaustive", study_name="stored-1"),
    )
    result = client.search(req, timeout=120)
    study = client.get_study("stored-1")
    assert study.trials_completed == result.trials_completed
    assert not study.running
    assert sorted(m.label for m in study.front) == sorted(m.label for m in result.front)
    assert list(study.objectives) == json.loads(result.result_json)["metric_names"]
    with pytest.raises(PlenaRpcError) as err:
        client.get_study("no-such-study")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert err.value.field == "study_name"


def test_deadline_returns_a_partial_front_before_it(client):
    t0 = time.monotonic()
    result = client.search(_long_request("deadline-1"), timeout=3.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 3.0
    assert result.partial and result.stop_reason == "deadline"
    assert len(result.front) > 0 and result.trials_completed > 0


def test_client_cancel_stops_within_a_second_and_keeps_trials(client):
    call = client._stub.Search.future(_long_request("cancel-1"), timeout=60)
    deadline = time.monotonic() + 20
    while not client.get_study("cancel-1").running if _exists(client, "cancel-1") else True:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1.0)
    call.cancel()
    t0 = time.monotonic()
    while client.get_study("cancel-1").running:
        assert time.monotonic() - t0 < 1.0, "search still running 1 s after cancel"
        time.sleep(0.02)
    assert client.get_study("cancel-1").trials_completed > 0


def _exists(client: PlenaClient, name: str) -> bool:
    try:
        client.get_study(name)
    except PlenaRpcError:
        return False
    return True


def test_cancel_search_by_name_ends_the_stream_with_a_partial_result(client):
    events: list[pb.SearchEvent] = []

    def consume() -> None:
        events.extend(client.stream_search(_long_request("cancel-2"), timeout=60))

    t = threading.Thread(target=consume)
    t.start()
    t0 = time.monotonic()
    while not any(e.WhichOneof("event") == "progress" for e in events):
        assert time.monotonic() - t0 < 20
        time.sleep(0.05)
    assert client.cancel_search("cancel-2") is True
    t.join(5)
    assert not t.is_alive()
    result = events[-1].result
    assert result.partial and result.stop_reason == "cancelled" and result.trials_completed > 0
    assert client.cancel_search("cancel-2") is False  # known study, nothing running
    with pytest.raises(PlenaRpcError) as err:
        client.cancel_search("never-ran")
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_searches_beyond_the_limit_get_resource_exhausted(client):
    calls = [client._stub.Search.future(_long_request(f"busy-{i}"), timeout=30) for i in range(2)]
    try:
        t0 = time.monotonic()
        while not all(
            _exists(client, f"busy-{i}") and client.get_study(f"busy-{i}").running for i in range(2)
        ):
            assert time.monotonic() - t0 < 20
            time.sleep(0.05)
        with pytest.raises(PlenaRpcError) as err:
            client.search(_long_request("busy-3"), timeout=10)
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(PlenaRpcError) as err:  # same study twice: FAILED_PRECONDITION
            client.search(_long_request("busy-0"), timeout=10)
        assert err.value.code in (
            grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        )
    finally:
        for c in calls:
            c.cancel()
        t0 = time.monotonic()  # slots free once the workers have stopped (within 1 s)
        while any(
            client.get_study(f"busy-{i}").running for i in range(2) if _exists(client, f"busy-{i}")
        ):
            assert time.monotonic() - t0 < 5
            time.sleep(0.05)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (pb.SearchOptions(trials=0), "options.trials"),
        (pb.SearchOptions(sampler="magic"), "options.sampler"),
        (pb.SearchOptions(objectives=["speed"]), "options.objectives"),
        (pb.SearchOptions(batch_sizes=[4, 4]), "options.batch_sizes"),
        (pb.SearchOptions(max_ttft_ms=-1), "options.max_ttft_ms"),
        (pb.SearchOptions(study_name="a/b"), "options.study_name"),
    ],
)
def test_bad_search_options_are_invalid_argument_with_the_field(client, options, field):
    req = pb.SearchRequest(
        system=system_spec("llama-3.1-8b", "illustrative_gpu_node_8"), options=options
    )
    with pytest.raises(PlenaRpcError) as err:
        client.search(req, timeout=30)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field.startswith(field)


def test_trial_limit_is_resource_exhausted(client):
    req = pb.SearchRequest(
        system=system_spec("llama-3.1-8b", "illustrative_gpu_node_8"),
        options=pb.SearchOptions(trials=10**9),
    )
    with pytest.raises(PlenaRpcError) as err:
        client.search(req, timeout=30)
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.value.field == "options.trials"


def _recheck_request(study: str, **extra) -> pb.SearchRequest:
    return pb.SearchRequest(
        system=system_spec("llama-3.1-70b", "illustrative_gpu_cluster_32"),
        options=pb.SearchOptions(
            seed=4,
            sampler="exhaustive",
            study_name=study,
            recheck_top_k=2,
            mc_samples=200,
            include_traces=True,
            **extra,
        ),
    )


def convert_plan(m) -> dict:
    """The plan dict of a ``PlanMetrics`` message (with its batch size)."""
    p = m.plan
    return {"tp": p.tp, "ep": p.ep, "dp": p.dp, "pp": p.pp, "cp": p.cp,
            "moe_tp_mode": p.moe_tp_mode, "comm_overlap": p.comm_overlap,
            "batch_size": m.batch_size}  # fmt: skip


def test_search_rechecks_the_front_and_returns_chunked_gzip_traces(client):
    from plena_proto.traces import unpack_trace

    from plena_opt.simulator import validate_trace

    result = client.search(_recheck_request("recheck-unary"), timeout=120)
    assert [r.plan_index for r in result.recheck] == [0, 1]
    for r in result.recheck:
        dists = {d.metric: d for d in r.distributions}
        assert set(dists) == {"ttft", "tps"} and dists["tps"].samples == 200
        assert dists["ttft"].p50 <= dists["ttft"].p99
        assert dists["tps"].mean_ci_low <= dists["tps"].mean <= dists["tps"].mean_ci_high
    ids = [t.trace_id for t in result.traces]
    # traces are named after the plan (issue 10), e.g. tp8-ep1-dp1-pp4-cp1-replace-full-b16_p50
    from plena_opt.search.space.space import Point

    keys = [Point.from_dict(convert_plan(m)).key for m in result.front[:2]]
    assert {f"{k}_deterministic" for k in keys} <= set(ids)
    for t in result.traces:
        assert t.compression == "gzip" and all(len(c) <= 64 * 1024 for c in t.chunks)
        assert sum(len(c) for c in t.chunks) == t.compressed_bytes
        assert validate_trace(unpack_trace(t), unit_us=1e6) == []
    # The stream sends the same traces as chunks, after search → re-check → traces stages.
    events = list(client.stream_search(_recheck_request("recheck-stream"), timeout=120))
    stages = [e.progress.stage for e in events if e.WhichOneof("event") == "progress"]
    firsts = [stages.index(s) for s in (pb.STAGE_RECHECK, pb.STAGE_TRACES, pb.STAGE_DONE)]
    assert firsts == sorted(firsts) and stages[-1] == pb.STAGE_DONE
    chunks = [e.trace_chunk for e in events if e.WhichOneof("event") == "trace_chunk"]
    streamed = {}
    for c in chunks:
        streamed.setdefault(c.trace_id, []).append(c)
    assert set(streamed) == set(ids)
    for t in result.traces:
        parts = streamed[t.trace_id]
        assert [p.index for p in parts] == list(range(len(parts))) and parts[-1].last
        assert unpack_trace([p.data for p in parts]) == unpack_trace(t)
    final = events[-1].result
    assert not final.traces and len(final.recheck) == 2


def test_trace_bytes_cap_drops_traces_with_a_warning(client):
    result = client.search(_recheck_request("recheck-cap", max_trace_bytes=1000), timeout=120)
    assert not result.traces and len(result.recheck) == 2
    assert any("dropped" in w for w in result.warnings)


def test_bad_noise_is_invalid_argument_before_the_search(client):
    req = _recheck_request("recheck-bad")
    req.options.noise.jitter_sigma = -1
    with pytest.raises(PlenaRpcError) as err:
        client.search(req, timeout=30)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == "options.noise.jitter_sigma"
    assert not _exists(client, "recheck-bad")


def test_server_studies_are_visible_to_the_local_cli_and_dashboard_store(server, client):
    """The server writes the same store the CLI (`plena-opt studies`/`dashboard`) reads."""
    from plena_opt.cli.main import main

    req = pb.SearchRequest(
        system=system_spec("llama-3.1-8b", "illustrative_gpu_node_8"),
        options=pb.SearchOptions(seed=1, sampler="exhaustive", study_name="shared-store"),
    )
    result = client.search(req, timeout=60)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["studies", "--storage", str(server.storage), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(out.getvalue())}
    assert rows["shared-store"]["n_trials"] == result.trials_completed
    assert rows["shared-store"]["metric_names"] == list(client.get_study("shared-store").objectives)


def test_search_and_simulate_commands_accept_server(server, capsys):
    """``plena-opt search|simulate --server HOST:PORT`` go through the remote path end to end."""
    from plena_opt.cli.main import main

    argv = [*SMALL, "--trials", "10", "--sampler", "tpe", "--study", "via-main", "--recheck", "0"]
    assert main(["search", *argv, "--server", server.target, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["front"] and doc["study_name"] == "via-main"
    sched = ["--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--durations", "F=1,B=2"]
    assert main(["simulate", *sched, "--server", server.target, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["makespan"] == pytest.approx(33.0)
    # An unreachable server: --server names no server; exit 2 with the gRPC status, no traceback.
    assert main(["search", *argv, "--server", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "UNAVAILABLE" in err and "Traceback" not in err


def test_remote_serving_search_prints_the_same_text_as_local(server, tmp_path):
    """Serving options travel over the wire (issue 16): TPOT SLA at p90, auto batches, the
    aggregated/disaggregated comparison — the same text locally and remotely."""
    from plena_opt.cli.main import main
    from plena_opt.cli.remote import remote_search

    argv = [
        "--model",
        "llama-3.2-1b",
        "--noc",
        "illustrative_gpu_node_8",
        "--fixed-bandwidth-gbs",
        "1000",
        "--fixed-capacity-gib",
        "8",
        "--input-seq",
        "256",
        "--output-seq",
        "16",
        "--seed",
        "1",
        "--batch-sizes",
        "auto",
        "--memory-fraction",
        "0.8",
        "--objectives",
        "ttft,tps-per-device,tps-per-user",
        "--max-tpot-ms",
        "50",
        "--percentile",
        "p90",
        "--serving",
        "both",
        "--study",
        "serving-parity",
        "--recheck",
        "2",
        "--samples",
        "100",
    ]
    local = io.StringIO()
    with contextlib.redirect_stdout(local):
        assert main(["search", *argv, "--storage", str(tmp_path / "s.log")]) == 0
    args = _search_args(argv)
    args.server = server.target
    remote = io.StringIO()
    with contextlib.redirect_stdout(remote):
        assert remote_search(args) == 0
    expected = local.getvalue().replace(str(tmp_path / "s.log"), str(server.storage))
    assert remote.getvalue() == expected
    assert "goodput at p90" in expected and "wins" in expected and "max_tpot" in expected


def _strip_elapsed(doc):
    if isinstance(doc, dict):
        return {
            k: _strip_elapsed(v)
            for k, v in doc.items()
            if k not in ("storage", "elapsed_s", "elapsed_seconds", "study")
        }
    if isinstance(doc, list):
        return [_strip_elapsed(v) for v in doc]
    return doc


def _json_of(run) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run() == 0
    return json.loads(out.getvalue().split("\nchosen plan")[0])


def test_remote_precision_search_equals_local(server, client, tmp_path):
    """--precisions travels as SearchOptions.precisions: the same JSON front (each plan with
    its precision) and typed PlanMetrics.precision; a format the chip lacks is
    INVALID_ARGUMENT naming options.precisions."""
    from plena_opt.cli.main import main
    from plena_opt.cli.remote import remote_search, search_request_from_args

    argv = ["--model", "llama-3.2-1b", "--chip", "h200-sxm", "--noc", "hgx-h200x8",
            "--precisions", "bf16,fp8", "--batch-sizes", "4,32", "--study", "prec-parity",
            "--recheck", "1", "--samples", "50", "--seed", "2", "--json"]  # fmt: skip
    local = _json_of(lambda: main(["search", *argv, "--storage", str(tmp_path / "p.log")]))
    args = _search_args(argv)
    args.server = server.target
    remote = _json_of(lambda: remote_search(args))
    assert _strip_elapsed(remote) == _strip_elapsed(local)
    assert {e["plan"]["precision"] for e in local["front"]} <= {"bf16", "fp8"}
    reply = client.search(search_request_from_args(args), timeout=120)
    assert [m.precision for m in reply.front] == [e["plan"]["precision"] for e in local["front"]]
    bad = search_request_from_args(_search_args([*argv[:6], "--precisions", "bf16,fp4"]))
    with pytest.raises(PlenaRpcError) as err:
        client.search(bad, timeout=60)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "options.precisions" in str(err.value) and "h200-sxm" in str(err.value)


def test_remote_serving_document_is_si_and_equals_local(server, client, tmp_path):
    """SearchResult.serving_json is the local --json "serving" member (SI: seconds)."""
    from plena_opt.cli.main import main
    from plena_opt.cli.remote import remote_search, search_request_from_args

    argv = ["--model", "llama-3.2-1b", "--noc", "illustrative_gpu_node_8",
            "--fixed-bandwidth-gbs", "1000", "--batch-sizes", "8", "--input-seq", "256",
            "--output-seq", "8", "--objectives", "ttft,tps-per-device,tps-per-user",
            "--serving", "both", "--max-tpot-ms", "40", "--recheck", "1", "--samples", "50",
            "--seed", "1", "--study", "si-parity", "--json"]  # fmt: skip
    local = _json_of(lambda: main(["search", *argv, "--storage", str(tmp_path / "s.log")]))
    args = _search_args(argv)
    args.server = server.target
    remote = _json_of(lambda: remote_search(args))
    assert _strip_elapsed(remote["serving"]) == _strip_elapsed(local["serving"])
    reply = client.search(search_request_from_args(args), timeout=120)
    from plena_opt.api.serving_wire import decisions_from_proto

    assert _strip_elapsed(json.loads(reply.serving_json)) == _strip_elapsed(local["serving"])
    typed = decisions_from_proto(reply.serving)  # the typed message, the same document
    assert _strip_elapsed(typed) == _strip_elapsed(local["serving"])
    cmp = reply.serving.comparison
    assert cmp.verdict == local["serving"]["comparison"]["verdict"] and not cmp.partial
    assert cmp.disaggregated.front[0].kv_transfer_seconds > 0
    assert reply.serving.sla.max_tpot_seconds == 0.04
    assert typed["sla"]["max_tpot_seconds"] == 0.04
    front = typed["comparison"]["disaggregated"]["front"]
    assert front and all("kv_transfer_seconds" in e and "ttft_seconds" in e for e in front)
    assert "ttft_ms" not in json.dumps(typed) and "tpot_ms" not in json.dumps(typed)
    # the recommendation (issue 25): the same locally, in the remote CLI and in the typed reply
    assert remote["recommendation"] == local["recommendation"] is not None
    rec = reply.recommendation
    assert rec.kind == local["recommendation"]["kind"] and rec.key == local["recommendation"]["key"]
    assert rec.export_command == local["recommendation"]["export_command"]
    assert rec.basis == local["recommendation"]["figures"]["basis"]
    assert rec.tps_per_device == local["recommendation"]["figures"]["tps_per_device"]
