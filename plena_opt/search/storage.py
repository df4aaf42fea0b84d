"""Where studies live: a journal file by default, or any storage URL Optuna accepts.

Default: ``JournalStorage(JournalFileBackend("plena-opt-studies.log"))`` in the working
directory. Every ``tell`` is one appended, lock-protected record, so a crash loses no completed
trial, several processes on one machine may share it, and optuna-dashboard opens it
(service-conventions §1.4; measured against SQLite in benchmarks/README_search.md).
A ``--storage`` value containing ``://`` is an RDB URL (``sqlite:///x.db``, ``postgresql://…``);
anything else is a journal file path.

Journal safety: an existing non-empty file is read record by record before use and refused if
it is not an Optuna journal, so a mistyped path is never written to. A writer killed mid-append
leaves a torn last line (no ``\\n``); Optuna's next append would land on it and make the whole
journal unreadable, so the torn tail is cut off, under the journal's lock, when the journal is
opened and again before every append (the lock is taken by appends only, so a tail seen while
holding it belongs to a writer that died; it was never a completed record).
"""

from __future__ import annotations

import json
import logging
import os
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
# Every Optuna journal record is one JSON object whose first key is op_code (JournalStorage
# writes {"op_code": …, "worker_id": …, …} with compact separators).
RECORD_PREFIX = b'{"op_code":'

_log = logging.getLogger(__name__)
_OPEN: dict[str, optuna.storages.BaseStorage] = {}
_OPEN_LOCK = threading.Lock()


def open_storage(url: str | None = None) -> optuna.storages.BaseStorage:
    """The study store named by ``url`` (None → default journal), created if needed.

    One storage object per store and process: searches that share a store (the server runs
    several) share its in-memory replay of the journal instead of each loading it again.
    Torn tails left later by other processes are still repaired: every append checks first.
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
    if path.exists():
        check_journal(path)  # before anything is written to it
    lock = RepairingJournalLock(str(path), grace_period=LOCK_GRACE_SECONDS)
    if path.exists():
        try:
            lock.repair()  # logs a warning saying what was dropped, if anything
        except OSError as exc:  # e.g. a read-only folder: reading still works, appends repair
            _log.warning("journal %s: torn tail not repaired now (%s)", path, exc)
    try:
        return JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    except Exception as exc:
        raise PlenaInputError("storage", f"--storage {url!r}: cannot open ({exc})") from exc


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
    """Raise ``PlenaInputError`` unless ``path`` is empty or an Optuna journal file.

    Every complete line must be a JSON object with an integer ``op_code``; an unterminated
    last line must look like the start of a record (torn by a crash, repaired on open).
    Reads only; never writes.
    """
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                if not line.endswith(b"\n"):
                    if number == 1 and not line.startswith(RECORD_PREFIX):
                        raise _not_a_journal(path, "line 1 is not a journal record")
                    if not _is_torn_record(line):
                        raise _not_a_journal(path, f"line {number} is not a journal record")
                    break
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if not isinstance(record, dict) or not isinstance(record.get("op_code"), int):
                    raise _not_a_journal(path, f"line {number} is not a journal record")
    except OSError as exc:
        raise PlenaInputError("storage", f"--storage {str(path)!r}: cannot read ({exc})") from exc


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

    Journal paths and ``sqlite:///file`` URLs: the file exists. In-memory SQLite and server
    databases (postgresql, …): always True (they are opened to list).
    """
    url = url or DEFAULT_STORAGE
    if "://" not in url:
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
