"""Many worker processes on one study: work claimed through the storage (issue 17).

A study searched by workers has a companion *queue study* ``<study>:work`` in the same store.
It holds one Optuna trial per *chunk*: ``CHUNK_PLANS`` consecutive plans of the enumerated plan
space (``PlanSpace.points``, the same order on every machine: the queue records the space's size
and refuses a worker that enumerates another). ``prepare_queue`` creates the study and enqueues
every chunk that still has unscored plans as a ``WAITING`` trial; a worker claims one with
Optuna's storage call ``set_trial_state_values(id, RUNNING)``, which the RDB storage runs under
``SELECT … FOR UPDATE`` and refuses when another worker took it first, so no two workers ever
score the same chunk. While scoring, the worker records Optuna heartbeats for its chunk trial;
it writes the chunk's plans (one trial per plan, ``plena_opt.search.storage.trials``) and then marks
the chunk ``COMPLETE``. A worker killed mid-chunk keeps every plan trial it wrote (each is its own
transaction); its chunk's heartbeat goes stale, another worker fails it through Optuna's
``fail_stale_trials`` and Optuna's ``RetryFailedTrialCallback`` enqueues it again; the retry
skips the plans already stored. Heartbeats need an RDB store (PostgreSQL for several machines).
That is ``--store-plans all``; with ``front`` (the default of ``search --workers``) a chunk
stores only its Pareto fronts as plan trials and every plan's metrics on its chunk trial, in
the one transaction that completes it (``plena_opt.search.storage.chunk_store``): ≈ 10× less storage
work per plan, the same study front, and a killed worker's chunk is retried whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import FrozenTrial, TrialState

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.search.record import POINT_ATTR, Record
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import EvaluatorFactory, _default_factory
from plena_opt.search.run.session import _Search
from plena_opt.search.space.space import Point
from plena_opt.search.storage.chunk_store import (
    MAX_CHUNK_PLANS,
    QUEUE_SUFFIX,
    STORE_ATTR,
    STORE_MODES,
    chunk_fronts,
    complete_chunk,
    encode_records,
)
from plena_opt.search.storage.rdb_bulk import add_finished_trials
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import is_scored, record_trial
from plena_opt.search.workers.work_claims import BEAT_ATTR, Claimer, _fail_stale, _Heartbeat
from plena_opt.search.workers.work_queue import (
    CHUNK_ATTR,
    HEARTBEAT_SECONDS,
    POINTS_ATTR,
    QUEUE_ATTR,
    REQUEST_ATTR,
    QueueInfo,
    WorkerReport,
    _check_storage,
    queue_name,
)

# re-exported: callers name the queue's parts from here
__all__ = [
    "BEAT_ATTR",
    "CHUNK_ATTR",
    "HEARTBEAT_SECONDS",
    "POINTS_ATTR",
    "QUEUE_ATTR",
    "REQUEST_ATTR",
    "Claimer",
    "QueueInfo",
    "WorkerReport",
    "_Heartbeat",
    "_check_storage",
    "_fail_stale",
    "queue_name",
]

# Plans per claimed chunk: one claim, one heartbeat thread and one write per chunk, so storage
# round-trips per plan stay well under one (benchmarks/README_workers.md). ``front`` mode stores
# a few trials per chunk, so its chunks are larger: ≥ FRONT_CHUNK_PLANS and ≤ FRONT_CHUNK_MAX,
# else 1/FRONT_CHUNKS of the space (enough chunks for many workers, a few storage writes each).
CHUNK_PLANS = 64
FRONT_CHUNK_PLANS = 256
FRONT_CHUNK_MAX = 1024
FRONT_CHUNKS = 32


def prepare_queue(
    request: SearchRequest,
    factory: EvaluatorFactory | None = None,
    chunk_plans: int | None = None,
    store_plans: str = "all",
) -> QueueInfo:
    """Create ``request``'s study and its queue (if new) with a chunk per unscored slice;
    ``store_plans``: ``all`` (a trial per plan) or ``front`` (``chunk_store``); ``chunk_plans``
    default ``default_chunk_plans``.

    Idempotent: a queue that exists already is left as it is (its chunks and mode resume).
    """
    url = _check_storage(request.storage)
    if store_plans not in STORE_MODES:
        raise PlenaInputError(
            "store_plans",
            f"--store-plans {store_plans!r}: expected one of {', '.join(STORE_MODES)}",
        )
    if chunk_plans is not None and not 1 <= chunk_plans <= MAX_CHUNK_PLANS:
        raise PlenaInputError("chunk_plans", f"chunk plans must be 1..{MAX_CHUNK_PLANS}")
    s = _Search(request, factory or _default_factory(request), None, None)
    s.open_study()
    name = s.study.study_name
    storage = open_storage(url)
    try:
        queue = optuna.create_study(study_name=queue_name(name), storage=storage)
    except optuna.exceptions.DuplicatedStudyError:
        queue = optuna.load_study(study_name=queue_name(name), storage=storage)
        mode = queue.user_attrs.get(STORE_ATTR, "all")
        return QueueInfo(name, len(s.space), int(queue.user_attrs[CHUNK_ATTR]), 0, mode)
    req = request.model_copy(update={"study": name})
    chunk_plans = chunk_plans or default_chunk_plans(len(s.space), store_plans)
    queue.set_user_attr(STORE_ATTR, store_plans)
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
    return QueueInfo(name, len(points), chunk_plans, len(todo), store_plans)


def default_chunk_plans(points: int, store_plans: str) -> int:
    """Plans per chunk for a space of ``points`` plans: ``CHUNK_PLANS`` (``all``), else
    ``points / FRONT_CHUNKS`` within ``FRONT_CHUNK_PLANS``..``FRONT_CHUNK_MAX``."""
    if store_plans != "front":
        return CHUNK_PLANS
    return max(FRONT_CHUNK_PLANS, min(FRONT_CHUNK_MAX, -(-points // FRONT_CHUNKS)))


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
    from plena_opt.search.workers import codesign_workers

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
    known = set(s.cache)  # plans stored before this worker started (trials, chunk records)
    claimer = Claimer(queue, heartbeat_s)
    chunk_fn = _front_chunk if queue.user_attrs.get(STORE_ATTR) == "front" else _all_chunk
    first = None
    for trial in claimer.claims(report, should_stop):
        if first is None:
            first, report.setup_cpu_s = time.perf_counter(), time.process_time() - c0
        c = int(trial.params["chunk"])
        chunk = points[c * per : (c + 1) * per]
        done = chunk_fn(s, claimer, trial, chunk, known, throttle_s, report)
        if done:
            report.chunks += 1
        else:  # our heartbeat was late (a starved process, a locked SQLite file) and another
            report.reclaimed += 1  # worker failed the chunk as stale; its retry finishes it
        report.busy_s = time.perf_counter() - first
    return report.finish(t0, c0)


def _all_chunk(
    s: _Search,
    claimer: Claimer,
    trial: FrozenTrial,
    chunk: list[Point],
    known: set[str],
    throttle_s: float,
    report: WorkerReport,
) -> bool:
    """``all``: a trial per plan of ``chunk``, then the chunk COMPLETE; a retry (a killed
    worker's chunk) skips the plans stored already. Whether the chunk was still ours."""
    queue = claimer.queue
    with _Heartbeat(queue._storage, trial._trial_id, claimer.heartbeat_s):
        if "failed_trial" in trial.system_attrs:  # a retry: a killed worker stored some
            known |= _stored_keys(s.study)
        todo = [p for p in chunk if p.key not in known]
        recs = _score(s, todo, throttle_s, report)
        add_finished_trials(s.study, [record_trial(r, s.writer.dists, -1) for r in recs])
    known |= {p.key for p in todo}
    report.plans_scored += len(todo)
    report.plans_stored += len(recs)
    try:
        queue._storage.set_trial_state_values(trial._trial_id, TrialState.COMPLETE, [len(todo)])
    except optuna.exceptions.UpdateFinishedTrialError:
        return False  # its plans are stored, and the retry skips stored plans
    return True


def _front_chunk(
    s: _Search,
    claimer: Claimer,
    trial: FrozenTrial,
    chunk: list[Point],
    known: set[str],
    throttle_s: float,
    report: WorkerReport,
) -> bool:
    """``front``: the chunk's fronts as trials, every plan's metrics on the chunk, the chunk
    COMPLETE, in one transaction (``chunk_store``). Whether the chunk was still ours."""
    todo = [p for p in chunk if p.key not in known]
    with _Heartbeat(claimer.queue._storage, trial._trial_id, claimer.heartbeat_s):
        recs = _score(s, todo, throttle_s, report)
        keep = chunk_fronts(recs, [o.sign for o in s.objectives])
        trials = [record_trial(r, s.writer.dists, -1) for r in keep]
        text = encode_records(recs)
    report.plans_scored += len(todo)
    # after the heartbeats: a beat must not land on the finished chunk; the write takes
    # milliseconds, the chunk goes stale only after HEARTBEAT_GRACE periods
    if not complete_chunk(s.study, claimer.queue, trial._trial_id, trials, text, len(recs)):
        return False  # nothing of it was stored; the retry scores it whole
    report.plans_stored += len(trials)
    return True


def _score(s: _Search, todo: list[Point], throttle_s: float, report: WorkerReport) -> list[Record]:
    """Records of ``todo``, scored through the batch API (evaluator CPU counted in ``report``)."""
    c0, recs = time.process_time(), []
    for batch, prec in s.groups():  # one evaluator per (batch size, precision)
        group = [p for p in todo if p.batch_size == batch and p.precision == prec]
        recs.extend(s.score(group))
        if throttle_s and group:
            time.sleep(throttle_s * len(group))
    report.score_cpu_s += time.process_time() - c0
    return recs


def queue_progress(url: str, study: str) -> dict[str, int]:
    """Chunks of ``study``'s queue by state (``waiting``, ``running``, ``complete``, ``fail``)."""
    queue, _ = load_queue(url, study)
    out: dict[str, int] = {}
    for t in queue.get_trials(deepcopy=False):
        out[t.state.name.lower()] = out.get(t.state.name.lower(), 0) + 1
    return out


def queue_done(url: str, study: str) -> tuple[int, int]:
    """``(done, total)`` work items of ``study``'s queue: chunks (or hardware points) with a
    COMPLETE trial, of all those queued (a stale chunk's retry counts once, with its chunk)."""
    queue, _ = load_queue(url, study)
    items: dict[str, bool] = {}
    for t in queue.get_trials(deepcopy=False):
        key = repr(sorted(t.params.items()))
        items[key] = items.get(key, False) or t.state == TrialState.COMPLETE
    return sum(items.values()), len(items)
