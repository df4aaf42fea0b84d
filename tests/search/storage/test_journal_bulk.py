"""Issue 15 store: trials appended in bulk to a journal read back exactly as Optuna's own
``add_trials`` records (plain Optuna, resume, optuna-dashboard's API), and the writer's caches."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search
from plena_opt.search.storage import trials as trials_mod
from plena_opt.search.storage.journal_bulk import JournalTrialWriter
from tests.search.run.test_search_fakes import fake_factory
from tests.search.storage.test_search_store import _dashboard_get

FIXED = datetime(2026, 12, 1, 12, 0, 0, 123456)


class _FixedNow(datetime):
    @classmethod
    def now(cls, tz=None):  # noqa: ANN206 - datetime's own signature
        return FIXED if tz is None else FIXED.astimezone(tz)


def _search(path: Path, monkeypatch, bulk: bool):
    monkeypatch.setattr(trials_mod, "datetime", _FixedNow)
    if not bulk:  # the old path: Optuna's Study.add_trials
        monkeypatch.setattr(trials_mod, "journal_backend", lambda storage: None)
    created = []
    original = JournalStorage.create_new_trial

    def counted(self, *args, **kwargs):
        created.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(JournalStorage, "create_new_trial", counted)
    factory, _ = fake_factory(devices=16)
    req = SearchRequest(storage=str(path), study="s", batch_sizes=[4, 64], sampler="exhaustive")
    res = run_search(req, evaluator_factory=factory)
    monkeypatch.undo()
    # the old path creates each trial through Optuna; the bulk path never does
    assert len(created) == (0 if bulk else res.legal_points)
    return req, factory, res


def _records(path: Path) -> list[dict]:
    out = []
    for line in path.read_bytes().splitlines():
        rec = json.loads(line)
        rec.pop("worker_id")
        out.append(rec)
    return out


def _plain(path: Path) -> list[FrozenTrial]:
    storage = JournalStorage(JournalFileBackend(str(path)))
    return optuna.load_study(study_name="s", storage=storage).get_trials(deepcopy=False)


@pytest.fixture
def two_journals(tmp_path, monkeypatch):
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    _, _, res_old = _search(old, monkeypatch, bulk=False)
    req, factory, res_new = _search(new, monkeypatch, bulk=True)
    return old, new, res_old, res_new, req, factory


def test_bulk_records_are_optunas_own_records(two_journals) -> None:
    old, new, res_old, res_new, _, _ = two_journals
    a, b = _records(old), _records(new)
    creates = [r for r in b if r["op_code"] == 4]
    assert len(creates) == res_new.legal_points > 0
    assert a == b  # every record, trial records included, with the same values
    assert [list(r) for r in a] == [list(r) for r in b]  # and the same keys in the same order
    assert [e.trial_number for e in res_old.front] == [e.trial_number for e in res_new.front]


def test_plain_optuna_reads_bulk_trials_as_before(two_journals) -> None:
    old, new, *_ = two_journals
    ta, tb = _plain(old), _plain(new)
    assert len(ta) == len(tb) > 0
    assert {t.state for t in tb} >= {TrialState.COMPLETE, TrialState.PRUNED}
    for x, y in zip(ta, tb, strict=True):
        assert (x.number, x.state, x.values, x.params) == (y.number, y.state, y.values, y.params)
        assert x.distributions == y.distributions
        assert (x.user_attrs, x.system_attrs) == (y.user_attrs, y.system_attrs)
        assert (x.datetime_start, x.datetime_complete) == (y.datetime_start, y.datetime_complete)
        assert x.datetime_start is not None and x.intermediate_values == y.intermediate_values == {}


def test_resume_of_a_bulk_written_study_adds_nothing(two_journals) -> None:
    _, new, _, res_new, req, factory = two_journals
    before = new.read_bytes()
    res = run_search(req, evaluator_factory=factory)
    assert res.trials_completed == res_new.trials_completed == res_new.legal_points
    assert [e.trial_number for e in res.front] == [e.trial_number for e in res_new.front]
    after = new.read_bytes()
    assert after.startswith(before)
    assert b'"op_code":4' not in after[len(before) :]  # no trial written again


def test_dashboard_reads_bulk_trials_as_before(two_journals) -> None:
    old, new, *_ = two_journals

    def detail(path: Path) -> dict:
        summaries = _dashboard_get(str(path), "/api/studies")["study_summaries"]
        sid = next(s["study_id"] for s in summaries if s["study_name"] == "s")
        return _dashboard_get(str(path), f"/api/studies/{sid}?after=0")

    a, b = detail(old), detail(new)
    assert len(b["trials"]) == len(a["trials"]) > 0
    for key in ("best_trials", "trials"):
        strip = [{k: v for k, v in t.items() if k != "study_id"} for t in a[key]]
        assert strip == [{k: v for k, v in t.items() if k != "study_id"} for t in b[key]]


def _trial(state=TrialState.COMPLETE, values=(1.0, 2.0), params=None, dists=None) -> FrozenTrial:
    dists = dists if dists is not None else {"tp": CategoricalDistribution([1, 2, 4])}
    return FrozenTrial(
        number=-1, state=state, value=None, values=None if values is None else list(values),
        datetime_start=FIXED, datetime_complete=FIXED, params=params or {"tp": 2},
        distributions=dists, user_attrs={}, system_attrs={}, intermediate_values={}, trial_id=-1,
    )  # fmt: skip


def test_writer_caches_are_bounded_and_follow_the_distributions() -> None:
    dists = {"tp": CategoricalDistribution([1, 2, 4])}
    w = JournalTrialWriter(0, 2, dists)
    for i in range(300):
        rec = w.record(_trial(params={"tp": (1, 2, 4)[i % 3]}, dists=dists))
        assert rec["params"]["tp"] == i % 3
    assert len(w._internal["tp"]) == 3  # one entry per choice, however many trials
    # another problem's distribution (other choices) is encoded from itself, not the cache
    other = {"tp": CategoricalDistribution([2, 8])}
    rec = w.record(_trial(params={"tp": 2}, dists=other))
    assert rec["params"]["tp"] == 0
    assert json.loads(rec["distributions"]["tp"])["attributes"]["choices"] == [2, 8]
    assert len(w._internal["tp"]) == 3
    with pytest.raises(ValueError):  # a value the distribution does not allow
        w.record(_trial(params={"tp": 3}, dists=dists))
    assert len(w._internal["tp"]) == 3


@pytest.mark.parametrize(
    "trial",
    [
        _trial(state=TrialState.RUNNING, values=None),
        _trial(values=(1.0,)),  # the study has two objectives
        _trial(values=None),  # COMPLETE without values
        _trial(params={"tp": 2, "pp": 1}),  # a param without a distribution
    ],
)
def test_writer_refuses_trials_optuna_would_refuse(trial: FrozenTrial) -> None:
    w = JournalTrialWriter(0, 2, {"tp": CategoricalDistribution([1, 2, 4])})
    with pytest.raises(ValueError):
        w.record(trial)
