"""Co-design searches scored by many worker processes (issue 17): hardware points as work units.

``prepare_codesign_queue`` creates the queue study ``<study>:work`` of a co-design: it *is* the
outer Optuna study (its directions are the objectives', plus cost), with one ``WAITING`` trial
per allowed hardware point, the knobs as its params. A worker claims a point as it claims a plan
chunk (``plena_opt.search.workers.workers``: ``set_trial_state_values(RUNNING)`` under the storage's
row lock, heartbeats, stale points failed and enqueued again), computes the point's exact plan front
in memory (``codesign.PointFronts``) and stores it on the trial (``FRONT_ATTR``, the front
entries as JSON) with the trial's values (the point's best per objective, as the single-process
outer study reports them), then completes it. A point that is not a buildable design, or has no
feasible plan, is failed with its reason (``REFUSED_ATTR``) or an empty front. ``codesign_from_
storage`` rebuilds the joint front from the stored fronts, in point order, exactly as
``run_codesign`` computes it in one process, and the knob importances from the stored trials
(the dashboard shows the same study).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from plena_opt.errors import PlenaInputError
from plena_opt.search.codesign.codesign import (
    CodesignResult,
    PointFronts,
    codesign_result,
    knob_distributions,
    outer_directions,
    point_values,
)
from plena_opt.search.codesign.design_space import DesignSpace
from plena_opt.search.request import SearchRequest
from plena_opt.search.result import FrontEntry
from plena_opt.search.storage.rdb_bulk import add_finished_trials
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.workers.work_claims import Claimer, _Heartbeat
from plena_opt.search.workers.work_queue import (
    CHUNK_ATTR,
    POINTS_ATTR,
    QUEUE_ATTR,
    REQUEST_ATTR,
    QueueInfo,
    WorkerReport,
    _check_storage,
    queue_name,
)

CODESIGN_ATTR = "plena:codesign"  # on the queue study: {"design_space": …, "max_cost": …}
FRONT_ATTR = "plena:front"  # on a point's trial: its plan front, FrontEntry dicts
REFUSED_ATTR = "plena:refused"  # on a point's trial: why the point is not a buildable design
SCORED_ATTR = "plena:plans_scored"  # on a point's trial: plans scored for its front


def default_study(request: SearchRequest, space: DesignSpace) -> str:
    """The co-design study's name when the request names none."""
    return request.study or f"codesign-{space.name}-{request.problem.model}"


def prepare_codesign_queue(
    request: SearchRequest, space: DesignSpace, max_cost: float | None = None
) -> QueueInfo:
    """Create the co-design's queue (if new) with a ``WAITING`` trial per allowed point.

    Idempotent: an existing queue of the same design space resumes as it is; one of another
    design space, request or budget is refused (name the study differently).
    """
    url = _check_storage(request.storage)
    name = default_study(request, space)
    storage = open_storage(url)
    inner = PointFronts(request, space)
    req = request.model_copy(update={"study": name})
    spec = json.dumps({"design_space": space.model_dump(mode="json"), "max_cost": max_cost})
    try:
        queue = optuna.create_study(
            study_name=queue_name(name), storage=storage, directions=outer_directions(inner, space)
        )
    except optuna.exceptions.DuplicatedStudyError:
        queue = optuna.load_study(study_name=queue_name(name), storage=storage)
        same = queue.user_attrs.get(CODESIGN_ATTR) == spec and (
            SearchRequest.model_validate_json(queue.user_attrs[REQUEST_ATTR]) == req
        )
        if not same:
            raise PlenaInputError(
                "study",
                f"study {name!r} in {url} holds another search (design space, request or "
                "--max-cost differ); give --study a new name",
            ) from None
        return QueueInfo(name, int(queue.user_attrs[POINTS_ATTR]), 1, 0)
    allowed = [p for p in space.points() if max_cost is None or space.cost(p) <= max_cost]
    for key, value in {
        QUEUE_ATTR: name,
        REQUEST_ATTR: req.model_dump_json(),
        CODESIGN_ATTR: spec,
        POINTS_ATTR: len(allowed),
        CHUNK_ATTR: 1,
    }.items():
        queue.set_user_attr(key, value)
    dists = knob_distributions(space, allowed)
    waiting = [
        optuna.trial.create_trial(state=TrialState.WAITING, params=p, distributions=dists)
        for p in allowed
    ]
    add_finished_trials(queue, waiting)  # one transaction on an RDB store
    return QueueInfo(name, len(allowed), 1, len(allowed))


