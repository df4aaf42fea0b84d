"""Where studies live: a journal file, or any storage URL Optuna accepts.

The CLI's default is the journal file ``plena-opt-studies.log`` in the working directory (the
library never picks a file itself: ``run_search`` stores in memory unless given a storage).
Records are appended under the journal's lock (``plena_opt.search.storage.journal``; scored plans in
batches, one fsync per batch), so a crash loses no written trial, several processes on one machine
may share it, and optuna-dashboard opens it (service-conventions §1.4; measured against SQLite in
benchmarks/README_search.md).
A ``--storage`` value containing ``://`` is an RDB URL (``sqlite:///x.db``, ``postgresql://…``);
anything else is a journal file path. A journal is checked before use and its torn tail cut off
under its lock; stale locks and stale trials are handled too
(``plena_opt.search.storage.storage_repair``, whose names are re-exported here).
"""

from __future__ import annotations

import logging
import threading
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage, RDBStorage

from plena_opt.errors import PlenaInputError, not_found
from plena_opt.search.storage.journal import BatchingJournalBackend
from plena_opt.search.storage.storage_backend import (
    _BACKENDS,
    RDB_SCHEMES,
    batch_writes,
    committed_view,
    is_batched,
    journal_backend,
    sqlalchemy_url,
)
from plena_opt.search.storage.storage_repair import (
    LOCK_GRACE_SECONDS,
    LOCK_SUFFIX,
    STALE_TRIAL_SECONDS,
    RepairingJournalLock,
    check_journal,
    clear_stale_journal_lock,
    fail_stale_trials,
    torn_tail_note,
)

# Re-exported: callers and tests import the store's care from here.
__all__ = [
    "torn_tail_note",
    "DEFAULT_STORAGE",
    "RDB_SCHEMES",
    "LOCK_GRACE_SECONDS",
    "LOCK_SUFFIX",
    "STALE_TRIAL_SECONDS",
    "RepairingJournalLock",
    "batch_writes",
    "check_journal",
    "clear_stale_journal_lock",
    "committed_view",
    "fail_stale_trials",
    "is_batched",
    "journal_backend",
    "list_studies",
    "load_existing_study",
    "open_storage",
    "sqlalchemy_url",
    "storage_exists",
]

DEFAULT_STORAGE = "plena-opt-studies.log"

# Heartbeat stores (workers): a trial silent for this many heartbeat periods is stale; a stale
# trial is enqueued again at most MAX_RETRY times.
HEARTBEAT_GRACE = 3
MAX_RETRY = 3

_log = logging.getLogger(__name__)
_OPEN: dict[str, optuna.storages.BaseStorage] = {}
_OPEN_LOCK = threading.Lock()


def open_storage(
    url: str | None = None, heartbeat_s: float | None = None, *, repair: bool = True
) -> optuna.storages.BaseStorage:
    """The study store named by ``url`` (None → default journal), created if needed.

    ``repair=False`` (read-only commands: listing) leaves a journal's torn tail in place (its
    reader stops before it; :func:`torn_tail_note` says what is there); a writer repairs it.

    ``heartbeat_s`` (RDB URLs only; workers, ``plena_opt.search.workers.workers``): Optuna
    heartbeats every that many seconds, a RUNNING trial silent for ``HEARTBEAT_GRACE`` periods is
    stale, and a stale trial failed by ``fail_stale_trials`` is enqueued again
    (``RetryFailedTrialCallback``).

    One storage object per store and process: searches that share a store (the server runs
    several) share its in-memory replay of the journal instead of each loading it again.
    Torn tails left later by other processes are still repaired: every append checks first.
    """
    url = url or DEFAULT_STORAGE
    key = url if "://" in url else str(Path(url).resolve())
    if heartbeat_s is not None:
        key = f"{key}#heartbeat={heartbeat_s}"
    with _OPEN_LOCK:
        storage = _OPEN.get(key)
        if storage is None:
            storage = _OPEN[key] = _open(url, heartbeat_s, repair)
    return storage


def _rdb(url: str, heartbeat_s: float | None) -> RDBStorage:
    return _serial_sqlite(_rdb_storage(url, heartbeat_s))


def _serial_sqlite(storage: RDBStorage) -> RDBStorage:
    """On SQLite, every transaction takes the write lock when it begins (``BEGIN IMMEDIATE``).

    SQLite ignores the row lock (``SELECT … FOR UPDATE``) Optuna's claim of a WAITING trial
    relies on, and pysqlite starts a transaction only at the first write, so two worker
    processes could both read a chunk WAITING and both claim it (seen: 9 claims of 8 co-design
    points). SQLAlchemy's documented pysqlite recipe: driver transactions off, BEGIN emitted here.
    """
    engine = storage.engine
    if engine.dialect.name != "sqlite":
        return storage
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the listeners get them on reconnect
    return storage


