"""Co-design searches on many workers (issue 17): hardware points claimed through the store,
the joint front read back equal to the single-process one, every point scored exactly once."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState

from plena_opt import api
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.search.codesign.codesign import run_codesign
from plena_opt.search.codesign.design_space import DesignSpace
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.workers.codesign_workers import FRONT_ATTR, codesign_from_storage
from plena_opt.search.workers.workers import queue_name, run_worker
from tests.search.codesign.test_search_codesign import BASE, SMALL, _request

BROKEN = {**SMALL, "knobs": [*SMALL["knobs"][:3],  # 6 devices do not fill a ring of groups of 8
          {"name": "groups", "target": "noc.layers.L2.shape.1", "values": [2, 3]}]}  # fmt: skip


def _key(res) -> list[tuple]:
    return [(tuple(sorted(j.hardware.items())), j.plan.plan, j.values, j.cost) for j in res.front]


def _space_file(tmp_path, doc: dict) -> str:
    path = tmp_path / f"{doc['name']}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _check_equal(url: str, tmp_path, n: int) -> None:
    req = _request().model_copy(update={"storage": url, "study": "cd"})
    single = run_codesign(_request(), DesignSpace.model_validate(SMALL))
    res, reports = api.run_codesign_workers(req, _space_file(tmp_path, SMALL), n, heartbeat_s=1)
    assert len(reports) == n and sum(r["chunks"] for r in reports) == 8  # each point once
    assert sum(r["plans_scored"] for r in reports) == single.plans_scored == res.plans_scored
    assert res.front and _key(res) == _key(single)  # the same joint front, in the same order
    assert res.point_fronts == single.point_fronts and res.evaluated_points == 8
    assert set(res.importances) == {"ttft", "tps", "energy", "cost"}
    queue = optuna.load_study(study_name=queue_name("cd"), storage=open_storage(url))
    trials = queue.get_trials()
    assert len(trials) == 8 and {t.state for t in trials} == {TrialState.COMPLETE}
    assert all(t.params and FRONT_ATTR in t.user_attrs for t in trials)


@pytest.mark.postgres
def test_two_workers_on_postgresql_equal_one_process(postgres_url, tmp_path) -> None:
    _check_equal(postgres_url, tmp_path, 2)


def test_two_workers_on_sqlite_equal_one_process(tmp_path) -> None:
    _check_equal(f"sqlite:///{tmp_path / 'cd.db'}", tmp_path, 2)


def test_refused_points_budget_and_resume_on_sqlite(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    space = _space_file(tmp_path, BROKEN)
    req = _request().model_copy(update={"storage": url, "study": "r"})
    info = api.prepare_codesign_workers(req, space, max_cost=400)
    single = run_codesign(_request(), DesignSpace.model_validate(BROKEN), max_cost=400)
    assert info.enqueued == info.legal_points == 8 - single.over_budget
    assert run_worker(url, "r", heartbeat_s=1).chunks == info.enqueued  # in-process worker
    res = codesign_from_storage(url, "r")
    assert single.refused and res.refused == single.refused  # groups=3: with the reason
    assert _key(res) == _key(single) and res.over_budget == single.over_budget
    again = api.prepare_codesign_workers(req, space, max_cost=400)
    assert again.enqueued == 0  # the same study resumes: nothing queued twice
    with pytest.raises(PlenaInputError, match="holds another search"):
        api.prepare_codesign_workers(req, space, max_cost=300)


def test_cli_design_space_with_workers(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    argv = ["search", "--model", BASE.model, "--noc", str(BASE.noc), "--memory",
            str(BASE.memory), "--input-seq", "512", "--output-seq", "64", "--batch-sizes",
            "4,32", "--design-space", _space_file(tmp_path, SMALL), "--storage", url,
            "--study", "cli", "--json", "--quiet"]  # fmt: skip
    assert main([*argv, "--workers", "0"]) == 0
    assert "8 hardware points queued" in capsys.readouterr().out
    assert main([*argv, "--workers", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    single = run_codesign(_request(), DesignSpace.model_validate(SMALL))
    assert len(out["front"]) == len(single.front) and out["evaluated_points"] == 8
    assert main([*argv, "--workers", "1", "--sampler", "tpe"]) == 2
    assert "scores every hardware point" in capsys.readouterr().err
