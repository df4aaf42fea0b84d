"""The journal file under the study store: batched appends, damage scan and salvage.

Optuna's journal is one JSON record per line (``{"op_code": …, "worker_id": …, …}``); a store is
rebuilt by replaying the lines in order, trials numbered by their create-trial records. Three
things live here:

* ``BatchingJournalBackend`` — Optuna's ``BaseJournalBackend`` (public) over a file, like
  ``JournalFileBackend``, whose appends can be grouped: inside ``batch()`` the file lock is held
  and records are kept in memory, then written with one append and one ``fsync``. Appends outside
  a batch behave as Optuna's (lock, append, fsync per record).
* ``scan_journal`` — finds damage in the middle of a file (a line that is not a record: a stray
  byte, a blank line, a run of zeros) and records that are out of step with the trials they name
  (a deleted create-trial record shifts every later trial), naming the study and line.
* ``salvage_journal`` — writes every intact record to a new file, rebuilding a trial whose
  create-trial record was lost from its later records; the original file is only read.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optuna.storages.journal import BaseJournalBackend, JournalFileSymlinkLock

# Optuna's journal op codes (the file format, ``JournalOperation`` in optuna.storages.journal).
CREATE_STUDY, DELETE_STUDY, SET_STUDY_USER_ATTR, SET_STUDY_SYSTEM_ATTR = 0, 1, 2, 3
CREATE_TRIAL, SET_TRIAL_PARAM, SET_TRIAL_STATE_VALUES = 4, 5, 6
TRIAL_OPS = (5, 6, 7, 8, 9)
FINISHED_STATES = (1, 2, 3)  # COMPLETE, PRUNED, FAIL (``TrialState`` values)
# System attribute on trials plena-opt writes in batches: the trial's number in its study when it
# was written, so a lost create-trial record before it is detected.
NUMBER_ATTR = "plena:number"
# Every record starts so (JournalStorage writes compact JSON with op_code first).
RECORD_PREFIX = b'{"op_code":'


def _dumps(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


class BatchingJournalBackend(BaseJournalBackend):
    """A journal file whose appends are grouped inside ``batch()`` (one lock, one fsync)."""

    def __init__(self, path: str, lock: JournalFileSymlinkLock) -> None:
        self.path = path
        self.lock = lock
        if not os.path.exists(path):
            open(path, "ab").close()
        self._offsets: dict[int, int] = {0: 0}  # log number -> byte offset of its line
        self._mutex = threading.Lock()  # orders this process's appends, batch starts and ends
        self._depth = 0
        self._pos = 0  # log number the replay has read up to
        self._base = 0  # file records before the batch (the file is locked during a batch)
        self._head: list[dict[str, Any]] = []  # file records [_head_from, _base) read at start
        self._head_from = 0
        self._buffer: list[dict[str, Any]] = []
        # Readers of the committed state (``committed_view``) and batches exclude each other, so
        # what a reader reports (e.g. GetStudy's trial count) is already on disk.
        self._gate = threading.Condition()
        self._readers = 0
        self._batching = 0

    def _read_file(self, start: int) -> Iterator[dict[str, Any]]:
        """Complete records from log number ``start`` on (stops at a torn last line)."""
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            number, offset = (start, self._offsets[start]) if start in self._offsets else (0, 0)
            f.seek(offset)
            for line in f:
                if offset + len(line) > size or not line.endswith(b"\n"):
                    break
                offset += len(line)
                number += 1
                self._offsets[number] = offset
                if number > start:
                    yield json.loads(line)

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        n = log_number_from
        if self._depth == 0:
            for record in self._read_file(n):
                n += 1
                yield record
        else:
            records = self._head + self._buffer
            for i in range(max(n, self._head_from) - self._head_from, len(records)):
                n = self._head_from + i + 1
                yield records[i]
        self._pos = max(self._pos, n)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        with self._mutex:
            if self._depth:
                self._buffer.extend(logs)
                return
            self.lock.acquire()
            try:
                self._write(logs)
            finally:
                self.lock.release()

    def _write(self, logs: list[dict[str, Any]], first: int | None = None) -> None:
        """Append ``logs``; ``first``: their log number when known (the file is locked)."""
        lines = [_dumps(r) for r in logs]
        with open(self.path, "ab") as f:
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())
        if first is not None and first in self._offsets:
            offset = self._offsets[first]
            for i, line in enumerate(lines, start=first + 1):
                offset += len(line)
                self._offsets[i] = offset

    @contextmanager
    def committed_view(self) -> Iterator[None]:
        """Wait for batches in progress to be written; none starts until the block ends.

        The storage's in-memory replay sees a batch's records before they reach the file; a
        reader that reports counts to a user (who may then kill the process) reads in here.
        Never call it from inside a batch of the same thread (it would wait for itself).
        """
        with self._gate:
            while self._batching:
                self._gate.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._gate:
                self._readers -= 1
                self._gate.notify_all()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold the file lock; records appended inside are written at the end in one append.

        Waits for ``committed_view`` readers to finish first (see there).
        """
        with self._gate:
            while self._readers:
                self._gate.wait()
            self._batching += 1
        try:
            with self._locked_batch():
                yield
        finally:
            with self._gate:
                self._batching -= 1
                self._gate.notify_all()

    @contextmanager
    def _locked_batch(self) -> Iterator[None]:
        """Hold the file lock; records appended inside are written at the end in one append.

        Any thread's appends during a batch join its buffer (the ``JournalStorage`` orders them
        under its own lock), so ``_mutex`` is held only while a batch starts or ends: a thread
        inside a batch may wait for the storage's lock held by another thread that is appending.
        """
        with self._mutex:
            if self._depth == 0:
                self.lock.acquire()
                try:
                    self._head_from = self._pos
                    self._head = list(self._read_file(self._pos))
                    self._base = self._pos + len(self._head)
                except BaseException:
                    self.lock.release()
                    raise
                self._buffer = []
            self._depth += 1
        try:
            yield
        finally:
            with self._mutex:
                self._depth -= 1
                if self._depth == 0:
                    try:
                        if self._buffer:
                            self._write(self._buffer, self._base)
                    finally:
                        self._buffer, self._head = [], []
                        self.lock.release()


