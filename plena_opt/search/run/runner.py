"""``run_search``: score plans with an Optuna sampler or exhaustively and return the Pareto front.

Scored plans are stored in batches (``plena_opt.search.storage.trials``: one trial per distinct
plan; a crash or Ctrl-C keeps every written batch, at most ``sampled.FLUSH_SECONDS`` of work is
redone on resume); a plan already in the study (this run, an earlier one or another process on the
same study) is never stored again, and never scored again once seen. ``should_stop`` (checked
between trials and between batches) and ``deadline`` stop the search early and mark the result
``partial``. The library stores in memory unless ``request.storage`` names a store; it never
changes Optuna's logging.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from plena_opt.search.fronts.hypervolume import Normaliser
from plena_opt.search.fronts.quality import front_quality
from plena_opt.search.progress import Progress, ProgressFn
from plena_opt.search.record import Record
from plena_opt.search.request import SearchRequest
from plena_opt.search.result import FrontEntry, SearchResult
from plena_opt.search.run.modes import (
    choose_sampler,
    compares_exact,
    exact_front,
    run_exhaustive,
    run_sampled,
)
from plena_opt.search.run.session import EvaluatorFactory, _Search, default_study_name
from plena_opt.search.space.misses import infeasible_summary, unpriced_reasons
from plena_opt.search.storage.trials import trials_completed

__all__ = ["EvaluatorFactory", "Progress", "ProgressFn", "default_study_name", "run_search"]


def _rate_front(
    s: _Search,
    front: list[Record],
    recs: list[Record],
    complete: bool,
    partial: bool,
    sampler_name: str,
) -> tuple[dict[str, Any], float | None, str]:
    """Hypervolume of ``front`` and, when the exact front is known (or cheap to score), its
    size, hypervolume, the ratio, front recall and IGD (``plena_opt.search.fronts.quality``)."""
    request = s.req
    result_extra: dict[str, Any] = {}
    rest = len(s.space) - len(s.cache)
    compare = compares_exact(request, rest, len(s.space), s.space.num_devices, s.chip_kind)
    norm: Normaliser | None = None
    hv_norm = "evaluated-feasible-points"
    exact_keys: list[str] = []
    if complete:
        exact_keys = [r.point.key for r in front]
        pts = np.array([r.minimised(s.objectives) for r in front])
    elif compare and sampler_name != "exhaustive" and not partial:
        s.report("exact front", 0, len(s.space), force=True)
        exact_keys, pts = exact_front(s)
    if complete or exact_keys:
        result_extra["exact_front_size"] = len(exact_keys)
    if exact_keys:
        norm = Normaliser.from_points(pts)
        hv_norm = "exact-front"
        result_extra["exact_hypervolume"] = norm.hypervolume(pts)
        found = np.array([r.minimised(s.objectives) for r in front]).reshape(
            len(front), pts.shape[1]
        )
        q = front_quality(found, [r.point.key for r in front], pts, exact_keys)
        result_extra.update(hv_ratio=q.hv_ratio, front_recall=q.front_recall, igd=q.igd)
    elif front:
        feas = [r for r in recs if r.feasible]
        norm = Normaliser.from_points(np.array([r.minimised(s.objectives) for r in feas]))
    hv = s.hv(front, norm) if front and norm is not None else None
    return result_extra, hv, hv_norm


def _default_factory(request: SearchRequest) -> EvaluatorFactory:
    inputs = request.problem.load()
    return inputs.evaluator


def run_search(
    request: SearchRequest,
    evaluator_factory: EvaluatorFactory | None = None,
    progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SearchResult:
    """Run the search described by ``request`` and return its Pareto front.

    ``evaluator_factory(batch_size)`` returns an ``Evaluator`` for that global batch size (default:
    load ``request.problem``); ``progress`` receives ``Progress`` reports; ``should_stop()`` is
    polled between trials and batches and, with ``request.deadline``, stops early (``partial``).
    """
    factory = evaluator_factory or _default_factory(request)
    s = _Search(request, factory, progress, should_stop)
    study = s.open_study()
    todo = [p for p in s.space.points if p.key not in s.cache]
    sampler_name = choose_sampler(s, todo)
    if sampler_name == "exhaustive":
        run_exhaustive(s, todo)
    else:
        run_sampled(s, sampler_name)
    complete = len(s.cache) >= len(s.space)
    partial = s.stop_reason in ("cancelled", "deadline") or (
        sampler_name == "exhaustive" and not complete
    )

    search_evaluations = s.evaluated
    recs = list(s.cache.values())
    front = s.front_records(recs)
    result_extra, hv, hv_norm = _rate_front(s, front, recs, complete, partial, sampler_name)
    infeasible, nearest = infeasible_summary(recs, s.constraints)
    for reason, n in unpriced_reasons(recs).items():
        s.warnings.append(f"{n} plan(s) not priced: {reason}")
    best_infeasible: FrontEntry | None = None
    if not front:
        valid = [r for r in recs if r.valid]
        if valid:
            worst = min(valid, key=lambda r: sum(max(v, 0.0) for v in r.constraints.values()))
            best_infeasible = worst.entry()
    s.report("done", search_evaluations, None, force=True)
    return SearchResult(
        study_name=study.study_name,
        storage=s.storage_url,
        sampler=sampler_name,
        objectives=list(request.objectives),
        metric_names=[o.name for o in s.objectives],
        directions=[o.direction for o in s.objectives],
        constraints=s.constraints.names(),
        legal_points=len(s.space),
        evaluated=search_evaluations,
        reused=s.reused,
        trials=s.writer.written if s.writer.discard else len(study.get_trials(deepcopy=False)),
        trials_completed=s.writer.written if s.writer.discard else trials_completed(study),
        pruned_illegal=s.pruned,
        repeats=s.repeats,
        front=[r.entry() for r in front],
        hypervolume=hv,
        hv_normalisation=hv_norm if hv is not None else None,
        partial=partial,
        stop_reason=s.stop_reason,
        best_infeasible=best_infeasible,
        infeasible=infeasible,
        nearest_miss=nearest,
        elapsed_s=time.perf_counter() - s.t0,
        warnings=s.warnings,
        scored=[r.entry() for r in recs],
        **result_extra,
    )