def _space_of(queue: optuna.Study) -> tuple[DesignSpace, float | None]:
    spec = json.loads(queue.user_attrs[CODESIGN_ATTR])
    return DesignSpace.model_validate(spec["design_space"]), spec["max_cost"]


def is_codesign(queue: optuna.Study) -> bool:
    """Whether ``queue`` is a co-design's queue (hardware points, not plan chunks)."""
    return CODESIGN_ATTR in queue.user_attrs


def score_points(
    queue: optuna.Study,
    request: SearchRequest,
    heartbeat_s: float,
    should_stop: Callable[[], bool] | None = None,
) -> WorkerReport:
    """Claim and score hardware points of a co-design queue until none is waiting or running."""
    t0, c0 = time.perf_counter(), time.process_time()
    space, _ = _space_of(queue)
    inner = PointFronts(request, space)
    directions = outer_directions(inner, space)
    report = WorkerReport(str(queue.user_attrs[QUEUE_ATTR]))
    claimer = Claimer(queue, heartbeat_s)
    for trial in claimer.claims(report, should_stop):
        before = inner.scored
        with _Heartbeat(queue._storage, trial._trial_id, heartbeat_s):
            point = dict(trial.params)
            front = inner.front(point)
        inner.cache.clear()  # each point is claimed once: keep no fronts in memory
        try:
            _store_point(queue, trial, front, inner.scored - before, inner, space, directions)
        except optuna.exceptions.UpdateFinishedTrialError:  # failed as stale meanwhile
            report.reclaimed += 1
            continue
        report.chunks += 1
        report.plans_scored += inner.scored - before
        report.plans_stored += len(front) if isinstance(front, list) else 0
    return report.finish(t0, c0)


def _store_point(queue, trial, front, scored, inner, space, directions) -> None:
    storage, tid = queue._storage, trial._trial_id
    storage.set_trial_user_attr(tid, SCORED_ATTR, scored)
    if isinstance(front, str):
        storage.set_trial_user_attr(tid, REFUSED_ATTR, front)
        storage.set_trial_state_values(tid, TrialState.FAIL)
        return
    storage.set_trial_user_attr(tid, FRONT_ATTR, [e.model_dump(mode="json") for e in front])
    if not front:
        storage.set_trial_state_values(tid, TrialState.FAIL)
        return
    values = point_values(inner, space, dict(trial.params), front, directions)
    storage.set_trial_state_values(tid, TrialState.COMPLETE, values)


def _stored_front(t: FrozenTrial) -> list[FrontEntry] | str | None:
    if REFUSED_ATTR in t.user_attrs:
        return str(t.user_attrs[REFUSED_ATTR])
    if FRONT_ATTR in t.user_attrs and t.state in (TrialState.COMPLETE, TrialState.FAIL):
        return [FrontEntry.model_validate(e) for e in t.user_attrs[FRONT_ATTR]]
    return None  # failed as stale (its retry holds the point) or not scored yet


def codesign_from_storage(url: str, study: str) -> CodesignResult:
    """The co-design result of ``study`` from the point fronts its workers stored."""
    storage = open_storage(_check_storage(url))
    queue = optuna.load_study(study_name=queue_name(study), storage=storage)
    if not is_codesign(queue):
        raise PlenaInputError("study", f"study {study!r} in {url} is not a co-design study")
    request = SearchRequest.model_validate_json(queue.user_attrs[REQUEST_ATTR])
    space, _ = _space_of(queue)
    inner = PointFronts(request, space)
    for t in queue.get_trials(deepcopy=False):  # trial order = point order, retries last
        front = _stored_front(t)
        if front is not None:
            inner.cache[tuple(sorted(t.params.items()))] = front
            inner.scored += int(t.user_attrs.get(SCORED_ATTR, 0))
    order = {tuple(sorted(p.items())): i for i, p in enumerate(space.points())}
    inner.cache = dict(sorted(inner.cache.items(), key=lambda kv: order[kv[0]]))
    over = space.size() - int(queue.user_attrs[POINTS_ATTR])
    return codesign_result(request, space, inner, queue, over)