# -- damage ---------------------------------------------------------------------------------------


@dataclass
class Damage:
    """One problem: 1-based ``line`` and byte ``offset`` in the file, what is wrong, the study."""

    line: int
    offset: int
    problem: str
    study: str | None = None

    def describe(self) -> str:
        where = f", study {self.study!r}" if self.study else ""
        return f"line {self.line} (byte {self.offset}{where}) {self.problem}"


@dataclass
class JournalScan:
    """What a scan found: records read, damage, and whether the last line is torn."""

    records: int = 0
    damage: list[Damage] = field(default_factory=list)
    torn_tail: bool = False


class _Replay:
    """The minimum of Optuna's replay needed to check records against their trials."""

    def __init__(self) -> None:
        self.studies: dict[int, str] = {}
        self.next_study = 0
        self.trials: list[list[Any]] = []  # [study_id, creator worker, finished]
        self.per_study: dict[int, int] = {}
        self.last_study: int | None = None

    def study_name(self, study_id: int | None) -> str | None:
        return None if study_id is None else self.studies.get(study_id)

    def apply(self, r: dict[str, Any]) -> str | None:
        """Apply record ``r``; a description of how it is out of step, or None."""
        op = r.get("op_code")
        if op == CREATE_STUDY:
            if r.get("study_name") not in self.studies.values():
                self.studies[self.next_study] = str(r.get("study_name"))
                self.last_study = self.next_study
                self.next_study += 1
        elif op == CREATE_TRIAL:
            sid = r.get("study_id")
            if sid in self.studies:
                number = self.per_study.get(sid, 0)
                self.per_study[sid] = number + 1
                state = r.get("state", 0)
                self.trials.append([sid, r.get("worker_id"), state in FINISHED_STATES])
                self.last_study = sid
                expected = (r.get("system_attrs") or {}).get(NUMBER_ATTR)
                if expected is not None and expected > number:
                    return (
                        f"holds trial #{expected}, replayed as #{number}: "
                        f"{expected - number} create-trial record(s) before it are missing"
                    )
        elif op in TRIAL_OPS:
            tid = r.get("trial_id")
            if not isinstance(tid, int) or tid >= len(self.trials):
                return (
                    f"names trial id {tid}, but only {len(self.trials)} trials exist at this "
                    "point: a create-trial record is missing"
                )
            sid, creator, finished = self.trials[tid]
            self.last_study = sid
            if finished and r.get("worker_id") == creator and op in (5, 6):
                return (
                    f"updates trial id {tid}, which its own writer had already finished: the "
                    "records are out of step (a create-trial record is missing)"
                )
            if op == SET_TRIAL_STATE_VALUES and r.get("state") in FINISHED_STATES:
                self.trials[tid][2] = True
        elif isinstance(r.get("study_id"), int):
            self.last_study = r["study_id"]
        return None


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if isinstance(record, dict) and isinstance(record.get("op_code"), int):
        return record
    return None


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    offset = 0
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            yield number, offset, line
            offset += len(line)


