"""Design space files and the hardware × plan co-design (issue 17)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.problem import InlineDocument, ProblemSpec
from plena_opt.search.codesign.codesign import joint_hypervolume, run_codesign
from plena_opt.search.codesign.design_space import DesignSpace, load_design_space
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.space.objectives import parse_objectives

BASE = ProblemSpec(model="llama-3.1-8b", noc="illustrative_ring_switch_32",
                   memory="fictional_stacked_dram", input_seq=512, output_seq=64)  # fmt: skip
SMALL = {
    "name": "small",
    "knobs": [
        {"name": "layers", "target": "problem.total_layers", "values": [10]},
        {"name": "conn", "target": "problem.connected_layers", "values": [1, 3],
         "cost_per_unit": 5},
        {"name": "l1", "target": "noc.layers.L1.link_bandwidth_gbytes_per_s",
         "range": {"start": 50, "stop": 200, "step": 150}, "cost_per_unit": 0.1},
        {"name": "groups", "target": "noc.layers.L2.shape.1", "values": [2, 4],
         "cost_per_unit": 80},
    ],
}  # fmt: skip


def _request() -> SearchRequest:
    return SearchRequest(problem=BASE, batch_sizes=[4, 32])


def test_schema_errors_name_the_field(tmp_path) -> None:
    bad = {**SMALL, "knobs": [{**SMALL["knobs"][1], "target": "problem.colour"}]}
    (tmp_path / "a.json").write_text(json.dumps(bad))
    with pytest.raises(PlenaInputError, match=r"knobs\.0\.target.*unknown target 'problem.colour'"):
        load_design_space(str(tmp_path / "a.json"))
    both = {**SMALL, "knobs": [{**SMALL["knobs"][2], "values": [1]}]}
    (tmp_path / "b.json").write_text(json.dumps(both))
    with pytest.raises(PlenaInputError, match="exactly one of values or range"):
        load_design_space(str(tmp_path / "b.json"))
    (tmp_path / "c.json").write_text(json.dumps({**SMALL, "knobs": SMALL["knobs"][1:2] * 2}))
    with pytest.raises(PlenaInputError, match="knob names must not repeat"):
        load_design_space(str(tmp_path / "c.json"))
    with pytest.raises(PlenaInputError, match="not a file or a shipped design space"):
        load_design_space("no-such-space")


def test_toml_file_and_grid(tmp_path) -> None:
    (tmp_path / "s.toml").write_text(
        'name = "t"\n[[knobs]]\nname = "conn"\ntarget = "problem.connected_layers"\n'
        "range = { start = 1, stop = 3, step = 1 }\ncost_per_unit = 2.5\n"
    )
    space = load_design_space(str(tmp_path / "s.toml"))
    assert [p["conn"] for p in space.points()] == [1, 2, 3]
    assert space.cost({"conn": 2}) == 5.0 and space.has_cost


def test_knobs_edit_the_profile_document_or_refuse() -> None:
    space = DesignSpace.model_validate(SMALL)
    spec = space.apply(BASE, {"layers": 10, "conn": 3, "l1": 200, "groups": 4})
    assert spec.connected_layers == 3 and isinstance(spec.noc, InlineDocument)
    layers = spec.noc.document["layers"]
    assert layers["L1"]["link_bandwidth_gbytes_per_s"] == 200 and layers["L2"]["shape"] == [1, 4]
    assert spec.load().evaluator().num_devices == 32
    missing = DesignSpace.model_validate(
        {
            "name": "m",
            "knobs": [{"name": "x", "target": "noc.layers.L9.hop_latency_ns", "values": [1]}],
        }  # fmt: skip
    )
    with pytest.raises(PlenaInputError, match="knob 'x'.*no field 'layers.L9'"):
        missing.apply(BASE, {"x": 1})


def test_joint_front_equals_brute_force_over_every_pair() -> None:
    space = DesignSpace.model_validate(SMALL)
    res = run_codesign(_request(), space)
    assert res.evaluated_points == space.size() == 8 and not res.refused
    objs = parse_objectives(_request().objectives)
    pool = []
    for point in space.points():
        req = _request().model_copy(update={"problem": space.apply(BASE, point),
                                            "sampler": "exhaustive"})  # fmt: skip
        r = run_search(req)
        for e in r.scored:
            if e.feasible:
                vals = [o.sign * getattr(e, o.name) for o in objs] + [space.cost(point)]
                pool.append((tuple(sorted(point.items())), e.label, e.plan["batch_size"], vals))
    mask = pareto_mask(np.array([p[3] for p in pool]))
    want = {p[:3] for p, keep in zip(pool, mask, strict=True) if keep}
    got = {(tuple(sorted(j.hardware.items())), j.plan.label, j.plan.plan["batch_size"])
           for j in res.front}  # fmt: skip
    assert got == want and len(got) > 1
    assert set(res.importances) == {"ttft", "tps", "energy", "cost"}
    assert res.importances["tps"]["conn"] > 0.1  # bandwidth wired to the die drives decode


def test_max_cost_and_sampled_outer_search() -> None:
    space = DesignSpace.model_validate(SMALL)
    cheap = run_codesign(_request(), space, max_cost=200)
    assert cheap.over_budget == 4 and all(j.cost <= 200 for j in cheap.front)
    full = run_codesign(_request(), space)
    tpe = run_codesign(_request(), space, sampler="tpe", trials=6, seed=0)
    assert tpe.evaluated_points <= 6
    hv = joint_hypervolume(tpe.front, None)
    assert 0 < hv and joint_hypervolume(full.front) > 0


def test_cli_design_space(capsys) -> None:
    argv = ["search", "--model", "llama-3.1-8b", "--noc", "illustrative_ring_switch_32",
            "--memory", "fictional_stacked_dram", "--input-seq", "512", "--output-seq", "64",
            "--batch-sizes", "4"]  # fmt: skip
    assert main([*argv, "--design-space", "nope"]) == 2
    assert "not a file or a shipped design space" in capsys.readouterr().err
    assert main([*argv, "--max-cost", "5"]) == 2
    assert "--max-cost needs --design-space" in capsys.readouterr().err
    assert main([*argv, "--design-space", "plena-stacked-dram", "--max-cost", "200"]) == 0
    out = capsys.readouterr().out
    assert "design space plena-stacked-dram" in out and "joint Pareto front" in out
    assert "knob importance for tps" in out
