"""A search under load over gRPC (issue 23): ``SearchRequest.load`` → the front's typed
``PlanMetrics.under_load`` and ``SearchResult.under_load``; ``plena-opt search --server …
--concurrency`` prints what local mode prints; bad load fields name ``load.<field>``."""

from __future__ import annotations

import contextlib
import io
import json

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main

ARGV = ["search", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
        "--input-seq", "2048", "--output-seq", "256", "--batch-sizes", "32", "--trials", "40",
        "--objectives", "ttft,tps-per-device", "--concurrency", "32", "--range-ratio", "0.8",
        "--max-ttft-ms", "500", "--percentile", "p90", "--quiet"]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from plena_server.app import start_server
    from plena_server.limits import ServerLimits

    store = tmp_path_factory.mktemp("searchload") / "studies.log"
    running = start_server("127.0.0.1", 0, str(store), workers=2, limits=ServerLimits())
    yield f"127.0.0.1:{running.port}", str(store)
    running.drain(1)


def _out(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


@pytest.mark.parametrize("as_json", [False, True])
def test_remote_search_under_load_prints_what_local_prints(server, tmp_path, as_json):
    target, store = server
    extra = ["--json"] if as_json else []
    study = f"load-parity-{as_json}"
    local = _out([*ARGV, *extra, "--study", study, "--storage", str(tmp_path / "l.log")])
    remote = _out([*ARGV, *extra, "--study", study, "--server", target])
    if not as_json:
        assert remote == local.replace(str(tmp_path / "l.log"), store)
        assert "under load (32 concurrent clients" in remote
        return
    a, b = json.loads(local), json.loads(remote)
    for doc in (a, b):
        for key in ("elapsed_seconds", "storage"):
            doc.pop(key, None)
    assert a == b and a["front"] and a["under_load"]["percentile"] == "p90"
    assert all(e["under_load"]["ttft_seconds"] <= 0.5 for e in a["front"])


def test_the_front_carries_typed_under_load_figures(server):
    target, _ = server
    req = pb.SearchRequest(
        system=pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b")),
        workload=pb.Workload(batch_size=32, input_seq_len=2048, output_seq_len=256),
        load=pb.ServingLoad(concurrency=32, range_ratio=0.8, engine="sglang"),
    )
    req.system.noc.name, req.system.chip.name = "hgx-h100x8", "h100-sxm"
    req.options.trials, req.options.study_name = 40, "typed-load"
    with PlenaClient(target) as client:
        reply = client.search(req)
    assert reply.under_load.engine == "sglang" and reply.under_load.concurrency == 32
    assert reply.front
    for m in reply.front:
        u = m.under_load
        assert not u.refused and u.percentile == "p50"
        assert m.ttft_seconds == pytest.approx(u.ttft_seconds)
        assert u.static_ttft_seconds > u.ttft_seconds > 0 and u.static_tps > 0
        assert m.tps_per_sequence == pytest.approx(1 / u.tpot_seconds)


@pytest.mark.parametrize(
    ("load", "field"),
    [
        ({"concurrency": -1}, "load.concurrency"),
        ({"concurrency": 4, "request_rate": 2.0}, "load.request_rate"),
        ({"concurrency": 4, "range_ratio": 2.0}, "load.range_ratio"),
        ({"concurrency": 4, "engine_version": "1"}, "load.engine_version"),
    ],
)
def test_bad_search_load_fields_are_invalid_argument(server, load, field):
    target, _ = server
    req = pb.SearchRequest(
        system=pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b")),
        load=pb.ServingLoad(**load),
    )
    req.system.noc.name, req.system.chip.name = "hgx-h100x8", "h100-sxm"
    req.options.trials = 1
    with PlenaClient(target) as client, pytest.raises(PlenaRpcError) as err:
        client.search(req)
    assert (err.value.code, err.value.field) == (grpc.StatusCode.INVALID_ARGUMENT, field)
