"""``run_search``: score plans with Optuna (ask/tell) or exhaustively and return the Pareto front.

Every scored plan is told to the study at once (a crash or Ctrl-C keeps every finished trial); a
plan already in the study (this run or an earlier one with the same study name) is never scored
again — repeated suggestions are answered from the cache. ``should_stop`` (checked between trials
and between batches) and ``deadline`` stop the search early and mark the result ``partial``.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import TrialState, create_trial

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.interface import PlanEvaluator
from plena_opt.search.constraint_adapter import ConstraintAdapter
from plena_opt.search.hypervolume import Normaliser
from plena_opt.search.objectives import Constraints, Objective, parse_objectives
from plena_opt.search.pareto import pareto_mask
from plena_opt.search.record import METRICS_ATTR, PLAN_ATTR, POINT_ATTR, Record, summarise_metrics
from plena_opt.search.request import MEMORY_STORAGE, SearchRequest
from plena_opt.search.result import FrontEntry, SearchResult
from plena_opt.search.samplers import make_sampler
from plena_opt.search.serving import CapacityCache
from plena_opt.search.space import PlanSpace, Point
from plena_opt.search.storage import DEFAULT_STORAGE, open_storage

EvaluatorFactory = Callable[[int], PlanEvaluator]  # global batch size → evaluator
EXHAUSTIVE_CHUNK = 128
EXACT_COMPARE_LIMIT = 20_000
PROGRESS_INTERVAL_S = 0.25

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class Progress:
    """A progress report: ``done`` of ``total`` evaluations (None: unknown) in ``stage``."""

    stage: str
    done: int
    total: int | None
    trials_per_s: float
    front_size: int
    hypervolume: float | None


ProgressFn = Callable[[Progress], None]


def _fingerprint(request: SearchRequest) -> str:
    data = {
        "problem": request.problem.identity(),
        "batch_sizes": request.batch_list(),
        "objectives": request.objectives,
        "max_ttft_ms": request.max_ttft_ms,
        "min_tps_per_seq": request.min_tps_per_seq,
        **request.serving_key(),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def default_study_name(request: SearchRequest) -> str:
    """``<model>-<noc>-<digest>``: the same search (problem, batches, objectives, SLAs) resumes."""
    p = request.problem.identity()
    model = Path(p["model_path"]).stem if p["model_path"] else str(p["model"])
    return f"{model}-{Path(p['noc']).stem}-{_fingerprint(request)[:8]}"


class _Search:
    def __init__(
        self,
        request: SearchRequest,
        factory: EvaluatorFactory,
        progress: ProgressFn | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.req = request
        self.t0 = time.perf_counter()
        self.progress_fn = progress
        self.should_stop = should_stop
        self.objectives: tuple[Objective, ...] = parse_objectives(request.objectives)
        self._factory = factory
        self._evs: dict[int, PlanEvaluator] = {}
        self.capacity = CapacityCache(request)
        self.batches = self.capacity.batches(request, self.evaluator)
        ev0 = self.evaluator(self.batches[0])
        self.space = PlanSpace(ev0.num_devices, self.batches, ev0.check)
        if not len(self.space):
            reasons = sorted(set(self.space.illegal.values()))[:5]
            raise PlenaInputError(
                "noc",
                f"no legal plan on {self.space.num_devices} devices: " + "; ".join(reasons),
            )
        self.constraints = Constraints(
            ev0.memory_capacity_bytes,
            request.max_ttft_ms,
            request.min_tps_per_seq,
            request.max_tpot_ms,
            self.capacity.fraction if self.capacity.judges_memory else None,
        )
        self.adapter = ConstraintAdapter()
        self.cache: dict[str, Record] = {}
        self.evaluated = self.pruned = self.repeats = 0
        self.score_seconds = 0.0
        self.trials_told = 0
        self.stop_reason: str | None = None
        self._last_progress = 0.0
        self.warnings: list[str] = []

    # -- evaluators and scoring -------------------------------------------------------------
    def evaluator(self, batch: int) -> PlanEvaluator:
        if batch not in self._evs:
            self._evs[batch] = self._factory(batch)
        return self._evs[batch]

    def score(self, points: Sequence[Point]) -> list[Record]:
        """Score ``points`` (all one batch size) through the batch API."""
        if not points:
            return []
        ev = self.evaluator(points[0].batch_size)
        t = time.perf_counter()
        metrics = ev.evaluate_batch([p.plan for p in points])
        self.score_seconds += time.perf_counter() - t
        self.evaluated += len(points)
        recs = [
            Record.build(
                p,
                self.capacity.summarise(ev, p, summarise_metrics(m), self.batches),
                self.objectives,
                self.constraints,
            )
            for p, m in zip(points, metrics, strict=True)
        ]
        if any(o.key == "energy" for o in self.objectives) and any(
            r.summary["energy_j_per_token"] is None for r in recs
        ):
            raise PlenaInputError(
                "objectives",
                "energy per token is not available for this cluster and memory (no energy "
                "data); choose objectives without energy, e.g. --objectives ttft,tps",
            )
        return recs

    def seconds_per_point(self) -> float:
        """Mean evaluator time per scored point so far (s)."""
        return self.score_seconds / max(self.evaluated, 1)

    # -- study -------------------------------------------------------------------------------
    def open_study(self) -> optuna.Study:
        req = self.req
        url = req.storage or DEFAULT_STORAGE
        self.storage_url = url
        storage = optuna.storages.InMemoryStorage() if url == MEMORY_STORAGE else open_storage(url)
        name = req.study or default_study_name(req)
        fp = _fingerprint(req)
        directions = [o.direction for o in self.objectives]
        exists = name in optuna.get_all_study_names(storage)
        study = optuna.create_study(
            directions=directions,
            study_name=name,
            storage=storage,
            load_if_exists=True,
            sampler=optuna.samplers.RandomSampler(seed=req.seed),
        )
        if exists:
            if study.user_attrs.get("fingerprint") != fp:
                raise PlenaInputError(
                    "study",
                    f"study {name!r} in {url} was created for a different search (problem, batch "
                    "sizes, objectives or SLAs); pick another --study name",
                )
        else:
            with warnings.catch_warnings():  # experimental since v3.2; stable enough for labels
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([o.name for o in self.objectives])
            study.set_user_attr("fingerprint", fp)
            study.set_user_attr("problem", req.problem.identity())
            study.set_user_attr("objectives", list(req.objectives))
            study.set_user_attr("batch_sizes", self.batches)
            study.set_user_attr("constraints", self.constraints.names())
        self.study = study
        self._rebuild_cache()
        return study

    def _rebuild_cache(self) -> None:
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            key = t.user_attrs.get(POINT_ATTR)
            if not key or key in self.cache or METRICS_ATTR not in t.user_attrs:
                continue
            point = Point.from_dict(t.user_attrs[PLAN_ATTR])
            rec = Record.build(point, t.user_attrs[METRICS_ATTR], self.objectives, self.constraints)
            rec.trial_number = t.number
            self.cache[key] = rec
        self.reused = len(self.cache)

    def add_records(self, recs: Sequence[Record], dists: dict[str, BaseDistribution]) -> None:
        """Store scored records as finished trials (exhaustive mode), one chunk at a time."""
        trials = []
        for rec in recs:
            ok = rec.valid
            trials.append(
                create_trial(
                    state=TrialState.COMPLETE if ok else TrialState.FAIL,
                    values=list(rec.values) if ok else None,
                    params=self.space.params(rec.point),
                    distributions=dists,
                    user_attrs=rec.user_attrs(),
                    system_attrs=self.adapter.system_attrs(rec.constraints) if ok else {},
                )
            )
        self.study.add_trials(trials)
        self.trials_told += len(trials)
        for rec in recs:
            self.cache[rec.point.key] = rec

    # -- control -------------------------------------------------------------------------------
    def check_stop(self) -> str | None:
        if self.should_stop is not None and self.should_stop():
            return "cancelled"
        elapsed = time.perf_counter() - self.t0
        if self.req.deadline is not None and elapsed >= self.req.deadline:
            return "deadline"
        if self.req.timeout is not None and elapsed >= self.req.timeout:
            return "timeout"
        return None

    def report(self, stage: str, done: int, total: int | None, force: bool = False) -> None:
        if self.progress_fn is None:
            return
        now = time.perf_counter()
        if not force and now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        front = self.front_records(list(self.cache.values()))
        hv = self.hv(front, None) if front else None
        rate = done / max(now - self.t0, 1e-9)
        self.progress_fn(Progress(stage, done, total, rate, len(front), hv))

    # -- fronts ----------------------------------------------------------------------------------
    def front_records(self, recs: Sequence[Record]) -> list[Record]:
        feas = [r for r in recs if r.feasible]
        if not feas:
            return []
        pts = np.array([r.minimised(self.objectives) for r in feas])
        mask = pareto_mask(pts)
        front = [r for r, keep in zip(feas, mask, strict=True) if keep]
        return sorted(front, key=lambda r: (-r.summary["tps"], r.point.key))

    def hv(self, front: Sequence[Record], norm: Normaliser | None) -> float:
        pts = np.array([r.minimised(self.objectives) for r in front])
        if norm is None:
            norm = Normaliser.from_points(pts)
        return norm.hypervolume(pts)

    # -- modes -----------------------------------------------------------------------------------
    def choose_sampler(self, todo: list[Point]) -> tuple[str, list[Record]]:
        """Resolve ``auto``: exhaustive when scoring the rest of the space fits the budget."""
        name = self.req.sampler
        if name != "auto":
            return name, []
        if len(todo) <= self.req.trials:
            return "exhaustive", []
        probe = [p for p in todo if p.batch_size == todo[0].batch_size][:16]
        t = time.perf_counter()
        recs = self.score(probe)
        per_point = (time.perf_counter() - t) / max(len(probe), 1)
        limits = [self.req.auto_budget_s, self.req.timeout, self.req.deadline]
        budget = min(x for x in limits if x is not None)
        return ("exhaustive" if per_point * len(todo) <= budget else "tpe"), recs

    def run_exhaustive(self, todo: list[Point], scored: list[Record]) -> None:
        dists = self.space.distributions()
        if scored:
            self.add_records(scored, dists)
        done_keys = {r.point.key for r in scored}
        todo = [p for p in todo if p.key not in done_keys]
        total = len(todo) + len(scored)
        done = len(scored)
        for batch in self.batches:
            group = [p for p in todo if p.batch_size == batch]
            for i in range(0, len(group), EXHAUSTIVE_CHUNK):
                self.stop_reason = self.check_stop()
                if self.stop_reason:
                    return
                recs = self.score(group[i : i + EXHAUSTIVE_CHUNK])
                self.add_records(recs, dists)
                done += len(recs)
                self.report("exhaustive", done, total)

    def run_sampled(self, sampler_name: str, scored: list[Record]) -> None:
        req = self.req
        dists = self.space.distributions()
        if scored:  # probe points of ``auto``: already scored, keep them
            self.add_records(scored, dists)
        self.study.sampler = make_sampler(sampler_name, req.seed, self.adapter, req.trials)
        names = self.constraints.names()
        new = len(scored)
        asks = stale = 0
        max_asks, stale_limit = 20 * req.trials, max(200, 2 * req.trials)
        while new < req.trials and len(self.cache) < len(self.space):
            self.stop_reason = self.check_stop()
            if self.stop_reason:
                return
            if asks >= max_asks or stale >= stale_limit:
                self.stop_reason = "sampler stopped proposing new plans"
                return
            trial = self.study.ask(dists)
            asks += 1
            point, why = self.space.point_from_params(trial.params)
            if point is None:
                trial.set_user_attr("illegal_reason", why)
                self.adapter.record(trial, dict.fromkeys(names, 1.0))
                self.study.tell(trial, state=TrialState.PRUNED)
                self.pruned += 1
                stale += 1
                continue
            rec = self.cache.get(point.key)
            if rec is None:
                rec = self.score([point])[0]
                rec.trial_number = trial.number
                self.cache[point.key] = rec
                new += 1
                stale = 0
            else:
                trial.set_user_attr("repeat_of", rec.trial_number)
                self.repeats += 1
                stale += 1
            for k, v in rec.user_attrs().items():
                trial.set_user_attr(k, v)
            self.adapter.record(trial, rec.constraints)
            if rec.valid:
                self.study.tell(trial, list(rec.values))
            else:
                self.study.tell(trial, state=TrialState.FAIL)
            self.trials_told += 1
            self.report(sampler_name, new, req.trials)

    def exact_records(self) -> list[Record]:
        """Every legal point scored (cache first); not stored in the study."""
        out = [self.cache[p.key] for p in self.space.points if p.key in self.cache]
        for batch in self.batches:
            todo = [
                p for p in self.space.points if p.batch_size == batch and p.key not in self.cache
            ]
            for i in range(0, len(todo), EXHAUSTIVE_CHUNK):
                out.extend(self.score(todo[i : i + EXHAUSTIVE_CHUNK]))
        return out


def _fill_trial_numbers(study: optuna.Study, front: Sequence[Record]) -> None:
    """Point front records at their stored trial (exhaustive trials are added in bulk)."""
    missing = {r.point.key: r for r in front if r.trial_number is None}
    if not missing:
        return
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        rec = missing.pop(t.user_attrs.get(POINT_ATTR, ""), None)
        if rec is not None:
            rec.trial_number = t.number
        if not missing:
            return


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
    sampler_name, probe = s.choose_sampler(todo)
    if sampler_name == "exhaustive":
        s.run_exhaustive(todo, probe)
    else:
        s.run_sampled(sampler_name, probe)
    complete = len(s.cache) >= len(s.space)
    partial = s.stop_reason in ("cancelled", "deadline") or (
        sampler_name == "exhaustive" and not complete
    )

    search_evaluations = s.evaluated
    recs = list(s.cache.values())
    front = s.front_records(recs)
    result_extra: dict[str, Any] = {}
    compare = request.compare_exact
    if compare is None:  # only when scoring the rest of the space is cheap
        rest = len(s.space) - len(s.cache)
        compare = (
            len(s.space) <= EXACT_COMPARE_LIMIT
            and rest * s.seconds_per_point() <= request.auto_budget_s
        )
    norm: Normaliser | None = None
    hv_norm = "evaluated-feasible-points"
    if complete:
        exact_front = front
        result_extra["exact_front_size"] = len(front)
    elif compare and sampler_name != "exhaustive" and not partial:
        s.report("exact front", 0, len(s.space), force=True)
        exact_front = s.front_records(s.exact_records())
        result_extra["exact_front_size"] = len(exact_front)
    else:
        exact_front = []
    if exact_front:
        pts = np.array([r.minimised(s.objectives) for r in exact_front])
        norm = Normaliser.from_points(pts)
        hv_norm = "exact-front"
        result_extra["exact_hypervolume"] = norm.hypervolume(pts)
    elif front:
        feas = [r for r in recs if r.feasible]
        norm = Normaliser.from_points(np.array([r.minimised(s.objectives) for r in feas]))
    hv = s.hv(front, norm) if front and norm is not None else None
    if hv is not None and result_extra.get("exact_hypervolume"):
        result_extra["hv_ratio"] = hv / result_extra["exact_hypervolume"]

    infeasible: dict[str, int] = {}
    for r in recs:
        for k in s.constraints.violated(r.constraints):
            infeasible[k] = infeasible.get(k, 0) + 1
    best_infeasible: FrontEntry | None = None
    if not front:
        valid = [r for r in recs if r.valid]
        if valid:
            worst = min(valid, key=lambda r: sum(max(v, 0.0) for v in r.constraints.values()))
            best_infeasible = worst.entry()
    _fill_trial_numbers(study, front)
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
        trials=len(study.get_trials(deepcopy=False)),
        pruned_illegal=s.pruned,
        repeats=s.repeats,
        front=[r.entry() for r in front],
        hypervolume=hv,
        hv_normalisation=hv_norm if hv is not None else None,
        partial=partial,
        stop_reason=s.stop_reason,
        best_infeasible=best_infeasible,
        infeasible=infeasible,
        elapsed_s=time.perf_counter() - s.t0,
        warnings=s.warnings,
        **result_extra,
    )
