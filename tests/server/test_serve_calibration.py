"""``plena-opt serve --calibration overlay.json`` (issue 23, item 6): a real server started with
an overlay prices every request under load with it (Estimate and a search under load), only for
the engine and chip it names; a damaged overlay is refused at start naming the flag."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from plena_client import PlenaClient, pb
from plena_server.process import ServerProcess

from plena_opt.cli.main import main
from tests.calibration_support import one_constant_overlay

SHIFT_S = 0.002  # the overlay's host time per vLLM step on an H100 (hand-made, not fitted)
OVERLAY = one_constant_overlay("vllm", "h100-sxm", SHIFT_S)


def _system() -> pb.SystemSpec:
    s = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b"))
    s.noc.name, s.chip.name = "hgx-h100x8", "h100-sxm"
    return s


WORKLOAD = pb.Workload(batch_size=16, input_seq_len=1024, output_seq_len=128)


def _problem():
    from plena_opt import api

    return api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                            input_seq=1024, output_seq=128, batch_size=16)  # fmt: skip


@pytest.fixture(scope="module")
def calibrated_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("calserve")
    path = folder / "overlay.json"
    path.write_text(json.dumps(OVERLAY))
    with ServerProcess(folder / "studies.log", "--calibration", str(path)) as proc:
        yield proc.target


def test_every_estimate_under_load_is_priced_with_the_overlay(calibrated_server):
    from plena_opt import api
    from plena_opt.estimate.plan import Plan

    def under_load(client: PlenaClient, engine: str) -> pb.UnderLoadMetrics:
        load = pb.ServingLoad(concurrency=16, engine=engine)
        return client.estimate(_system(), pb.Plan(tp=8), WORKLOAD, load=load).under_load

    with PlenaClient(calibrated_server) as client:
        vllm, sglang = under_load(client, "vllm"), under_load(client, "sglang")
    assert vllm.host_step_seconds == pytest.approx(SHIFT_S)
    base = api.serve_under_load(_problem(), Plan(tp=8), "vllm", concurrency=16, batch=16)
    assert base.host_step_seconds == 0.0  # this process has no overlay
    assert vllm.steady.tpot_seconds == pytest.approx(base.steady.tpot_seconds + SHIFT_S, rel=0.05)
    # another engine's constant is not the overlay's
    assert sglang.host_step_seconds == 0.0


def test_a_search_under_load_is_priced_with_the_overlay(calibrated_server):
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.estimate.plan import Plan
    from plena_opt.search.request import SearchRequest

    req = pb.SearchRequest(system=_system(), workload=WORKLOAD, load=pb.ServingLoad(concurrency=16))
    req.options.trials, req.options.study_name = 40, "calibrated-load"
    req.options.objectives.extend(["ttft", "tps-per-device"])
    with PlenaClient(calibrated_server) as client:
        reply = client.search(req)
    problem = _problem()
    ev = loaded_factory(problem.evaluator, problem, SearchRequest(concurrency=16))(16)
    assert reply.front
    for m in reply.front:
        plan = Plan(**{f: getattr(m.plan, f) for f in ("tp", "ep", "dp", "pp", "cp")})
        plan = replace(plan, comm_overlap=m.plan.comm_overlap or plan.comm_overlap)
        local = ev.evaluate(plan).under_load["tpot_mean_seconds"]  # no overlay here
        assert m.under_load.tpot_mean_seconds == pytest.approx(local + SHIFT_S, rel=0.05)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not JSON"),
        (json.dumps({**OVERLAY, "version": 2}), "calibration.version"),
        (json.dumps({**OVERLAY, "constants": [{**OVERLAY["constants"][0], "value": -1.0}]}),
         "calibration.constants.0.value"),
    ],
)  # fmt: skip
def test_a_damaged_overlay_is_refused_at_start(tmp_path, capsys, text, words):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    argv = ["serve", "--port", "0", "--storage", str(tmp_path / "s.log"), "--calibration"]
    assert main([*argv, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --calibration {bad}: ") and words in err
    assert "Traceback" not in err
    assert main([*argv, str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith("error: --calibration ")
