"""Where studies live: a journal file, or any storage URL Optuna accepts.

The CLI's default is the journal file ``plena-opt-studies.log`` in the working directory (the
library never picks a file itself: ``run_search`` stores in memory unless given a storage).
Records are appended under the journal's lock (``plena_opt.search.journal``; scored plans in
batches, one fsync per batch), so a crash loses no written trial, several processes on one machine
may share it, and optuna-dashboard opens it (service-conventions §1.4; measured against SQLite in
benchmarks/README_search.md).
A ``--storage`` value containing ``://`` is an RDB URL (``sqlite:///x.db``, ``postgresql://…``);
anything else is a journal file path.

Journal safety: an existing non-empty file is read record by record before use and refused if
it is not an Optuna journal, so a mistyped path is never written to; damage in the middle (a
line that is not a record, records out of step with their trials) is refused naming the study
and line, with the ``plena-opt studies repair`` command that salvages it into a new file. A
writer killed mid-append leaves a torn last line (no ``\\n``); Optuna's next append would land
on it and make the whole journal unreadable, so the torn tail is cut off, under the journal's
lock, when the journal is opened and again before every append (the lock is taken by appends
only, so a tail seen while holding it belongs to a writer that died; it was never a completed
record).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileSymlinkLock
from optuna.trial import TrialState

from plena_opt.errors import PlenaInputError, not_found
from plena_opt.search.journal import RECORD_PREFIX, BatchingJournalBackend, scan_journal

DEFAULT_STORAGE = "plena-opt-studies.log"
RDB_SCHEMES = ("sqlite", "postgresql", "mysql", "oracle", "mssql")
# A journal lock older than this (s) is stale: its holder died (e.g. kill -9) mid-append.
# Appends take milliseconds, so 5 s is safe and spares a restart Optuna's 30 s default wait.
LOCK_GRACE_SECONDS = 5
# Optuna's journal lock file is the journal path plus this suffix (JournalFileSymlinkLock).
LOCK_SUFFIX = ".lock"
# A RUNNING trial older than this (s) on a store without heartbeats is left by a process that
# stopped: plena-opt's trials run milliseconds (one plan's score) to a few seconds (a first
# evaluation that routes a large NoC); 10 minutes leaves a wide margin.
STALE_TRIAL_SECONDS = 600.0
# Heartbeat stores (workers): a trial silent for this many heartbeat periods is stale; a stale
# trial is enqueued again at most MAX_RETRY times.
HEARTBEAT_GRACE = 3
MAX_RETRY = 3

_log = logging.getLogger(__name__)
_OPEN: dict[str, optuna.storages.BaseStorage] = {}
_BACKENDS: dict[int, BatchingJournalBackend] = {}
_OPEN_LOCK = threading.Lock()


def open_storage(
    url: str | None = None, heartbeat_s: float | None = None
) -> optuna.storages.BaseStorage:
    """The study store named by ``url`` (None → default journal), created if needed.

    ``heartbeat_s`` (RDB URLs only; workers, ``plena_opt.search.workers``): Optuna heartbeats
    every that many seconds, a RUNNING trial silent for ``HEARTBEAT_GRACE`` periods is stale, and
    a stale trial failed by ``fail_stale_trials`` is enqueued again (``RetryFailedTrialCallback``).

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
            storage = _OPEN[key] = _open(url, heartbeat_s)
    return storage


def is_batched(storage: optuna.storages.BaseStorage) -> bool:
    """Whether ``storage`` is a journal file opened here (``batch_writes`` holds its lock)."""
    return id(storage) in _BACKENDS


def batch_writes(storage: optuna.storages.BaseStorage) -> Any:
    """Context in which a journal store's appends become one locked append and one fsync.

    Keep it short (it holds the journal lock: other writers wait). Other stores: no effect.
    """
    backend = _BACKENDS.get(id(storage))
    return backend.batch() if backend is not None else nullcontext()


def committed_view(storage: optuna.storages.BaseStorage) -> Any:
    """Context in which reads of a journal store see only records already on disk (it waits
    for this process's batches in progress). Other stores: no effect."""
    backend = _BACKENDS.get(id(storage))
    return backend.committed_view() if backend is not None else nullcontext()


def sqlalchemy_url(url: str) -> str:
    """``url`` as SQLAlchemy needs it: ``postgresql://`` (no driver named) uses psycopg 3, the
    driver ``pip install "plena-opt[postgres]"`` installs (SQLAlchemy's default is psycopg2)."""
    for plain in ("postgresql://", "postgres://"):
        if url.lower().startswith(plain):
            return "postgresql+psycopg://" + url[len(plain) :]
    return url


def _rdb(url: str, heartbeat_s: float | None) -> RDBStorage:
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


def _open(url: str, heartbeat_s: float | None = None) -> optuna.storages.BaseStorage:
    from plena_opt.search import grpc_proxy

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
    if path.exists():
        try:
            lock.repair()  # logs a warning saying what was dropped, if anything
        except OSError as exc:  # e.g. a read-only folder: reading still works, appends repair
            _log.warning("journal %s: torn tail not repaired now (%s)", path, exc)
    backend = BatchingJournalBackend(str(path), lock)
    try:
        storage = JournalStorage(backend)
    except Exception as exc:
        raise PlenaInputError("storage", f"--storage {url!r}: cannot open ({exc})") from exc
    _BACKENDS[id(storage)] = backend
    return storage


def _not_a_journal(path: Path, why: str) -> PlenaInputError:
    return PlenaInputError(
        "storage",
        f"--storage {str(path)!r} is not an Optuna journal file ({why}); nothing was written "
        "to it. Pass a new or empty file, an existing plena-opt journal, or an RDB URL",
    )


