"""Where studies live: a journal file by default, or any storage URL Optuna accepts.

Default: ``JournalStorage(JournalFileBackend("plena-opt-studies.log"))`` in the working
directory. Every ``tell`` is one appended, lock-protected record, so a crash loses no completed
trial, several processes on one machine may share it, and optuna-dashboard opens it
(service-conventions §1.4; measured against SQLite in benchmarks/README_search.md).
A ``--storage`` value containing ``://`` is an RDB URL (``sqlite:///x.db``, ``postgresql://…``);
anything else is a journal file path.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

from plena_opt.errors import PlenaInputError, PlenaNotFoundError

DEFAULT_STORAGE = "plena-opt-studies.log"
RDB_SCHEMES = ("sqlite", "postgresql", "mysql", "oracle", "mssql")
# A journal lock older than this (s) is stale: its holder died (e.g. kill -9) mid-append.
# Appends take milliseconds, so 5 s is safe and spares a restart Optuna's 30 s default wait.
LOCK_GRACE_SECONDS = 5

_OPEN: dict[str, optuna.storages.BaseStorage] = {}
_OPEN_LOCK = threading.Lock()


def open_storage(url: str | None = None) -> optuna.storages.BaseStorage:
    """The study store named by ``url`` (None → default journal), created if needed.

    One storage object per store and process: searches that share a store (the server runs
    several) share its in-memory replay of the journal instead of each loading it again.
    """
    url = url or DEFAULT_STORAGE
    key = url if "://" in url else str(Path(url).resolve())
    with _OPEN_LOCK:
        storage = _OPEN.get(key)
        if storage is None:
            storage = _OPEN[key] = _open(url)
    return storage


def _open(url: str) -> optuna.storages.BaseStorage:
    if "://" in url:
        scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
        if scheme not in RDB_SCHEMES:
            raise PlenaInputError(
                "storage",
                f"--storage {url!r}: unknown scheme {scheme!r}; use a journal file path or an "
                f"RDB URL ({', '.join(s + '://' for s in RDB_SCHEMES)})",
            )
        try:
            return RDBStorage(url)
        except Exception as exc:  # sqlalchemy/driver errors vary; report them as bad input
            raise PlenaInputError("storage", f"--storage {url!r}: cannot open ({exc})") from exc
    path = Path(url)
    if path.is_dir():
        raise PlenaInputError("storage", f"--storage {url!r} is a directory, not a journal file")
    if not path.parent.exists():
        raise PlenaInputError("storage", f"--storage {url!r}: folder {path.parent} does not exist")
    try:
        lock = JournalFileSymlinkLock(str(path), grace_period=LOCK_GRACE_SECONDS)
        return JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    except Exception as exc:
        raise PlenaInputError("storage", f"--storage {url!r}: cannot open ({exc})") from exc


def storage_exists(url: str | None) -> bool:
    """Whether a journal store file exists (RDB URLs: always True; they are opened to list)."""
    url = url or DEFAULT_STORAGE
    return "://" in url or Path(url).is_file()


def list_studies(storage: optuna.storages.BaseStorage) -> list[dict[str, Any]]:
    """One summary per study: name, directions, metric names, trials by state, problem attrs."""
    out = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        states: dict[str, int] = {}
        for t in study.get_trials(deepcopy=False):
            states[t.state.name.lower()] = states.get(t.state.name.lower(), 0) + 1
        attrs = s.user_attrs
        out.append(
            {
                "name": s.study_name,
                "directions": [d.name.lower() for d in s.directions],
                "metric_names": study.metric_names,
                "n_trials": s.n_trials,
                "trials_by_state": states,
                "datetime_start": s.datetime_start.isoformat() if s.datetime_start else None,
                "problem": attrs.get("problem"),
                "objectives": attrs.get("objectives"),
            }
        )
    return out


def load_existing_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """Load study ``name``; unknown names raise ``PlenaNotFoundError`` listing the valid ones."""
    names = optuna.get_all_study_names(storage)
    if name not in names:
        raise PlenaNotFoundError(
            "study", f"unknown study {name!r}; known: {', '.join(names) or '(none)'}"
        )
    return optuna.load_study(study_name=name, storage=storage)
