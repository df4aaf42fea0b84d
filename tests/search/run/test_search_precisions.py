"""Precision as a search knob (issue 16): ``--precisions`` searches the format with the plan."""

from __future__ import annotations

import csv
import json

import numpy as np
import optuna
import pytest

from plena_opt.cli.main import main
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.space.space import PlanSpace, Point
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import scored_trials

GPU = ["--model", "llama-3.2-1b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]


def _problem(**kw) -> ProblemSpec:
    return ProblemSpec(model="llama-3.2-1b", chip="h200-sxm", noc="hgx-h200x8", memory=None, **kw)


def test_space_has_one_point_per_plan_and_precision():
    base = PlanSpace(8, [4, 16], lambda plan: None)
    space = PlanSpace(8, [4, 16], lambda plan: None, ["bf16", "fp8"])
    assert len(space) == 2 * len(base)
    assert len({p.key for p in space.points}) == len(space)
    assert space.distributions()["precision"].choices == ("bf16", "fp8")
    assert "precision" not in base.distributions()
    for p in space.points[:: max(len(space) // 20, 1)]:
        again, why = space.point_from_params(space.params(p))
        assert again == p and why is None
        assert Point.from_dict(p.to_dict()) == p and p.key.endswith("-" + p.precision)
    # without --precisions the keys and params stay as before
    assert base.points[0].key.endswith("-b4") and "precision" not in base.points[0].to_dict()


def _plan_key(e) -> str:
    """The point key of a front entry without its precision."""
    return Point.from_dict({k: v for k, v in e.plan.items() if k != "precision"}).key


def _minimised(entries, signs):
    return np.array([[e.ttft_ms, e.tps, e.energy_j_per_token] for e in entries]) * signs


def test_front_equals_the_front_over_each_precision_searched_alone():
    """The union front of separate --precision runs (scored independently) is the front."""
    req = SearchRequest(
        problem=_problem(), storage=":memory:", sampler="exhaustive", batch_sizes=[4, 64],
        precisions=["bf16", "fp8"],
    )  # fmt: skip
    res = run_search(req)
    assert {e.plan["precision"] for e in res.scored} == {"bf16", "fp8"}
    every = []
    for prec in ("bf16", "fp8"):
        alone = run_search(
            req.model_copy(update={"precisions": None, "problem": _problem(precision=prec)})
        )
        every += [(prec, e) for e in alone.scored if e.feasible]
    assert len(every) == sum(1 for e in res.scored if e.feasible)
    signs = np.array([1.0, -1.0, 1.0])
    mask = pareto_mask(_minimised([e for _, e in every], signs))
    brute = {(p, _plan_key(e)) for (p, e), keep in zip(every, mask, strict=True) if keep}
    got = {(e.plan["precision"], _plan_key(e)) for e in res.front}
    assert got == brute
    # fp8 halves the weight bytes of the same plan
    by = {(e.plan["precision"], _plan_key(e)): e for e in res.scored}
    plan = next(lbl for p, lbl in by if p == "fp8")
    assert by[("fp8", plan)].weight_bytes_per_device == pytest.approx(
        by[("bf16", plan)].weight_bytes_per_device / 2, rel=1e-3
    )


def test_trials_carry_precision_as_a_param_one_trial_per_point(tmp_path):
    store = str(tmp_path / "s.log")
    req = SearchRequest(
        problem=_problem(), storage=store, sampler="exhaustive", precisions=["bf16", "fp8"],
        study="p",
    )  # fmt: skip
    res = run_search(req)
    study = optuna.load_study(study_name="p", storage=open_storage(store))
    trials = scored_trials(study)
    assert len(trials) == res.legal_points == len(study.trials)
    assert {t.params["precision"] for t in trials} == {"bf16", "fp8"}
    assert all(t.user_attrs["plan"]["precision"] == t.params["precision"] for t in trials)
    assert len({t.user_attrs["point_key"] for t in trials}) == len(trials)
    again = run_search(req)  # resume: nothing scored twice
    assert again.evaluated == 0 and again.reused == len(trials)


def test_tpe_suggests_precisions():
    req = SearchRequest(
        problem=_problem(), storage=":memory:", sampler="tpe", trials=30, seed=1,
        batch_sizes=[4, 16, 64], precisions=["bf16", "fp8"], compare_exact=False,
    )  # fmt: skip
    res = run_search(req)
    assert {e.plan["precision"] for e in res.scored} == {"bf16", "fp8"}


def test_cli_table_json_csv_and_export_show_the_precision(tmp_path, capsys):
    out = tmp_path / "front.csv"
    argv = ["search", *GPU, "--precisions", "bf16,fp8", "--storage", ":memory:", "--recheck",
            "0", "--quiet"]  # fmt: skip
    assert main([*argv, "--csv", str(out), "--export-dir", str(tmp_path / "ex")]) == 0
    text = capsys.readouterr().out
    head = text.splitlines()[[i for i, s in enumerate(text.splitlines()) if "plan " in s][0]]
    assert "precision" in head and "--precision " in text
    rows = list(csv.DictReader(out.open()))
    assert {r["precision"] for r in rows} <= {"bf16", "fp8"} and rows
    launch = json.loads((tmp_path / "ex" / "plan0" / "launch.json").read_text())
    vllm = next(c for c in launch if c["engine"] == "vllm")
    if rows[0]["precision"] == "fp8":
        assert vllm["argv"][-2:] == ["--quantization", "fp8"]
    else:
        assert "--quantization" not in vllm["argv"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    assert all(e["plan"]["precision"] in ("bf16", "fp8") for e in doc["front"])


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--precisions", "bf16,fp4"], ["--precisions fp4", "h200-sxm", "fp4"]),
        (["--precisions", "bf16,fp9"], ["--precisions", "fp9"]),
        (["--precisions", "fp8,fp8"], ["--precisions", "repeat"]),
        (["--precisions", "fp8", "--precision", "bf16"], ["--precision and --precisions"]),
        (["--precisions", "bf16,fp4", "--serving", "both"], ["--precisions fp4", "h200-sxm"]),
    ],
)
def test_bad_precisions_are_refused_naming_the_field(flags, words, capsys):
    rc = main(["search", *GPU, *flags, "--storage", ":memory:", "--recheck", "0", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "Traceback" not in err
    for w in words:
        assert w in err


def test_export_writes_quantization_and_kv_cache_dtype(capsys):
    key = "tp8-ep1-dp1-pp1-cp1-replace-none-b16-fp8"
    m = ["--model", "llama-3.1-8b"]
    assert main(["export", key, "--format", "json", "--kv-precision", "fp8", *m]) == 0
    docs = {c["engine"]: c for c in json.loads(capsys.readouterr().out) if c["role"] == "serve"}

    def pairs(argv):
        return list(zip(argv, argv[1:], strict=False))

    assert {("--quantization", "fp8"), ("--kv-cache-dtype", "fp8")} <= set(
        pairs(docs["vllm"]["argv"])
    )
    assert {("--quantization", "fp8"), ("--kv-cache-dtype", "fp8_e4m3")} <= set(
        pairs(docs["sglang"]["argv"])
    )
    assert main(["export", key.replace("fp8", "fp4"), "--format", "json", *m]) == 0
    docs = {c["engine"]: c for c in json.loads(capsys.readouterr().out) if c["role"] == "serve"}
    assert "--quantization" not in docs["vllm"]["argv"]
    assert any("fp4" in c for c in docs["vllm"]["notes"])  # a pre-quantized checkpoint
    assert main(["export", key.replace("fp8", "fp9"), *m]) == 2
    assert "unknown precision 'fp9'" in capsys.readouterr().err


def test_workers_price_each_chunk_in_its_own_precision(tmp_path):
    """search --workers: a chunk mixing formats is scored per (batch, precision); the stored
    front equals the one-process front."""
    from plena_opt import api
    from plena_opt.search.storage.trials import front_trials

    url = f"sqlite:///{tmp_path / 'w.db'}"
    req = SearchRequest(
        problem=_problem(), storage=url, study="pw", sampler="exhaustive", batch_sizes=[4, 64],
        precisions=["bf16", "fp8"],
    )  # fmt: skip
    info, _ = api.run_local_workers(req, 2, heartbeat_s=5, chunk_plans=7)
    single = run_search(req.model_copy(update={"storage": ":memory:", "study": None}))
    study = optuna.load_study(study_name="pw", storage=open_storage(url))
    metrics = {t.user_attrs["point_key"]: t.user_attrs["metrics"] for t in study.trials}
    assert len(metrics) == info.legal_points == single.legal_points
    for e in single.scored:  # every plan priced in its own format, whichever chunk held it
        m = metrics[Point.from_dict(e.plan).key]
        assert (m["ttft_ms"], m["tps"], m["weight_bytes_per_device"]) == (
            e.ttft_ms,
            e.tps,
            e.weight_bytes_per_device,
        )
    stored = {(t.user_attrs["point_key"], tuple(t.values)) for t in front_trials(study)}
    want = {
        (Point.from_dict(e.plan).key, (e.ttft_ms, e.tps, e.energy_j_per_token))
        for e in single.front
    }  # sets: equal-valued plans (overlap at tp = 1) tie in either order
    assert stored == want


def test_serving_comparison_searches_the_formats_one_per_deployment(tmp_path, capsys):
    """``--precisions`` with ``--serving both``: every front deployment names its format, both
    pools of a disaggregated one the same; the stored study and the launch files carry it."""
    store = str(tmp_path / "s.log")
    argv = ["search", *GPU, "--precisions", "bf16,fp8", "--serving", "both", "--batch-sizes",
            "8,64", "--storage", store, "--study", "sp", "--recheck", "0", "--quiet", "--json",
            "--export-dir", str(tmp_path / "ex")]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    cmp = doc["serving"]["comparison"]
    dis, agg = cmp["disaggregated"]["front"], cmp["aggregated"]["front"]
    assert dis and agg and "verdict" in cmp
    assert all(e["prefill"]["precision"] == e["decode"]["precision"] for e in dis)
    assert {e["plan"]["precision"] for e in agg} | {e["prefill"]["precision"] for e in dis} <= {
        "bf16", "fp8"
    }  # fmt: skip
    trials = optuna.load_study(study_name="sp-serving", storage=open_storage(store)).trials
    for t in trials:
        key = "precision" if t.params["serving"] == "aggregated" else "prefill_precision"
        assert t.params[key] in ("bf16", "fp8")
    e0 = dis[0]
    launch = json.loads((tmp_path / "ex" / "disaggregated0" / "launch.json").read_text())
    vllm = [c for c in launch if c["engine"] == "vllm" and c["role"] in ("prefill", "decode")]
    assert len(vllm) == 2
    for c in vllm:
        assert ("--quantization" in c["argv"]) == (e0["prefill"]["precision"] == "fp8")
