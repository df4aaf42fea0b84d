"""``_Search``: the state of one search run — its evaluators, plan space, constraints, study and
cache of scored plans — and the operations every mode uses (score, store, stop, report, fronts).

The modes that drive it are in ``plena_opt.search.run.modes`` and ``plena_opt.search.run.sampled``;
``plena_opt.search.run.runner.run_search`` ties them together.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import optuna

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.cost import load_prices, plan_cost
from plena_opt.estimate.interface import PlanEvaluator
from plena_opt.models.catalog import model_name_from_path
from plena_opt.search.fronts.hypervolume import Normaliser
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.fronts.quality import LiveHypervolume
from plena_opt.search.progress import PROGRESS_INTERVAL_S, Progress, ProgressFn, thin
from plena_opt.search.record import METRICS_ATTR, PLAN_ATTR, Record, summarise_metrics
from plena_opt.search.request import MEMORY_STORAGE, SearchRequest
from plena_opt.search.serving.serving import CapacityCache
from plena_opt.search.space.constraint_adapter import ConstraintAdapter
from plena_opt.search.space.objectives import Constraints, Objective, parse_objectives
from plena_opt.search.space.space import PlanSpace, Point
from plena_opt.search.storage.storage import fail_stale_trials, open_storage
from plena_opt.search.storage.trials import StudyWriter

# (global batch size[, precision]) → evaluator; called with the precision only when the
# request searches formats (``--precisions``).
EvaluatorFactory = Callable[..., PlanEvaluator]


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
    model = model_name_from_path(p["model_path"]) if p["model_path"] else str(p["model"])
    model = model.replace("/", "--")  # a Hugging Face id names no folder (owner--name)
    return f"{model}-{Path(p['noc']).stem}-{_fingerprint(request)[:8]}"


def _precision_notes(ev: PlanEvaluator, precisions: list[str] | None) -> list[str]:
    """The searched GPU formats, and each one that quantises the checkpoint (issue 24)."""
    from plena_opt.estimate.pricer import precision_notes

    ctx = getattr(ev, "ctx", None)
    if ctx is None:
        return []
    return precision_notes(ctx.chip, ctx.model, list(precisions or [ctx.workload.precision]))


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
            # under load the engine's admission judges memory (``api.search_load``), not the
            # capacity-bound batch: the clients beyond the pool wait in its queue
            self.capacity.fraction
            if self.capacity.judges_memory and not getattr(request, "under_load", False)
            else None,
            request.max_cost_per_mtok,
        )
        self.prices = load_prices(request.prices)
        self.chip_name: str | None = getattr(ev0, "chip_name", None)
        # what ``modes.plan_cpu_seconds`` prices a plan as (an evaluator without a chip: plena)
        self.chip_kind: str = getattr(ev0, "chip_kind", "plena")
        self._check_priced(request)
        self.adapter = ConstraintAdapter()
        self.cache: dict[str, Record] = {}
        self.evaluated = self.pruned = self.repeats = 0
        self.trials_told = 0
        self.stop_reason: str | None = None
        self._last_progress = 0.0
        self.live_hv = LiveHypervolume()
        self.warnings: list[str] = []  # the result's warnings: stale trials, sampler notes
        self.warnings += _precision_notes(ev0, self.precisions)

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

    def _check_priced(self, request: SearchRequest) -> None:
        """A cost objective or SLA on a chip the price file does not price is refused."""
        wants = "cost-per-mtok" in request.objectives or request.max_cost_per_mtok is not None
        if wants and self.chip_name not in self.prices.chips:
            field = "objectives" if "cost-per-mtok" in request.objectives else "max_cost_per_mtok"
            raise PlenaInputError(
                field,
                f"cost per million tokens needs a price for chip {self.chip_name!r}; the price "
                f"file lists {', '.join(sorted(self.prices.chips))}; give --prices FILE",
            )

    def _with_cost(self, ev: PlanEvaluator, m: object, summary: dict) -> dict:
        """``summary`` plus the plan's cost and power fields (``estimate.cost``)."""
        if self.chip_name is None:  # an evaluator without a chip (test fakes): not priced
            return summary
        cost = plan_cost(m, ev.workload, self.chip_name, self.prices)  # type: ignore[attr-defined]
        return {**summary, **cost.to_dict()}

    def score(self, points: Sequence[Point]) -> list[Record]:
        """Score ``points`` (all one batch size and precision) through the batch API."""
        if not points:
            return []
        ev = self.evaluator(points[0].batch_size, points[0].precision)
        metrics = ev.evaluate_batch([p.plan for p in points])
        self.evaluated += len(points)
        recs = [
            Record.build(
                p,
                self.capacity.summarise(
                    ev, p, self._with_cost(ev, m, summarise_metrics(m)), self.batches
                ),
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
            # what optuna-dashboard shows beside the metric names (``plena_opt.metrics``)
            study.set_user_attr("objective_units", {o.name: o.unit for o in self.objectives})
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
        self._learn_chunks(study)
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

    def _learn_chunks(self, study: optuna.Study) -> None:
        """Cache the plans recorded on the chunks of workers in ``front`` mode (only their
        fronts are trials: ``plena_opt.search.storage.chunk_store``)."""
        from plena_opt.search.storage.chunk_store import chunk_records

        for point, summary in chunk_records(study):
            if point.key not in self.cache and point in self.space:
                self.cache[point.key] = Record.build(
                    point, summary, self.objectives, self.constraints
                )

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
        shown = tuple(r.entry() for r in thin(front))
        self.progress_fn(Progress(stage, done, total, rate, len(front), hv, shown))

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
