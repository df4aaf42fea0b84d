"""``run_search``: score plans with an Optuna sampler or exhaustively and return the Pareto front.

Scored plans are stored in batches (``plena_opt.search.trials``: one trial per distinct plan; a
crash or Ctrl-C keeps every written batch, at most ``sampled.FLUSH_SECONDS`` of work is redone on
resume); a plan already in the study (this run, an earlier one or another process on the same
study) is never stored again, and never scored again once seen. ``should_stop`` (checked between
trials and between batches) and ``deadline`` stop the search early and mark the result
``partial``. The library stores in memory unless ``request.storage`` names a store; it never
changes Optuna's logging.
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

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.interface import PlanEvaluator
from plena_opt.search.constraint_adapter import ConstraintAdapter
from plena_opt.search.hypervolume import Normaliser
from plena_opt.search.objectives import Constraints, Objective, parse_objectives
from plena_opt.search.pareto import pareto_mask
from plena_opt.search.quality import LiveHypervolume, front_quality
from plena_opt.search.record import METRICS_ATTR, PLAN_ATTR, Record, summarise_metrics
from plena_opt.search.request import MEMORY_STORAGE, SearchRequest
from plena_opt.search.result import FrontEntry, SearchResult
from plena_opt.search.serving import CapacityCache
from plena_opt.search.space import PlanSpace, Point
from plena_opt.search.storage import fail_stale_trials, open_storage
from plena_opt.search.trials import StudyWriter, trials_completed

# (global batch size[, precision]) → evaluator; called with the precision only when the
# request searches formats (``--precisions``).
EvaluatorFactory = Callable[..., PlanEvaluator]
EXHAUSTIVE_CHUNK = 128
# Scored plans are written once this many are waiting or this much time passed (s): one journal
# append and fsync per write; a crash redoes at most that much scoring on resume.
WRITE_POINTS, WRITE_SECONDS = 1024, 0.5
EXACT_COMPARE_LIMIT = 20_000
PROGRESS_INTERVAL_S = 0.25
# TPE's own cost per budgeted trial (s), beyond scoring its plan: suggestions (including the
# repeated and illegal ones a new plan takes) and telling them. Measured 2026-12-01 on the 2-core
# box (load 1), multivariate TPE, in-memory sampler study, 2,048-point space (4 batch sizes,
# 1,024 devices, tests' fake evaluator): 300 new plans in 512 asks, 2.53 s → 8.4 ms per trial.
# ``auto`` prices the sampler's budget with it against scoring every remaining plan.
TPE_SECONDS_PER_TRIAL = 0.0084


@dataclass(frozen=True)
class Progress:
    """A progress report: ``done`` of ``total`` evaluations (None: unknown) in ``stage``.

    ``hypervolume`` is on a normalisation fixed at the first report (it never goes down).
    """

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
        self._evs: dict[tuple[int, str | None], PlanEvaluator] = {}
        self.precisions = self._check_precisions(request)
        self.capacity = CapacityCache(request)
        self.batches = self.capacity.batches(request, self.evaluator)
        ev0 = self.evaluator(self.batches[0], self.precisions[0] if self.precisions else None)
        self.space = PlanSpace(ev0.num_devices, self.batches, ev0.check, self.precisions)
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
        self.live_hv = LiveHypervolume()
        self.warnings: list[str] = []  # the result's warnings: stale trials, sampler notes

    # -- evaluators and scoring -------------------------------------------------------------
    def evaluator(self, batch: int, precision: str | None = None) -> PlanEvaluator:
        key = (batch, precision)
        if key not in self._evs:
            args = (batch,) if precision is None else (batch, precision)
            self._evs[key] = self._factory(*args)
        return self._evs[key]

    def _check_precisions(self, request: SearchRequest) -> list[str] | None:
        """The searched formats, each checked against the chip (an unsupported one is refused
        naming ``precisions``, the format and the chip)."""
        if not request.precisions:
            return None
        for prec in request.precisions:
            try:
                self.evaluator(request.batch_list()[0], prec)
            except PlenaInputError as exc:
                raise PlenaInputError("precisions", f"--precisions {prec}: {exc}") from exc
        return list(request.precisions)

    def score(self, points: Sequence[Point]) -> list[Record]:
        """Score ``points`` (all one batch size and precision) through the batch API."""
        if not points:
            return []
        ev = self.evaluator(points[0].batch_size, points[0].precision)
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

    def groups(self) -> list[tuple[int, str | None]]:
        """The (batch size, precision) groups of the space, each priced by one evaluator."""
        return [(b, p) for p in self.space.precisions for b in self.batches]

    def seconds_per_point(self) -> float:
        """Mean evaluator time per scored point so far (s)."""
        return self.score_seconds / max(self.evaluated, 1)

    # -- study -------------------------------------------------------------------------------
    def open_study(self) -> optuna.Study:
        req = self.req
        url = req.storage or MEMORY_STORAGE
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
            if self.precisions:
                study.set_user_attr("precisions", self.precisions)
        self.study = study
        stale = fail_stale_trials(study)
        if stale:
            self.warnings.append(
                f"marked {len(stale)} stale RUNNING trial(s) FAIL (#{', #'.join(map(str, stale))}),"
                " left by a process that stopped mid-trial"
            )
        self.writer = StudyWriter(study, storage, self.space, discard=url == MEMORY_STORAGE)
        self._learn(self.writer.refresh())
        self.reused = len(self.cache)
        return study

    def _learn(self, trials: Sequence[optuna.trial.FrozenTrial]) -> list[Record]:
        """Cache the plans of stored trials (resume, other writers); the records added."""
        out = []
        for t in trials:
            point = Point.from_dict(t.user_attrs[PLAN_ATTR])
            if point.key in self.cache or point not in self.space:
                continue
            rec = Record.build(point, t.user_attrs[METRICS_ATTR], self.objectives, self.constraints)
            rec.trial_number = t.number
            self.cache[point.key] = rec
            out.append(rec)
        return out

    def add_records(self, recs: Sequence[Record]) -> list[Record]:
        """Store scored records (each plan once); the records other writers stored meanwhile."""
        for rec in recs:
            self.cache.setdefault(rec.point.key, rec)
        stored, others = self.writer.write(recs)
        self.trials_told += len(stored)
        return self._learn(others)

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
        hv = self.live_hv(np.array([r.minimised(self.objectives) for r in front]))
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
        """Resolve ``auto``: exhaustive whenever scoring every remaining plan costs less than
        the sampler's budget (``trials`` trials of TPE, each its plan's score plus the sampler's
        own ``TPE_SECONDS_PER_TRIAL``), else TPE. The probe's points count as scored."""
        name = self.req.sampler
        if name != "auto":
            return name, []
        if len(todo) <= self.req.trials:
            return "exhaustive", []
        first = todo[0]
        probe = [
            p for p in todo if (p.batch_size, p.precision) == (first.batch_size, first.precision)
        ][:16]
        t = time.perf_counter()
        recs = self.score(probe)
        per_point = (time.perf_counter() - t) / max(len(probe), 1)
        exhaustive_s = per_point * (len(todo) - len(probe))
        sampler_s = (self.req.trials - len(probe)) * (per_point + TPE_SECONDS_PER_TRIAL)
        return ("exhaustive" if exhaustive_s <= sampler_s else "tpe"), recs

    def run_exhaustive(self, todo: list[Point], scored: list[Record]) -> None:
        if scored:
            self.add_records(scored)
        total, done = len(todo), len(scored)
        pending: list[Record] = []
        last = time.perf_counter()
        try:
            self._exhaustive_loop(todo, pending, done, total, last)
        finally:
            self.add_records(pending)  # scored plans are stored even when stopped

    def _exhaustive_loop(
        self, todo: list[Point], pending: list[Record], done: int, total: int, last: float
    ) -> None:
        for batch, prec in self.groups():
            group = [p for p in todo if p.batch_size == batch and p.precision == prec]
            for i in range(0, len(group), EXHAUSTIVE_CHUNK):
                self.stop_reason = self.check_stop()
                if self.stop_reason:
                    return
                chunk = [p for p in group[i : i + EXHAUSTIVE_CHUNK] if p.key not in self.cache]
                pending.extend(self.score(chunk))
                done += len(chunk)
                if len(pending) >= WRITE_POINTS or time.perf_counter() - last > WRITE_SECONDS:
                    self.add_records(pending)
                    pending.clear()
                    last = time.perf_counter()
                self.report("exhaustive", done, total)

    def run_sampled(self, sampler_name: str, scored: list[Record]) -> None:
        from plena_opt.search.sampled import SampledRun

        if scored:  # probe points of ``auto``: already scored, keep them
            self.add_records(scored)
        SampledRun(self, sampler_name).run()

    def exact_records(self) -> list[Record]:
        """Every legal point scored (cache first); not stored in the study."""
        out = [self.cache[p.key] for p in self.space.points if p.key in self.cache]
        for batch, prec in self.groups():
            todo = [
                p
                for p in self.space.points
                if p.batch_size == batch and p.precision == prec and p.key not in self.cache
            ]
            for i in range(0, len(todo), EXHAUSTIVE_CHUNK):
                out.extend(self.score(todo[i : i + EXHAUSTIVE_CHUNK]))
        return out


def _rate_front(
    s: _Search,
    front: list[Record],
    recs: list[Record],
    complete: bool,
    partial: bool,
    sampler_name: str,
) -> tuple[dict[str, Any], float | None, str]:
    """Hypervolume of ``front`` and, when the exact front is known (or cheap to score), its
    size, hypervolume, the ratio, front recall and IGD (``plena_opt.search.quality``)."""
    request = s.req
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
        found = np.array([r.minimised(s.objectives) for r in front]).reshape(
            len(front), pts.shape[1]
        )
        q = front_quality(
            found, [r.point.key for r in front], pts, [r.point.key for r in exact_front]
        )
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
    result_extra, hv, hv_norm = _rate_front(s, front, recs, complete, partial, sampler_name)
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
        elapsed_s=time.perf_counter() - s.t0,
        warnings=s.warnings,
        scored=[r.entry() for r in recs],
        **result_extra,
    )
