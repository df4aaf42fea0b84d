"""Many worker processes on one study: work claimed through the storage (issue 17).

A study searched by workers has a companion *queue study* ``<study>:work`` in the same store.
It holds one Optuna trial per *chunk*: ``CHUNK_PLANS`` consecutive plans of the enumerated plan
space (``PlanSpace.points``, the same order on every machine: the queue records the space's size
and refuses a worker that enumerates another). ``prepare_queue`` creates the study and enqueues
every chunk that still has unscored plans as a ``WAITING`` trial; a worker claims one with
Optuna's storage call ``set_trial_state_values(id, RUNNING)``, which the RDB storage runs under
``SELECT … FOR UPDATE`` and refuses when another worker took it first, so no two workers ever
score the same chunk. While scoring, the worker records Optuna heartbeats for its chunk trial;
it writes the chunk's plans (one trial per plan, ``plena_opt.search.trials``) and then marks the
chunk ``COMPLETE``. A worker killed mid-chunk keeps every plan trial it wrote (each is its own
transaction); its chunk's heartbeat goes stale, another worker fails it through Optuna's
``fail_stale_trials`` and Optuna's ``RetryFailedTrialCallback`` enqueues it again; the retry
skips the plans already stored. Heartbeats need an RDB store (PostgreSQL for several machines).
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import optuna
from optuna.distributions import IntDistribution
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.trial import FrozenTrial, TrialState

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.search.rdb_bulk import add_finished_trials
from plena_opt.search.record import POINT_ATTR
from plena_opt.search.request import MEMORY_STORAGE, SearchRequest
from plena_opt.search.runner import EvaluatorFactory, _default_factory
from plena_opt.search.session import _Search
from plena_opt.search.space import Point
from plena_opt.search.storage import HEARTBEAT_GRACE, MAX_RETRY, open_storage
from plena_opt.search.trials import is_scored, record_trial

QUEUE_SUFFIX = ":work"
QUEUE_ATTR = "plena:queue_for"  # on the queue study: the study it feeds
REQUEST_ATTR = "plena:request"  # the SearchRequest (JSON) every worker runs
POINTS_ATTR = "plena:legal_points"
CHUNK_ATTR = "plena:chunk_plans"
BEAT_ATTR = "plena:lease"  # on a RUNNING chunk, stores without heartbeats: last beat (epoch s)
# Plans per claimed chunk: one claim, one heartbeat thread and one write per chunk, so storage
# round-trips per plan stay well under one (benchmarks/README.md, "scale out").
CHUNK_PLANS = 64
# Heartbeat period (s); a chunk silent for ``storage.HEARTBEAT_GRACE`` periods is stale.
HEARTBEAT_SECONDS = 5.0


def queue_name(study: str) -> str:
    """The queue study's name for ``study``."""
    return study + QUEUE_SUFFIX


def _check_storage(url: str | None) -> str:
    if not url or "://" not in url or url == MEMORY_STORAGE:
        raise PlenaInputError(
            "storage",
            f"--storage {url!r}: workers need an RDB URL (postgresql://user@host/db for several "
            "machines, sqlite:///file.db for one) or a gRPC storage proxy (grpc://host:port); a "
            "journal file or :memory: has no heartbeats",
        )
    return url


def _heartbeats(storage: optuna.storages.BaseStorage) -> bool:
    """Whether ``storage`` keeps Optuna heartbeats (an RDB store opened with them)."""
    return is_heartbeat_enabled(storage)


@dataclass(frozen=True)
class QueueInfo:
    """A prepared study: its name, plans in the space, plans per chunk, chunks enqueued now."""

    study: str
    legal_points: int
    chunk_plans: int
    enqueued: int


