"""The library API (``import plena_opt``): the use cases a Python script calls, the same ones
the CLI and the server call, so a script gets the CLI's numbers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import plena_opt as po
from plena_opt import api
from plena_opt.errors import PlenaInputError


def test_every_exported_name_resolves_and_matches_the_use_case_layer():
    assert set(po._API) <= set(api.__all__)
    for name in po._API:
        assert getattr(po, name) is getattr(api, name)
    with pytest.raises(AttributeError):
        po.no_such_name  # noqa: B018


def test_readme_example_prices_a_plan_like_the_cli(capsys):
    from plena_opt.cli.main import main

    problem = po.load_problem(model="llama-3.1-8b", noc="illustrative_gpu_node_8")
    best = po.estimate_plan(problem, po.Plan(tp=8))
    assert main(["estimate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8",
                 "--tp", "8", "--json"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out == best.to_text(as_json=True) + "\n"
    doc = json.loads(out)
    assert doc["ttft_seconds"] == best.metrics.ttft_seconds == best.document["ttft_seconds"]
    assert doc["tps"] == best.metrics.tps


def test_problem_from_inline_documents_matches_the_named_one():
    from plena_opt.models import builtin_config

    named = po.load_problem(model="llama-3.1-8b", noc="illustrative_gpu_node_8")
    cfg = builtin_config("llama-3.1-8b")
    inline = po.load_problem(
        model=po.InlineDocument(document=cfg, name="llama-3.1-8b"),
        noc="illustrative_gpu_node_8",
    )
    plan = po.Plan(tp=2, pp=4)
    assert po.estimate_plan(inline, plan).document == po.estimate_plan(named, plan).document
    spec = po.ProblemSpec(model=po.InlineDocument(document=cfg, name="my model"))
    key = spec.identity()["model_path"]
    assert key.startswith("inline-") and key.endswith("/my_model.json")
    assert spec.identity()["model"] is None


def test_enumerate_plans_are_legal_and_cover_the_devices():
    problem = po.load_problem(model="llama-3.1-8b", noc="illustrative_gpu_node_8")
    plans = po.enumerate_plans(problem)
    assert plans and all(p.world_size == 8 for p in plans)
    assert len(set(plans)) == len(plans)
    ev = problem.evaluator()
    for p in plans[:5]:
        ev.check(p)


def test_bad_problem_field_is_named():
    with pytest.raises(PlenaInputError) as err:
        po.load_problem(batch_size=0)
    assert err.value.field == "batch_size"
    with pytest.raises(PlenaInputError) as err:
        po.load_problem(model="no-such-model")
    assert err.value.field == "model"


def test_simulate_plan_document_is_the_cli_document(capsys):
    from plena_opt.cli.main import main

    problem = po.load_problem(model="llama-3.1-8b", noc="illustrative_gpu_node_8")
    sim = po.simulate_plan(problem, po.Plan(tp=2, pp=4), noise="sigma=0.05", samples=20)
    argv = ["simulate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8",
            "--tp", "2", "--pp", "4", "--samples", "20", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    doc.pop("trace_paths")
    assert doc == json.loads(json.dumps(sim.document()))
    assert set(sim.trace_documents()) >= {"deterministic"}


def test_import_plena_opt_loads_no_heavy_module():
    code = "import sys, plena_opt; print(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "('numpy', 'scipy', 'optuna', 'grpc', 'pydantic', 'deepstack')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