def _rdb_storage(url: str, heartbeat_s: float | None) -> RDBStorage:
    if heartbeat_s is None:
        return RDBStorage(sqlalchemy_url(url))
    kwargs: dict[str, Any] = {
        "heartbeat_interval": max(1, round(heartbeat_s)),
        "grace_period": max(2, round(heartbeat_s * HEARTBEAT_GRACE)),
    }
    with warnings.catch_warnings():  # heartbeats: experimental in Optuna, stable in use
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback"):  # Optuna ≥ 4.9
            retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)
            kwargs["heartbeat_stale_trial_callback"] = retry
        else:
            retry = optuna.storages.RetryFailedTrialCallback(max_retry=MAX_RETRY)
            kwargs["failed_trial_callback"] = retry
        return RDBStorage(sqlalchemy_url(url), **kwargs)


def _open(
    url: str, heartbeat_s: float | None = None, repair: bool = True
) -> optuna.storages.BaseStorage:
    from plena_opt.search.storage import grpc_proxy

    if grpc_proxy.is_grpc(url):  # Optuna's gRPC storage proxy (workers, issue 17)
        return grpc_proxy.open_grpc(url)
    if "://" in url:
        scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
        if scheme not in RDB_SCHEMES:
            raise PlenaInputError(
                "storage",
                f"--storage {url!r}: unknown scheme {scheme!r}; use a journal file path or an "
                f"RDB URL ({', '.join(s + '://' for s in RDB_SCHEMES)})",
            )
        try:
            return _rdb(url, heartbeat_s)
        except ModuleNotFoundError as exc:
            raise PlenaInputError(
                "storage",
                f"--storage {url!r}: the database driver is not installed ({exc.name}); for "
                'PostgreSQL run: pip install "plena-opt[postgres]"',
            ) from exc
        except Exception as exc:  # sqlalchemy/driver errors vary; report them as bad input
            raise PlenaInputError("storage", f"--storage {url!r}: cannot open ({exc})") from exc
    path = Path(url)
    if path.is_dir():
        raise PlenaInputError("storage", f"--storage {url!r} is a directory, not a journal file")
    if not path.parent.exists():
        raise PlenaInputError("storage", f"--storage {url!r}: folder {path.parent} does not exist")
    if path.exists():
        check_journal(path)  # before anything is written to it
    lock = RepairingJournalLock(str(path), grace_period=LOCK_GRACE_SECONDS)
    if path.exists() and repair:
        try:
            lock.repair()  # logs a warning saying what was dropped, if anything
        except OSError as exc:  # e.g. a read-only folder: reading still works, appends repair
            _log.warning("journal %s: torn tail not repaired now (%s)", path, exc)
    backend = BatchingJournalBackend(str(path), lock)
    try:
        storage = JournalStorage(backend)
    except Exception as exc:
        raise PlenaInputError("storage", f"--storage {url!r}: cannot open ({exc})") from exc
    _BACKENDS[storage] = backend
    return storage


def storage_exists(url: str | None) -> bool:
    """Whether the store already exists, so listing it creates nothing.

    Journal paths and ``sqlite:///file`` URLs: the file exists (a directory is an error, not a
    missing store). In-memory SQLite and server databases (postgresql, …): always True.
    """
    url = url or DEFAULT_STORAGE
    if "://" not in url:
        if Path(url).is_dir():
            raise PlenaInputError(
                "storage", f"--storage {url!r} is a directory, not a journal file"
            )
        return Path(url).is_file()
    if url.split("://", 1)[0].split("+", 1)[0].lower() != "sqlite":
        return True
    from sqlalchemy.engine import make_url  # optuna's RDBStorage dependency

    try:
        database = make_url(url).database
    except Exception:  # malformed: let open_storage report it
        return True
    if not database or database == ":memory:" or database.startswith("file:"):
        return True
    return Path(database).is_file()


def list_studies(storage: optuna.storages.BaseStorage) -> list[dict[str, Any]]:
    """One summary per study: name, directions, metric names, trials by state, problem attrs.

    ``trials_completed`` is the search layer's count of distinct scored plans
    (``plena_opt.search.storage.trials.trials_completed``); ``n_trials`` counts every trial.
    """
    from plena_opt.search.storage.trials import trials_completed

    out = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if "plena:queue_for" in s.user_attrs:  # a workers' queue (search.workers), not a study
            continue
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
                "trials_completed": trials_completed(study),
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
    if name not in names:  # the first few names only: a message stays small with many studies
        raise not_found("study", "study", name, names)
    return optuna.load_study(study_name=name, storage=storage)
