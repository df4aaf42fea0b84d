"""Finished trials written to a journal store in bulk, as Optuna's own create-trial records.

``Study.add_trials`` on a ``JournalStorage`` creates each trial on its own: it encodes every
param's distribution as JSON (the same few distributions for every trial of a study), appends the
record, then replays it at once. ``JournalTrialWriter`` builds the identical records (the keys and
values ``JournalStorage.create_new_trial`` writes for a finished template trial) with each
distribution's JSON and each choice's internal value computed once per writer, appends all of a
batch with one ``append_logs`` call and lets the storage replay them on its next read. Optuna,
optuna-dashboard and a resumed search read the file exactly as before
(``tests/search/storage/test_journal_bulk.py`` compares both ways trial by trial).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, distribution_to_json
from optuna.storages.journal import BaseJournalBackend
from optuna.trial import FrozenTrial, TrialState

from plena_opt.search.storage.journal import CREATE_TRIAL

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


# Optuna 5 stores a template trial's times in UTC with their offset; Optuna 4 as given (naive
# local times): the records follow the installed Optuna, so its readers see the same datetimes
# for bulk and one-by-one trials (``optuna/storages/journal/_storage.py``, create_new_trial).
_UTC_TIMES = int(optuna.__version__.split(".")[0]) >= 5


def _iso(when: datetime | None) -> str | None:
    """``when`` as the installed Optuna's journal stores it (ISO 8601 with microseconds)."""
    if when is None:
        return None
    return (when.astimezone(UTC) if _UTC_TIMES else when).isoformat(timespec="microseconds")


class JournalTrialWriter:
    """Create-trial records for one study whose params have fixed distributions ``dists``.

    Per writer, each distribution is encoded once and each param value's internal
    representation is looked up once (at most one entry per choice: only values the
    distribution accepts are kept). Trials with other distributions are encoded as they come.
    """

    def __init__(
        self, study_id: int, n_objectives: int, dists: dict[str, BaseDistribution]
    ) -> None:
        self.study_id = study_id
        self.n_objectives = n_objectives
        self.dists = dists
        self._json = {k: distribution_to_json(d) for k, d in dists.items()}
        self._internal: dict[str, dict[tuple[type, Any], Any]] = {k: {} for k in dists}
        self._prefix = f"{uuid.uuid4()}-"  # the form of Optuna's worker ids: uuid-thread

    @property
    def worker_id(self) -> str:
        return self._prefix + str(threading.get_ident())

    def _param(self, name: str, value: Any, dist: BaseDistribution) -> Any:
        if dist is not self.dists.get(name):
            return dist.to_internal_repr(value)
        known = self._internal[name]
        key = (type(value), value)
        out = known.get(key)
        if out is None:
            out = known[key] = dist.to_internal_repr(value)  # raises for a value not allowed
        return out

    def record(self, trial: FrozenTrial, worker_id: str | None = None) -> dict[str, Any]:
        """The journal record ``JournalStorage.create_new_trial`` writes for ``trial``."""
        if trial.state not in FINISHED:
            raise ValueError(f"trial state {trial.state.name}: only finished trials are written")
        if trial.intermediate_values:
            raise ValueError("trials with intermediate values are not written in bulk")
        n = None if trial.values is None else len(trial.values)
        if n not in (None, self.n_objectives) or (trial.state == TrialState.COMPLETE and n is None):
            raise ValueError(f"trial has {n} values; the study has {self.n_objectives} objectives")
        missing = set(trial.params) - set(trial.distributions)
        if missing:
            raise ValueError(f"params without a distribution: {sorted(missing)}")
        dists = trial.distributions
        multi = trial.values is not None and len(trial.values) > 1
        start = _iso(trial.datetime_start)
        log: dict[str, Any] = {
            "op_code": CREATE_TRIAL,
            "worker_id": worker_id or self.worker_id,
            "study_id": self.study_id,
            "datetime_start": start,
            "state": int(trial.state),
            "value": None if multi else trial.value,
            "values": trial.values if multi else None,
        }
        if trial.datetime_complete is not None:
            log["datetime_complete"] = _iso(trial.datetime_complete)
        log["distributions"] = {
            k: self._json[k] if d is self.dists.get(k) else distribution_to_json(d)
            for k, d in dists.items()
        }
        log["params"] = {k: self._param(k, v, dists[k]) for k, v in trial.params.items()}
        log["user_attrs"] = trial.user_attrs
        log["system_attrs"] = trial.system_attrs
        log["intermediate_values"] = {}
        return log

    def write(self, backend: BaseJournalBackend, trials: Sequence[FrozenTrial]) -> None:
        """Append the records of ``trials`` in one call (inside a batch: one locked append)."""
        worker = self.worker_id
        backend.append_logs([self.record(t, worker) for t in trials])
