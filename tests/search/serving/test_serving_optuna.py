"""Disaggregated deployments searched by an Optuna study (``--serving-sampler optuna``)."""

from __future__ import annotations

import json

import numpy as np
import optuna
import pytest

from plena_opt import api
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.request import SearchRequest
from plena_opt.search.serving.disaggregated import ServingSpace, pair_points
from plena_opt.search.serving.serving_compare import compare_serving
from plena_opt.search.storage.storage import open_storage

OBJ = ["ttft", "tps-per-device", "tps-per-user"]
GPU = ["--model", "llama-3.2-1b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]


def _request(store: str, **kw) -> SearchRequest:
    problem = ProblemSpec(
        model="llama-3.2-1b", chip="h200-sxm", noc="hgx-h200x8", memory=None, input_seq=512,
        output_seq=16,
    )  # fmt: skip
    return SearchRequest(
        problem=problem, sampler="exhaustive", batch_sizes=[8, 64], serving="disaggregated",
        objectives=list(OBJ), serving_sampler="optuna", trials=40, seed=3, storage=store,
        study="o", max_tpot_ms=6.0, **kw,
    )  # fmt: skip


def _run(req: SearchRequest):
    problem = req.problem.load()
    result = api.search_plans(req, problem)
    return api.decide_serving(result, [], req, problem)["comparison"], problem


def test_each_trial_is_a_scored_deployment_on_or_behind_the_exact_front():
    req = _request(":memory:", precisions=["bf16", "fp8"])
    problem = req.problem.load()
    sla = {"max_ttft_seconds": None, "max_tpot_seconds": 6e-3, "min_tps_per_seq": None}
    space = ServingSpace.build(problem, [8, 64], sla, precisions=["bf16", "fp8"])
    space.budget, space.seed = 60, 1
    doc = compare_serving(space, OBJ, "disaggregated", sampler="optuna")
    res = space.optuna
    assert doc["disaggregated"]["evaluated"] == len(res.params) == 60 and all(res.new)
    assert res.suggested >= 60
    keys = {tuple(sorted(p.items())) for p in res.params}
    assert len(keys) == 60  # each deployment scored once
    n, out = problem.noc.num_devices, problem.workload.output_seq_len
    by_size = {}
    for w in space.workers:
        by_size.setdefault((w.precision, w.devices), []).append(w)
    # every scored deployment is the pair its params name, scored as the exhaustive path does
    from plena_opt.search.serving.disaggregated import distinct

    ws = distinct([w for w in space.workers if w.fits is not False])
    from plena_opt.search.serving.serving_optuna import PairChoices

    choices = PairChoices.of(ws)
    for i, prm in enumerate(res.params):
        prec = prm["precision"]
        p = choices.by_format[prec][prm["prefill_devices"]]
        d = choices.by_format[prec][prm["decode_devices"]]
        p = p[prm[choices.param("prefill", prec, prm["prefill_devices"])]]
        d = d[prm[choices.param("decode", prec, prm["decode_devices"])]]
        one = pair_points(problem.noc, [p], [d], out, n, sla)
        for k, v in one.figures.items():
            assert np.array_equal(v[:1], res.points.figures[k][i : i + 1], equal_nan=True), k
        assert one.feasible[0] == res.points.feasible[i]
    # no deployment of the Optuna front beats the exhaustive front
    exact = compare_serving(space, OBJ, "disaggregated", sampler="exhaustive")
    ex = np.array([[e["ttft_seconds"], -e["tps_per_device"], -e["tps_per_user"]]
                   for e in exact["disaggregated"]["front"]])  # fmt: skip
    for e in doc["disaggregated"]["front"]:
        v = np.array([e["ttft_seconds"], -e["tps_per_device"], -e["tps_per_user"]])
        both = np.vstack([ex, v])
        assert not pareto_mask(both)[-1] or any(np.allclose(v, r) for r in ex)
        assert e["tpot_seconds"] <= 6e-3


def test_trials_are_stored_once_with_constraints_and_plan_params_and_resume(tmp_path):
    store = str(tmp_path / "s.log")
    first, _ = _run(_request(store))
    assert first["sampler"] == "optuna" and first["disaggregated"]["evaluated"] == 40
    assert "_scored" not in first
    study = optuna.load_study(study_name="o-serving", storage=open_storage(store))
    dis = [t for t in study.trials if t.params["serving"] == "disaggregated"]
    assert len(dis) == 40
    for t in dis:
        for role in ("prefill", "decode"):
            for k in ("tp", "ep", "dp", "pp", "cp", "batch_size", "workers"):
                assert f"{role}_{k}" in t.params
        assert "max_tpot" in t.user_attrs["constraints"] and t.system_attrs["constraints"]
        meets = t.user_attrs["tpot_seconds"] <= 6e-3
        assert (t.user_attrs["constraints"]["max_tpot"] <= 0) == meets
        assert "sampler_params" in t.user_attrs
    second, _ = _run(_request(store).model_copy(update={"trials": 80}))
    assert second["disaggregated"]["evaluated"] == 40  # 40 new ones after the 40 stored
    study = optuna.load_study(study_name="o-serving", storage=open_storage(store))
    dis2 = [t for t in study.trials if t.params["serving"] == "disaggregated"]
    keys = [json.dumps(t.user_attrs["sampler_params"], sort_keys=True) for t in dis2]
    assert len(dis2) == 80 and len(set(keys)) == 80  # stored once each
    # the resumed deployments are part of the front the second run reports
    assert len(second["disaggregated"]["front"]) >= 1
    best1 = max(e["tps_per_device"] for e in first["disaggregated"]["front"])
    best2 = max(e["tps_per_device"] for e in second["disaggregated"]["front"])
    assert best2 >= best1
    # another seed is another pair search: the study is replaced, not resumed
    _run(_request(store).model_copy(update={"seed": 4}))
    study = optuna.load_study(study_name="o-serving", storage=open_storage(store))
    assert len([t for t in study.trials if t.params["serving"] == "disaggregated"]) == 40


def test_cli_serving_sampler_flag(capsys):
    argv = ["search", *GPU, "--serving", "both", "--serving-sampler", "optuna", "--trials", "30",
            "--batch-sizes", "8", "--storage", ":memory:", "--recheck", "0", "--quiet",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    cmp = doc["serving"]["comparison"]
    assert cmp["sampler"] == "optuna" and cmp["disaggregated"]["evaluated"] <= 30
    assert "verdict" in cmp
    with pytest.raises(SystemExit) as exc:  # argparse choices: usage error, exit 2
        main([*argv[:-1], "--serving-sampler", "bogus"])
    assert exc.value.code == 2 and "--serving-sampler" in capsys.readouterr().err


def test_the_serving_sampler_travels_through_the_proto_request(tmp_path):
    import argparse

    from plena_server.limits import ServerLimits
    from plena_server.search_request import search_request

    from plena_opt.cli import search_cmd
    from plena_opt.cli.remote import search_request_from_args

    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["search", *GPU, "--serving", "both", "--serving-sampler", "optuna"])
    msg = search_request_from_args(args)
    assert msg.options.serving_sampler == "optuna"
    req, _ = search_request(msg, str(tmp_path / "s.log"), ServerLimits())
    assert req.serving_sampler == "optuna" and req.serving == "both"
    msg.options.serving_sampler = "bogus"
    with pytest.raises(PlenaInputError, match="options.serving_sampler"):
        search_request(msg, str(tmp_path / "s.log"), ServerLimits())


def test_no_fitting_worker_gives_an_empty_search():
    from plena_opt.search.serving.serving_optuna import PairChoices, search_pairs

    res = search_pairs(PairChoices.of([]), None, OBJ, budget=10)
    assert len(res.points) == 0 and res.params == [] and res.suggested == 0
