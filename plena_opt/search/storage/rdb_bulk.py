"""Store many finished trials in an Optuna RDB store in one transaction (workers, issue 17).

Optuna's ``Study.add_trials`` creates each trial in its own transaction, reading the trial back
before every param and attribute: about 40 SQL statements and 45 ms of client CPU per plan on
PostgreSQL (benchmarks/README.md, "scale out"), which made the store, not the evaluator, a
worker's bottleneck. ``add_finished_trials`` writes the same rows in one transaction under the
study-row lock Optuna itself takes to number trials, so numbers stay ``0, 1, 2, …`` with other
writers on the study: the trial rows through Optuna's own ORM model (the installed Optuna's
schema and datetime handling), their values, params and attributes with one SQLAlchemy Core
``executemany`` per table. Every row is built before the lock is taken, so the lock (the one
part many workers cannot do at once) is held only for the inserts. Other stores fall back to
``Study.add_trials``. Trials must be finished (COMPLETE, PRUNED, FAIL) or WAITING (a work
queue's), without intermediate values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import optuna
from optuna.distributions import distribution_to_json
from optuna.trial import FrozenTrial


def _rdb(study: optuna.Study) -> optuna.storages.RDBStorage | None:
    storage = study._storage
    backend = getattr(storage, "_backend", storage)  # Optuna wraps RDB stores in a cache
    return backend if isinstance(backend, optuna.storages.RDBStorage) else None


def _children(models, trials: Sequence[FrozenTrial]) -> dict[object, list[tuple[int, dict]]]:
    """The child rows of ``trials`` per table, each as (trial index, column values), built before
    the study lock is taken (the lock is held only while the rows are inserted)."""
    out: dict[object, list[tuple[int, dict]]] = {
        m.__table__: []
        for m in (
            models.TrialValueModel,
            models.TrialParamModel,
            models.TrialUserAttributeModel,
            models.TrialSystemAttributeModel,
        )
    }
    values, params, user, system = out.values()
    dist_json: dict[int, str] = {}  # distribution_to_json per distribution object, not per trial
    for i, t in enumerate(trials):
        for k, v in enumerate(t.values or ()):
            stored, kind = models.TrialValueModel.value_to_stored_repr(v)
            values.append((i, {"objective": k, "value": stored, "value_type": kind}))
        for name, value in t.params.items():
            dist = t.distributions[name]
            if id(dist) not in dist_json:  # one distribution object per param for a whole study
                dist_json[id(dist)] = distribution_to_json(dist)
            params.append((i, {"param_name": name, "param_value": dist.to_internal_repr(value),
                               "distribution_json": dist_json[id(dist)]}))  # fmt: skip
        user.extend((i, {"key": k, "value_json": json.dumps(v)}) for k, v in t.user_attrs.items())
        system.extend(
            (i, {"key": k, "value_json": json.dumps(v)}) for k, v in t.system_attrs.items()
        )
    return out


def add_finished_trials(study: optuna.Study, trials: Sequence[FrozenTrial]) -> None:
    """Store ``trials`` (finished or WAITING) in ``study``: one transaction on an RDB store,
    else ``add_trials``."""
    if not trials:
        return
    rdb = _rdb(study)
    if rdb is None:
        study.add_trials(trials)
        return
    from optuna.storages._rdb.storage import _create_scoped_session

    prepared = prepare_rows(trials)
    with _create_scoped_session(rdb.scoped_session) as session:
        insert_rows(session, study._study_id, prepared)


def prepare_rows(
    trials: Sequence[FrozenTrial],
) -> tuple[list, dict[object, list[tuple[int, dict]]]]:
    """The trial rows (Optuna's ORM model) and child rows of ``trials``, built before any lock."""
    from optuna.storages._rdb import models

    for t in trials:
        t._validate()
    rows = [
        models.TrialModel(
            study_id=-1,
            number=None,
            state=t.state,
            datetime_start=t.datetime_start,
            datetime_complete=t.datetime_complete,
        )
        for t in trials
    ]  # ORM rows: Optuna's own datetime handling
    return rows, _children(models, trials)


def insert_rows(
    session, study_id: int, prepared: tuple[list, dict[object, list[tuple[int, dict]]]]
) -> None:
    """Insert ``prepare_rows``' rows into study ``study_id`` within ``session``'s transaction,
    under the study-row lock (taken here); trial numbers follow the study's last."""
    from optuna.storages._rdb import models

    rows, children = prepared
    if not rows:
        return
    for row in rows:
        row.study_id = study_id
    models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
    # every writer of the study numbers its trials under this lock (Optuna's own
    # ``_create_new_trial`` too), so the study's trial count is the first free number
    base = session.query(models.TrialModel).filter(models.TrialModel.study_id == study_id).count()
    for i, row in enumerate(rows):
        row.number = base + i
    session.add_all(rows)
    session.flush()  # one multi-row INSERT … RETURNING on PostgreSQL
    for table, items in children.items():
        if items:  # one executemany per table (SQLAlchemy Core, no ORM objects)
            session.execute(
                table.insert(), [{"trial_id": rows[i].trial_id, **cols} for i, cols in items]
            )
