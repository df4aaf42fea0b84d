"""Claiming a work queue's chunks through the storage, heartbeats, stale chunks (issue 17).

``Claimer`` takes WAITING chunk trials (RUNNING under the storage's row lock: no two workers
get the same chunk); ``_Heartbeat`` records Optuna heartbeats for a claimed chunk (a lease
attribute through Optuna's gRPC proxy, which has none); ``_fail_stale`` fails the chunks whose
worker went silent and Optuna's ``RetryFailedTrialCallback`` enqueues them again.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import optuna
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.trial import FrozenTrial, TrialState

from plena_opt.search.storage.storage import HEARTBEAT_GRACE, MAX_RETRY

if TYPE_CHECKING:
    from plena_opt.search.workers.workers import WorkerReport

BEAT_ATTR = "plena:lease"  # on a RUNNING chunk, stores without heartbeats: last beat (epoch s)


def _heartbeats(storage: optuna.storages.BaseStorage) -> bool:
    """Whether ``storage`` keeps Optuna heartbeats (an RDB store opened with them)."""
    return is_heartbeat_enabled(storage)


class _Heartbeat:
    """Records an Optuna heartbeat for ``trial_id`` every ``period`` s while in the block."""

    def __init__(self, storage: optuna.storages.BaseStorage, trial_id: int, period: float) -> None:
        self.storage, self.trial_id, self.period = storage, trial_id, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _record(self) -> None:
        if _heartbeats(self.storage):
            self.storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
        else:  # a gRPC proxy: the lease ``_fail_stale`` reads
            self.storage.set_trial_system_attr(self.trial_id, BEAT_ATTR, time.time())

    def _beat(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self._record()
            except optuna.exceptions.UpdateFinishedTrialError:  # failed as stale meanwhile
                return

    def __enter__(self) -> _Heartbeat:
        self._record()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Claimer:
    """Takes WAITING chunks of ``queue`` (RUNNING under the storage's row lock) for one worker.

    The waiting list is read once and tried in this worker's own random order (workers rarely
    contend; a chunk another worker took is refused by the store in one statement); it is read
    again only when exhausted. Reading it at every claim cost a read of the whole queue per
    chunk (benchmarks/README.md, "17 saturation").
    """

    def __init__(self, queue: optuna.Study, heartbeat_s: float) -> None:
        self.queue, self.rng = queue, random.Random()  # seeded from the OS: each worker its own
        self.heartbeat_s = heartbeat_s
        self._todo: list[FrozenTrial] = []
        self._next_check = 0.0

    def fail_stale(self) -> int:
        """``_fail_stale`` at most once per heartbeat period (it cost more client CPU than the
        chunk's bulk write when run before every claim); stale chunks it failed."""
        if time.monotonic() < self._next_check:
            return 0
        self._next_check = time.monotonic() + self.heartbeat_s
        return _fail_stale(self.queue, self.heartbeat_s)

    def claims(
        self, report: WorkerReport, should_stop: Callable[[], bool] | None = None
    ) -> Iterator[FrozenTrial]:
        """Claimed chunks, one at a time, until none is waiting or running (or ``should_stop``);
        stale chunks are failed on the way (counted in ``report``)."""
        while not (should_stop and should_stop()):
            report.stale_failed += self.fail_stale()
            trial = self.claim()
            if trial is not None:
                yield trial
            elif not self.queue.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                return
            else:  # others still work: wait for them or for their staleness
                time.sleep(min(self.heartbeat_s, 1.0))

    def claim(self) -> FrozenTrial | None:
        """A claimed chunk; None when none is waiting."""
        storage = self.queue._storage
        for _ in range(2):  # the cached list (or a first read), then once exhausted a re-read
            if not self._todo:
                self._todo = self.queue.get_trials(deepcopy=False, states=(TrialState.WAITING,))
                self.rng.shuffle(self._todo)
            while self._todo:
                t = self._todo.pop()
                try:
                    if storage.set_trial_state_values(t._trial_id, TrialState.RUNNING):
                        return t
                except optuna.exceptions.UpdateFinishedTrialError:  # taken and finished
                    continue
        return None


def _fail_stale(queue: optuna.Study, heartbeat_s: float) -> int:
    """Fail the chunks whose worker went silent, enqueue them again; how many it failed."""
    if not _heartbeats(queue._storage):
        return _fail_stale_leases(queue, heartbeat_s * HEARTBEAT_GRACE)
    before = len(queue.get_trials(deepcopy=False, states=(TrialState.FAIL,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(queue)
    return len(queue.get_trials(deepcopy=False, states=(TrialState.FAIL,))) - before


def _fail_stale_leases(queue: optuna.Study, grace_s: float) -> int:
    """``fail_stale_trials`` for a store without heartbeats (Optuna's gRPC proxy): a RUNNING
    chunk whose lease (``BEAT_ATTR``, else its start) is older than ``grace_s`` is failed, and
    Optuna's ``RetryFailedTrialCallback`` enqueues it again. Leases are the workers' clocks:
    machines need clocks in step to well under ``grace_s`` (NTP)."""
    now, failed = time.time(), 0
    with warnings.catch_warnings():  # the callback's name changed in Optuna 4.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = (
            getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
            or optuna.storages.RetryFailedTrialCallback
        )
        retry = retry(max_retry=MAX_RETRY)
    for t in queue.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        start = t.datetime_start.timestamp() if t.datetime_start else now
        if now - max(float(t.system_attrs.get(BEAT_ATTR, 0.0)), start) <= grace_s:
            continue
        try:
            if not queue._storage.set_trial_state_values(t._trial_id, TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:  # finished or failed by another
            continue
        failed += 1
        retry(queue, t)
    return failed
