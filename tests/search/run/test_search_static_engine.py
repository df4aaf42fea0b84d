"""``plena-opt search --engine E`` without a load (issue 23 item 4 "Everywhere"): a static search
whose plans are priced with E's kernels (gpt-oss's MXFP4 experts on E's MoE kernel,
TensorRT-LLM's fused input quantisation), as ``estimate --engine E`` prices them; the same front
through the CLI, gRPC (``workload.engine`` without a load) and the web planner (``engine``
without a ``percentile``); ``--engine-version`` / ``--range-ratio`` without a load stay refused
naming the flag; an engine on a PLENA chip is refused naming ``engine``; a study of one engine
is not resumed by a search of another."""

from __future__ import annotations

import json
import shlex
import time

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest

WORKLOAD = ["--input-seq", "1024", "--output-seq", "16", "--precision", "fp4"]
SEARCH = ["search", "--model", "gpt-oss-120b", "--chip", "b200", "--noc", "hgx-b200x8",
          *WORKLOAD, "--batch-sizes", "4", "--trials", "50", "--recheck", "0"]  # fmt: skip


def _search(capsys, *extra: str) -> dict:
    store = [] if "--server" in extra or "--storage" in extra else ["--storage", ":memory:"]
    assert main([*SEARCH, *store, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _front(entries: list[dict]) -> dict[str, tuple[float, float]]:
    return {e["label"]: (e["ttft_seconds"], e["tps"]) for e in entries}


def test_the_engine_prices_the_static_front(capsys) -> None:
    plain, trt = _search(capsys), _search(capsys, "--engine", "trtllm")
    assert trt["under_load"] is None and trt["front"]
    assert _front(trt["front"]) != _front(plain["front"])  # TRT-LLM's kernels: other figures
    assert _search(capsys, "--engine", "vllm")["front"] == plain["front"]  # vLLM: the default


def test_the_recommended_estimate_line_carries_the_engine(capsys) -> None:
    assert main([*SEARCH, "--storage", ":memory:", "--engine", "trtllm"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("estimate it:"))
    argv = shlex.split(line.split("plena-opt ", 1)[1])
    assert argv[-2:] == ["--engine", "trtllm"], line
    assert "simulate it:" in out and out.count("--engine trtllm") == 2
    trt = _search(capsys, "--engine", "trtllm")
    rec = next(e for e in trt["front"] if e["label"] in out)
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ttft_seconds"] == rec["ttft_seconds"]


@pytest.mark.parametrize(
    ("flags", "words"),
    [(["--engine-version", "1.3.0"], "--engine-version needs --concurrency or --request-rate"),
     (["--engine", "trtllm", "--range-ratio", "0.5"], "--range-ratio needs --concurrency"),
     (["--engine", "sglang", "--chip", "plena-default"], "engine 'sglang' picks a serving")],
)  # fmt: skip
def test_what_a_static_search_refuses(capsys, flags, words) -> None:
    assert main([*SEARCH, "--storage", ":memory:", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "Traceback" not in err, err


def test_a_study_of_one_engine_is_not_resumed_by_another(tmp_path, capsys) -> None:
    spec = ProblemSpec(model="gpt-oss-120b", chip="b200", noc="hgx-b200x8")
    names = {e: SearchRequest(problem=spec, engine=e).problem.fingerprint()
             for e in (None, "vllm", "sglang", "trtllm")}  # fmt: skip
    assert names[None] == names["vllm"] and len({*names.values()}) == 3, names
    store = str(tmp_path / "studies.log")
    runs = [_search(capsys, "--storage", store, *e) for e in ([], ["--engine", "trtllm"])]
    assert runs[0]["study_name"] != runs[1]["study_name"]
    assert runs[1]["reused"] == 0 and _front(runs[0]["front"]) != _front(runs[1]["front"])
    with pytest.raises(ValueError, match="differ"):
        SearchRequest(problem=spec.model_copy(update={"engine": "sglang"}), engine="trtllm")


def _grpc_front(server: str, engine: str, chip: str = "b200") -> list[dict]:
    s = pb.SystemSpec(model=pb.ModelSource(name="gpt-oss-120b"))
    s.noc.name, s.chip.name = "hgx-b200x8", chip
    w = pb.Workload(input_seq_len=1024, output_seq_len=16, precision="fp4", batch_size=4,
                    engine=engine)  # fmt: skip
    request = pb.SearchRequest(system=s, workload=w)
    request.options.trials, request.options.batch_sizes[:] = 50, [4]
    with PlenaClient(server) as client:
        reply = client.search(request)
    return [{"label": m.label, "ttft_seconds": m.ttft_seconds, "tps": m.tps} for m in reply.front]


def test_grpc_and_the_web_planner_give_the_clis_front(server, capsys) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    local = _front(_search(capsys, "--engine", "trtllm")["front"])
    assert _front(_grpc_front(server, "trtllm")) == local
    remote = _search(capsys, "--engine", "trtllm", "--server", server)  # the CLI sends it
    assert _front(remote["front"]) == local
    web = TestClient(create_app(storage=None), base_url="http://127.0.0.1")
    body = {"model": "gpt-oss-120b", "chip": "b200", "noc": "hgx-b200x8", "input_seq": 1024,
            "output_seq": 16, "precision": "fp4", "batch_sizes": "4", "trials": 50,
            "serving": "aggregated", "engine": "trtllm",
            "objectives": ["ttft", "tps", "energy"]}  # fmt: skip
    r = web.post("/api/planner/jobs", json=body)
    assert r.status_code == 200, r.text
    end = time.monotonic() + 120
    while (v := web.get(f"/api/planner/jobs/{r.json()['id']}").json())["state"] == "running":
        assert time.monotonic() < end
        time.sleep(0.2)
    assert v["state"] == "done", v.get("error")
    assert "--engine trtllm" in v["command"] and "--concurrency" not in v["command"]
    assert _front([{**f, **f["figures"]} for f in v["progress"]["front"]]) == local


def test_grpc_refuses_an_engine_on_a_plena_chip(server) -> None:
    with pytest.raises(PlenaRpcError) as err:
        _grpc_front(server, "trtllm", chip="plena-default")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == "workload.engine" and "PLENA" in str(err.value), err.value
