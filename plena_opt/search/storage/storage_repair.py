"""Care of a study store: journal checks, torn tails, stale locks and stale trials.

Journal safety: an existing non-empty file is read record by record before use and refused if
it is not an Optuna journal, so a mistyped path is never written to; damage in the middle (a
line that is not a record, records out of step with their trials) is refused naming the study
and line, with the ``plena-opt studies repair`` command that salvages it into a new file. A
writer killed mid-append leaves a torn last line (no ``\\n``); Optuna's next append would land
on it and make the whole journal unreadable, so the torn tail is cut off, under the journal's
lock (``RepairingJournalLock``), when the journal is opened and again before every append (the
lock is taken by appends only, so a tail seen while holding it belongs to a writer that died; it
was never a completed record). A lock left by a killed writer is cleared
(``clear_stale_journal_lock``) and RUNNING trials of a stopped process are failed
(``fail_stale_trials``, through Optuna's public API). ``plena_opt.search.storage.storage`` opens
stores with these.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from datetime import datetime
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileSymlinkLock
from optuna.trial import TrialState

from plena_opt.errors import PlenaInputError, PlenaStoreError
from plena_opt.search.storage.journal import RECORD_PREFIX, scan_journal

# A journal lock older than this (s) is stale: its holder died (e.g. kill -9) mid-append.
# Appends take milliseconds, so 5 s is safe and spares a restart Optuna's 30 s default wait.
LOCK_GRACE_SECONDS = 5
# Optuna's journal lock file is the journal path plus this suffix (JournalFileSymlinkLock).
LOCK_SUFFIX = ".lock"
# A RUNNING trial older than this (s) on a store without heartbeats is left by a process that
# stopped: plena-opt's trials run milliseconds (one plan's score) to a few seconds (a first
# evaluation that routes a large NoC); 10 minutes leaves a wide margin.
STALE_TRIAL_SECONDS = 600.0

# The store's one logger, as before this module was split from ``storage``.
_log = logging.getLogger("plena_opt.search.storage.storage")


def _not_a_journal(path: Path, why: str) -> PlenaStoreError:
    return PlenaStoreError(
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
        raise PlenaStoreError(
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


def torn_tail(path: str | Path, chunk: int = 1 << 16) -> tuple[int, int] | None:
    """``(keep, size)`` when ``path`` ends in a torn record (bytes ``keep..size`` after its last
    newline), else None (no file, empty, or ending in a newline). Reads only the tail.
    Refuses (:class:`PlenaStoreError`) a tail that does not look like a journal record."""
    try:
        f = open(path, "rb")
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
    return keep, size


def torn_tail_note(path: str | Path) -> str | None:
    """What a read-only command says of a torn tail it leaves in place (None: there is none)."""
    span = torn_tail(path)
    if span is None:
        return None
    keep, size = span
    return (
        f"journal {str(path)!r} ends in an incomplete record ({size - keep} bytes at offset "
        f"{keep}) left by a writer that stopped mid-append; it was left as it is (listing only "
        "reads). The next search on this store drops it; or salvage every intact record into a "
        f"new file with: plena-opt studies repair --storage {path} --output {path}.repaired"
    )


def _cut_torn_tail(path: str) -> str | None:
    """Truncate ``path`` to just after its last newline (caller holds the journal lock).

    Returns a note on the dropped bytes, or None when the file is empty or ends in a newline.
    Refuses (``PlenaStoreError``) to drop a tail that does not look like a journal record.
    """
    span = torn_tail(path)  # read-only until a repair is needed (a read-only store still lists)
    if span is None:
        return None
    keep, size = span
    with open(path, "r+b") as f:
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return (
        f"dropped an incomplete last record ({size - keep} bytes at offset {keep}) left by a "
        "writer that stopped mid-append; every completed record is kept"
    )


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