def prepare_queue(
    request: SearchRequest,
    factory: EvaluatorFactory | None = None,
    chunk_plans: int = CHUNK_PLANS,
) -> QueueInfo:
    """Create ``request``'s study and its queue (if new) with a chunk per unscored slice.

    Idempotent: a queue that exists already is left as it is (its chunks resume).
    """
    url = _check_storage(request.storage)
    s = _Search(request, factory or _default_factory(request), None, None)
    s.open_study()
    name = s.study.study_name
    storage = open_storage(url)
    try:
        queue = optuna.create_study(study_name=queue_name(name), storage=storage)
    except optuna.exceptions.DuplicatedStudyError:
        queue = optuna.load_study(study_name=queue_name(name), storage=storage)
        return QueueInfo(name, len(s.space), int(queue.user_attrs[CHUNK_ATTR]), 0)
    req = request.model_copy(update={"study": name})
    queue.set_user_attr(QUEUE_ATTR, name)
    queue.set_user_attr(REQUEST_ATTR, req.model_dump_json())
    queue.set_user_attr(POINTS_ATTR, len(s.space))
    queue.set_user_attr(CHUNK_ATTR, chunk_plans)
    points = s.space.points
    n_chunks = -(-len(points) // chunk_plans)
    dist = IntDistribution(0, max(n_chunks - 1, 0))
    todo = [
        c
        for c in range(n_chunks)
        if any(p.key not in s.cache for p in points[c * chunk_plans : (c + 1) * chunk_plans])
    ]
    queue.add_trials(
        FrozenTrial(
            number=-1,
            state=TrialState.WAITING,
            value=None,
            values=None,
            datetime_start=None,
            datetime_complete=None,
            params={"chunk": c},
            distributions={"chunk": dist},
            user_attrs={},
            system_attrs={},
            intermediate_values={},
            trial_id=-1,
        )
        for c in todo
    )
    return QueueInfo(name, len(points), chunk_plans, len(todo))


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


@dataclass
class WorkerReport:
    """What one worker did: chunks it finished, plans it scored and stored, stale chunks it
    failed (for retry), chunks of its own another worker had failed as stale meanwhile (its
    plans stay stored; the retry skips them), seconds it ran, CPU seconds it used, its peak
    resident memory (MiB; 0 where the OS does not say)."""

    study: str
    chunks: int = 0
    reclaimed: int = 0
    plans_scored: int = 0
    plans_stored: int = 0
    stale_failed: int = 0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mib: float = 0.0

    def finish(self, t0: float, c0: float) -> WorkerReport:
        """Record the time, CPU time and peak memory since ``t0``/``c0``; the report."""
        self.elapsed_s = time.perf_counter() - t0
        self.cpu_s = time.process_time() - c0
        try:
            import resource

            self.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB
        except ImportError:  # not POSIX
            pass
        return self


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


def _stored_keys(study: optuna.Study) -> set[str]:
    return {t.user_attrs[POINT_ATTR] for t in study.get_trials(deepcopy=False) if is_scored(t)}


def load_queue(
    url: str, study: str, heartbeat_s: float = HEARTBEAT_SECONDS
) -> tuple[optuna.Study, SearchRequest]:
    """The queue study of ``study`` in ``url`` and the request its workers run."""
    storage = open_storage(_check_storage(url), heartbeat_s=heartbeat_s)
    names = optuna.get_all_study_names(storage)
    if queue_name(study) not in names:
        known = [n for n in names if not n.endswith(QUEUE_SUFFIX)]
        raise PlenaNotFoundError(
            "study",
            f"study {study!r} has no work queue in {url} (create it with plena-opt search "
            f"--workers N --storage URL …); studies there: {', '.join(known) or '(none)'}",
        )
    queue = optuna.load_study(study_name=queue_name(study), storage=storage)
    request = SearchRequest.model_validate_json(queue.user_attrs[REQUEST_ATTR])
    return queue, request.model_copy(update={"storage": url, "study": study})


def run_worker(
    url: str,
    study: str,
    factory: EvaluatorFactory | None = None,
    heartbeat_s: float = HEARTBEAT_SECONDS,
    should_stop: Callable[[], bool] | None = None,
    throttle_s: float = 0.0,
) -> WorkerReport:
    """Claim and score chunks of ``study`` until none is waiting or running; what it did.

    ``throttle_s``: extra seconds per scored plan (benchmarks: a slower evaluator's stand-in).
    """
    t0, c0 = time.perf_counter(), time.process_time()
    queue, request = load_queue(url, study, heartbeat_s)
    from plena_opt.search import codesign_workers

    if codesign_workers.is_codesign(queue):  # hardware points, not plan chunks
        return codesign_workers.score_points(queue, request, heartbeat_s, should_stop)
    s = _Search(request, factory or _default_factory(request), None, None)
    s.open_study()
    points, per = s.space.points, int(queue.user_attrs[CHUNK_ATTR])
    if len(points) != int(queue.user_attrs[POINTS_ATTR]):
        raise PlenaInputError(
            "study",
            f"this worker enumerates {len(points)} plans but study {study!r} was queued with "
            f"{queue.user_attrs[POINTS_ATTR]}: the model, NoC or profiles differ on this machine",
        )
    report = WorkerReport(study)
    known = set(s.cache)
    claimer = Claimer(queue, heartbeat_s)
    for trial in claimer.claims(report, should_stop):
        with _Heartbeat(queue._storage, trial._trial_id, heartbeat_s):
            if "failed_trial" in trial.system_attrs:  # a retry: a killed worker stored some
                known |= _stored_keys(s.study)
            c = int(trial.params["chunk"])
            todo = [p for p in points[c * per : (c + 1) * per] if p.key not in known]
            stored = _score_and_store(s, todo, throttle_s)
        known |= {p.key for p in todo}
        report.plans_scored += len(todo)
        report.plans_stored += stored
        try:
            queue._storage.set_trial_state_values(trial._trial_id, TrialState.COMPLETE, [len(todo)])
        except optuna.exceptions.UpdateFinishedTrialError:
            # our heartbeat was late (a starved process, a locked SQLite file) and another worker
            # failed the chunk as stale; its plans are stored, and the retry skips stored plans
            report.reclaimed += 1
            continue
        report.chunks += 1
    return report.finish(t0, c0)


def _score_and_store(s: _Search, todo: list[Point], throttle_s: float) -> int:
    recs = []
    for batch, prec in s.groups():  # one evaluator per (batch size, precision)
        group = [p for p in todo if p.batch_size == batch and p.precision == prec]
        recs.extend(s.score(group))
        if throttle_s and group:
            time.sleep(throttle_s * len(group))
    add_finished_trials(s.study, [record_trial(r, s.writer.dists, -1) for r in recs])
    return len(recs)


def queue_progress(url: str, study: str) -> dict[str, int]:
    """Chunks of ``study``'s queue by state (``waiting``, ``running``, ``complete``, ``fail``)."""
    queue, _ = load_queue(url, study)
    out: dict[str, int] = {}
    for t in queue.get_trials(deepcopy=False):
        out[t.state.name.lower()] = out.get(t.state.name.lower(), 0) + 1
    return out