def scan_journal(path: str | Path, limit: int = 20) -> JournalScan:
    """Read ``path`` and report up to ``limit`` damaged or out-of-step records (reads only)."""
    scan = JournalScan()
    replay = _Replay()
    for number, offset, line in _lines(Path(path)):
        if not line.endswith(b"\n"):
            scan.torn_tail = True
            break
        record = _parse(line)
        if record is None:
            zeros = line.count(b"\0")
            what = "is a blank line" if not line.strip() else "is not a journal record"
            if zeros > len(line) // 2:
                what = f"holds {zeros} zero bytes, not a journal record"
            scan.damage.append(Damage(number, offset, what, replay.study_name(replay.last_study)))
        else:
            scan.records += 1
            problem = replay.apply(record)
            if problem:
                scan.damage.append(
                    Damage(number, offset, problem, replay.study_name(replay.last_study))
                )
        if len(scan.damage) >= limit:
            break
    return scan


def salvage_journal(src: str | Path, dst: str | Path) -> dict[str, int]:
    """Write every intact record of ``src`` to the new file ``dst`` (``src`` is only read).

    Lines that are not records are dropped. A trial whose create-trial record is lost is rebuilt
    where its first later record names it (study: its writer's previous trial), so its params,
    state, values and attributes survive. A trial stored in one record (plena-opt's batches) whose
    record is lost cannot be rebuilt: it is counted in ``lost`` and the later trials' numbers are
    renumbered. Returns counts: ``kept``, ``dropped``, ``rebuilt``, ``lost``.
    """
    src, dst = Path(src), Path(dst)
    if dst.exists():
        raise FileExistsError(f"{dst} exists; choose a new file for the salvaged journal")
    kept = dropped = rebuilt = lost = 0
    per_study: dict[int, int] = {}
    lost_in: dict[int, int] = {}
    studies: dict[int, str] = {}
    next_study = 0
    trial_study: list[int] = []
    worker_study: dict[str, int] = {}
    out: list[bytes] = []
    for _, _, line in _lines(src):
        record = _parse(line) if line.endswith(b"\n") else None
        at = line.rfind(RECORD_PREFIX)
        if (
            record is None and at > 0 and line.endswith(b"\n")
        ):  # junk (zeros, a stray byte) glued before a record
            record = _parse(line[at:])
            line = line[at:]
        if record is None:
            dropped += 1
            continue
        op = record["op_code"]
        worker = str(record.get("worker_id", ""))
        if op == CREATE_STUDY and record.get("study_name") not in studies.values():
            studies[next_study] = str(record.get("study_name"))
            next_study += 1
        elif op == CREATE_TRIAL and record.get("study_id") in studies:
            sid = record["study_id"]
            trial_study.append(sid)
            worker_study[worker] = sid
            number = per_study.get(sid, 0)
            per_study[sid] = number + 1
            attrs = record.get("system_attrs") or {}
            expected = attrs.get(NUMBER_ATTR)
            if isinstance(expected, int) and expected != number:  # trials before it were lost
                lost += max(expected - number - lost_in.get(sid, 0), 0)
                lost_in[sid] = max(expected - number, lost_in.get(sid, 0))
                record["system_attrs"] = {**attrs, NUMBER_ATTR: number}
                line = _dumps(record)
        elif op in TRIAL_OPS:
            tid = record.get("trial_id")
            if not isinstance(tid, int):
                dropped += 1
                continue
            while tid >= len(trial_study):  # its create-trial record was lost: rebuild it
                sid = worker_study.get(worker, trial_study[-1] if trial_study else None)
                if sid is None:
                    break
                out.append(_dumps({"op_code": CREATE_TRIAL, "worker_id": worker,
                                   "study_id": sid, "datetime_start": None}))  # fmt: skip
                trial_study.append(sid)
                rebuilt += 1
            if tid >= len(trial_study):
                dropped += 1
                continue
        out.append(line)
        kept += 1
    tmp = dst.with_name(dst.name + ".part")
    with open(tmp, "wb") as f:
        f.writelines(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dst)
    return {"kept": kept, "dropped": dropped, "rebuilt": rebuilt, "lost": lost}
