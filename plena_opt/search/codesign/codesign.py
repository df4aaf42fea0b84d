"""Hardware × plan co-design (issue 17): an outer Optuna study over hardware points, the exact
plan front on each through the batch API, the joint front over (hardware, plan).

Each outer trial is one hardware point (its params are the knobs); its plan front is computed
by ``run_search`` (exhaustive, in memory) and cached per point, so a sampler that proposes a
point again costs nothing. The outer trial's values are the point's best value per objective
(and its cost), which gives TPE a direction; the joint front is the Pareto front of every plan on
every front found, with ``cost`` as an extra objective when the design space has costs (a plan
dominated on its own hardware is dominated jointly: the cost is the same). ``max_cost`` drops
hardware points over it before they are scored. Knob importances: Optuna's fANOVA on the outer
trials, one table per objective (PED-ANOVA under Optuna 4 without scikit-learn).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution

from plena_opt.errors import PlenaInputError
from plena_opt.search.codesign.design_space import DesignSpace
from plena_opt.search.fronts.hypervolume import Normaliser
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.request import MEMORY_STORAGE, SearchRequest
from plena_opt.search.result import FrontEntry
from plena_opt.search.space.objectives import parse_objectives

MAX_OUTER_TRIALS = 100_000


@dataclass(frozen=True)
class JointEntry:
    """One (hardware point, plan) of the joint front; ``values`` in objective order (+ cost)."""

    hardware: dict[str, float | int]
    plan: FrontEntry
    cost: float
    values: tuple[float, ...]


@dataclass
class CodesignResult:
    """Joint front, per-point front sizes, refused points, importances, outer trial count."""

    design_space: str
    objectives: list[str]
    hardware_points: int
    evaluated_points: int
    front: list[JointEntry]
    point_fronts: list[tuple[dict[str, float | int], int]]
    refused: list[tuple[dict[str, float | int], str]] = field(default_factory=list)
    over_budget: int = 0
    importances: dict[str, dict[str, float]] = field(default_factory=dict)
    plans_scored: int = 0


def knob_distributions(
    space: DesignSpace, allowed: list[dict[str, float | int]]
) -> dict[str, CategoricalDistribution]:
    """The outer study's distributions: each knob's values among the ``allowed`` points."""
    return {
        k.name: CategoricalDistribution(sorted({p[k.name] for p in allowed}) or [0])
        for k in space.knobs
    }


class PointFronts:
    """Exact plan fronts per hardware point (cached); minimised values of each front plan."""

    def __init__(self, request: SearchRequest, space: DesignSpace) -> None:
        self.req, self.space = request, space
        self.objs = parse_objectives(request.objectives)
        self.cache: dict[tuple, list[FrontEntry] | str] = {}
        self.scored = 0

    def front(self, point: dict[str, float | int]) -> list[FrontEntry] | str:
        key = tuple(sorted(point.items()))
        if key not in self.cache:
            from plena_opt.search.run.runner import run_search

            try:
                problem = self.space.apply(self.req.problem, point)
                req = self.req.model_copy(
                    update={
                        "problem": problem,
                        "sampler": "exhaustive",
                        "storage": MEMORY_STORAGE,
                        "study": None,
                        "compare_exact": False,
                    }  # fmt: skip
                )
                res = run_search(req, problem.load().evaluator)
                self.scored += res.evaluated
                self.cache[key] = res.front
            except PlenaInputError as exc:  # this point is not a buildable design
                self.cache[key] = f"{exc.field}: {exc}"
        return self.cache[key]

    def minimised(self, e: FrontEntry, cost: float | None) -> list[float]:
        attr = {"tps_per_user": "tps_per_sequence"}
        out = [o.sign * float(getattr(e, attr.get(o.name, o.name))) for o in self.objs]
        return out + ([cost] if cost is not None else [])


def run_codesign(
    request: SearchRequest,
    space: DesignSpace,
    sampler: str = "exhaustive",
    trials: int | None = None,
    max_cost: float | None = None,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CodesignResult:
    """Search ``space`` × plans for ``request`` (its problem is the base hardware)."""
    inner = PointFronts(request, space)
    points = space.points()
    allowed = [p for p in points if max_cost is None or space.cost(p) <= max_cost]
    dists = knob_distributions(space, allowed)
    directions = outer_directions(inner, space)
    sampler_obj: optuna.samplers.BaseSampler = (
        optuna.samplers.TPESampler(seed=seed, multivariate=True)
        if sampler == "tpe"
        else optuna.samplers.RandomSampler(seed=seed)
    )
    study = optuna.create_study(directions=directions, sampler=sampler_obj)
    if sampler == "exhaustive":
        for p in allowed:
            study.enqueue_trial(p)
        n = len(allowed)
    else:
        n = min(trials or 50, MAX_OUTER_TRIALS)
    for i in range(n):
        trial = study.ask(dists)
        point = dict(trial.params)
        front = inner.front(point) if point in allowed else "over --max-cost"
        if isinstance(front, str) or not front:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        study.tell(trial, point_values(inner, space, point, front, directions))
        if progress:
            progress(i + 1, n)
    return codesign_result(request, space, inner, study, len(points) - len(allowed))


def outer_directions(inner: PointFronts, space: DesignSpace) -> list[str]:
    """The outer study's directions: the objectives', then ``minimize`` cost if it has one."""
    return [o.direction for o in inner.objs] + (["minimize"] if space.has_cost else [])


def point_values(
    inner: PointFronts,
    space: DesignSpace,
    point: dict[str, float | int],
    front: list[FrontEntry],
    directions: list[str],
) -> list[float]:
    """An outer trial's values: the point's best per objective (and its cost), as reported."""
    cost = space.cost(point) if space.has_cost else None
    best = np.min(np.array([inner.minimised(e, cost) for e in front]), axis=0)
    signs = [1.0 if d == "minimize" else -1.0 for d in directions]
    return [float(b * s) for b, s in zip(best, signs, strict=True)]


def joint_front(inner: PointFronts, space: DesignSpace) -> list[JointEntry]:
    """The Pareto front over every (point, plan) of the cached point fronts, merged point by
    point (memory bounded by the joint front plus one point's front), by TPS then cost."""
    front: list[JointEntry] = []
    for key, entries in inner.cache.items():
        if isinstance(entries, str) or not entries:
            continue
        point = dict(key)
        cost = space.cost(point)
        with_cost = cost if space.has_cost else None
        pool = front + [
            JointEntry(point, e, cost, tuple(inner.minimised(e, with_cost))) for e in entries
        ]
        mask = pareto_mask(np.array([j.values for j in pool]))
        front = [j for j, keep in zip(pool, mask, strict=True) if keep]
    front.sort(key=lambda j: (-j.plan.tps, j.cost))
    return front


def codesign_result(
    request: SearchRequest,
    space: DesignSpace,
    inner: PointFronts,
    study: optuna.Study,
    over_budget: int,
) -> CodesignResult:
    """The result of a co-design whose point fronts are in ``inner.cache`` (outer ``study``:
    its trials give the knob importances)."""
    names = [o.key for o in inner.objs] + (["cost"] if space.has_cost else [])
    res = CodesignResult(
        design_space=space.name,
        objectives=names,
        hardware_points=space.size(),
        evaluated_points=sum(1 for v in inner.cache.values() if not isinstance(v, str)),
        front=joint_front(inner, space),
        point_fronts=[(dict(k), len(v)) for k, v in inner.cache.items() if not isinstance(v, str)],
        refused=[(dict(k), v) for k, v in inner.cache.items() if isinstance(v, str)],
        over_budget=over_budget,
        plans_scored=inner.scored,
    )
    res.importances = _importances(study, names)
    return res


def _importances(study: optuna.Study, names: list[str]) -> dict[str, dict[str, float]]:
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    varying = {k for t in done for k in t.params if len({u.params[k] for u in done}) > 1}
    if len(done) < 2 or not varying:
        return {}
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, name in enumerate(names):
            kwargs = {"target": lambda t, i=i: t.values[i], "params": sorted(varying)}
            try:  # fANOVA: native in Optuna 5, scikit-learn in Optuna 4
                out[name] = optuna.importance.get_param_importances(study, **kwargs)
            except ImportError:  # Optuna 4 without scikit-learn: PED-ANOVA (numpy only)
                ped = optuna.importance.PedAnovaImportanceEvaluator()
                out[name] = optuna.importance.get_param_importances(study, evaluator=ped, **kwargs)
    return out


def joint_hypervolume(entries: list[JointEntry], norm: Normaliser | None = None) -> float:
    """Hypervolume of a joint front (minimised values; ``norm`` default: its own extent)."""
    pts = np.array([e.values for e in entries])
    return (norm or Normaliser.from_points(pts)).hypervolume(pts)