def _is_torn_record(tail: bytes) -> bool:
    """Whether ``tail`` (bytes after the last newline) can be the start of a journal record."""
    return tail.startswith(RECORD_PREFIX) or RECORD_PREFIX.startswith(tail)


def check_journal(path: Path) -> None:
    """Raise ``PlenaInputError`` unless ``path`` is empty or an undamaged Optuna journal file.

    A file whose first line is not a record is not a journal (a mistyped path). Damage further in
    (``journal.scan_journal``: a line that is not a record, records out of step with their trials)
    is named with its study and line and the command that salvages it. Reads only.
    """
    try:
        with open(path, "rb") as f:
            first = f.readline()
        if first and not first.startswith(RECORD_PREFIX):
            raise _not_a_journal(path, "line 1 is not a journal record")
        scan = scan_journal(path, limit=5)
    except OSError as exc:
        raise PlenaInputError("storage", f"--storage {str(path)!r}: cannot read ({exc})") from exc
    if scan.damage:
        found = "; ".join(d.describe() for d in scan.damage[:3])
        more = f" (and {len(scan.damage) - 3} more)" if len(scan.damage) > 3 else ""
        raise PlenaInputError(
            "storage",
            f"journal {str(path)!r} is damaged: {found}{more}. Nothing was written to it. Salvage "
            f"every intact record into a new file with: plena-opt studies repair --storage "
            f"{path} --output {path}.repaired",
        )


class RepairingJournalLock(JournalFileSymlinkLock):
    """Optuna's journal file lock that, once held, cuts off a torn last record.

    ``JournalFileBackend`` takes this lock only to append, so whatever follows the last newline
    while it is held was left by a writer that died mid-append (or whose stale lock was broken
    after ``grace_period`` s); removing it lets the next append start on a fresh line.
    """

    def __init__(self, filepath: str, grace_period: int | None = LOCK_GRACE_SECONDS) -> None:
        super().__init__(filepath, grace_period=grace_period)
        self._journal = filepath
        self.notes: list[str] = []  # one line per repair made through this lock

    def acquire(self) -> bool:
        got = super().acquire()
        try:
            note = _cut_torn_tail(self._journal)
        except BaseException:
            self.release()
            raise
        if note:
            self.notes.append(note)
            _log.warning("journal %s: %s", self._journal, note)
        return got

    def repair(self) -> str | None:
        """Take the lock (which repairs), release it; the note on what was dropped, if any."""
        before = len(self.notes)
        self.acquire()
        self.release()
        return self.notes[-1] if len(self.notes) > before else None


def _cut_torn_tail(path: str, chunk: int = 1 << 16) -> str | None:
    """Truncate ``path`` to just after its last newline (caller holds the journal lock).

    Returns a note on the dropped bytes, or None when the file is empty or ends in a newline.
    Refuses (``PlenaInputError``) to drop a tail that does not look like a journal record.
    """
    try:
        f = open(path, "rb")  # read-only until a repair is needed (a read-only store still lists)
    except FileNotFoundError:
        return None
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return None
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return None
        keep, end = 0, size
        while end > 0:  # scan back for the last newline
            start = max(0, end - chunk)
            f.seek(start)
            at = f.read(end - start).rfind(b"\n")
            if at >= 0:
                keep = start + at + 1
                break
            end = start
        f.seek(keep)
        tail = f.read()
    if not _is_torn_record(tail):
        raise _not_a_journal(Path(path), "its last line is not a journal record")
    with open(path, "r+b") as f:
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return (
        f"dropped an incomplete last record ({size - keep} bytes at offset {keep}) left by a "
        "writer that stopped mid-append; every completed record is kept"
    )


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
    (``plena_opt.search.trials.trials_completed``); ``n_trials`` counts every trial.
    """
    from plena_opt.search.trials import trials_completed

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


def fail_stale_trials(study: optuna.Study, older_than_s: float = STALE_TRIAL_SECONDS) -> list[int]:
    """Mark RUNNING trials left by a stopped process FAIL; their trial numbers.

    Stores with heartbeats (``RDBStorage(heartbeat_interval=…)``) go through Optuna's
    ``optuna.storages.fail_stale_trials``. Elsewhere (journal files) a RUNNING trial started more
    than ``older_than_s`` seconds ago is stale (0: every RUNNING trial, for a caller that holds the
    study exclusively, as the server does while it runs a search on it), failed with Optuna's
    public ``Study.tell(number, state=FAIL)``. Completed trials are never touched.
    """
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if not before:
        return []
    with warnings.catch_warnings():  # experimental in Optuna since 2.9; stable in use
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    now = datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        start = t.datetime_start
        if start is None or (now - start).total_seconds() >= older_than_s:
            try:
                study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            except (ValueError, RuntimeError):  # finished meanwhile by its owner
                continue
    still = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    return sorted(before - still)


def clear_stale_journal_lock(url: str | None, stale_after: float = 2.0) -> bool:
    """Remove a journal lock left by a process killed mid-append (e.g. kill -9); whether it did.

    A journal append holds ``<journal>.lock`` for milliseconds; a lock unchanged for
    ``stale_after`` seconds is stale and removed (waiting at most that long), so a restarted
    server does not wait for the lock's grace period. RDB URLs and ``:memory:`` have no lock.
    """
    if not url or "://" in url or url == ":memory:":
        return False
    lock = url + LOCK_SUFFIX
    deadline = time.monotonic() + stale_after + 0.5
    while os.path.lexists(lock):
        try:
            age = time.time() - os.lstat(lock).st_mtime
            if age >= stale_after:
                os.remove(lock)
                _log.warning("removed a stale journal lock %s (%.1f s old)", lock, age)
                return True
        except FileNotFoundError:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return False
