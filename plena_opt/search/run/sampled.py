"""The sampler loop: an Optuna sampler proposes plans, new ones are scored and stored in batches.

The sampler works on its own in-memory study (the *sampler study*): every suggestion is told
there — a new plan with its values and constraints (infeasible plans stay COMPLETE there, so TPE
and NSGA-II both see their constraint values), an illegal one as PRUNED with every constraint
violated, a repeat (a plan already scored) as FAIL, which no sampler learns from, so a plan's
values are in the sampler's history once and repeats do not pull the sampler back to it. Only
distinct scored plans reach the stored study (``plena_opt.search.storage.trials``), so repeats and
illegal suggestions never inflate it, and no plan is scored twice.

The budget (``trials`` distinct plans in the stored study, a hard limit: the plans an earlier run of
the same search stored count, so this run scores ``budget_left`` new ones) is spent in phases:
the sampler first scores ``SAMPLER_SHARE`` of it, then the local refinement
(``plena_opt.search.space.refine``) scores the unscored one-step neighbours of the current front,
round after round, until no front plan has one left; the sampler then takes half of what remains,
the new front is refined again, and so on.
Refinement plans are told to the sampler study as well. Why: TPE spends its budget around the
front it knows but misses plans one discrete step from it (qwen3-235b-a22b on 1,024 devices: 12 of
14 front plans with 10 % of the evaluations; benchmarks/README_search.md).

The run stops when the budget is spent, when every legal plan is scored (the distinct plans ran
out), or on stop/deadline. Ask until new, bounded: after ``STALE_STREAK`` suggestions in a row
that bring no new plan, the unscored legal plan nearest the last suggestion (``nearest_unscored``)
is enqueued, so every new plan costs at most ``STALE_STREAK + 1`` asks. Once the unscored plans
are no more than the budget left, they are scored in one pass (``enumerate_rest``) instead of
being asked for one by one (a space just above the budget made TPE repeat itself 1,781 times for
200 new plans, issue 26).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState, create_trial

from plena_opt.search.record import Record
from plena_opt.search.request import budget_left
from plena_opt.search.space.refine import MoveCredit, neighbour_order
from plena_opt.search.space.samplers import make_sampler

if TYPE_CHECKING:
    from plena_opt.search.run.session import _Search
    from plena_opt.search.space.space import Point

STALE_STREAK = 1
FLUSH_POINTS = 64
FLUSH_SECONDS = 0.5
# Share of the budget the sampler spends before the first refinement; after each refinement the
# sampler takes half of what is left, then the new front is refined again.
SAMPLER_SHARE = 0.5


class SampledRun:
    """One sampler run over ``search`` (a ``session._Search``)."""

    def __init__(self, search: _Search, sampler_name: str) -> None:
        self.s = search
        self.name = sampler_name
        req = search.req
        self.dists = search.space.distributions()
        storage = optuna.storages.InMemoryStorage()  # built directly: create_study would log
        directions = [StudyDirection[o.direction.upper()] for o in search.objectives]
        storage.create_new_study(directions, "sampler")
        self.study = optuna.Study(
            study_name="sampler",
            storage=storage,
            sampler=make_sampler(sampler_name, req.seed, search.adapter, req.trials),
        )
        self.rng = np.random.default_rng(req.seed)
        unscored = sum(1 for p in search.space.points if p.key not in search.cache)
        # new plans this run may score: ``trials`` less the plans the study holds
        self.limit = search.evaluated + budget_left(req, unscored, len(search.space))
        self.pending: list[Record] = []
        self.last_flush = time.perf_counter()
        self.refined = 0  # plans scored by the local refinement
        self.credit = MoveCredit()
        self._features: np.ndarray | None = None
        self.teach(list(search.cache.values()))

    def teach(self, recs: list[Record]) -> None:
        """Tell the sampler study about plans scored elsewhere (resume, probe, other writers)."""
        trials = [
            create_trial(
                state=TrialState.COMPLETE if r.valid else TrialState.FAIL,
                values=list(r.values) if r.valid else None,
                params=self.s.space.params(r.point),
                distributions=self.dists,
                system_attrs=self.s.adapter.system_attrs(r.constraints) if r.valid else {},
            )
            for r in recs
        ]
        if trials:
            self.study.add_trials(trials)

    def flush(self, force: bool = False) -> None:
        """Store the scored plans not stored yet (every ``FLUSH_POINTS`` or ``FLUSH_SECONDS``)."""
        now = time.perf_counter()
        if not self.pending or (
            not force and len(self.pending) < FLUSH_POINTS and now - self.last_flush < FLUSH_SECONDS
        ):
            return
        recs, self.pending = self.pending, []
        self.last_flush = now
        self.teach(self.s.add_records(recs))

    def nearest_unscored(self, params: dict | None) -> dict | None:
        """The params of the unscored legal plan nearest ``params`` (L1 over log₂ of tp, ep,
        dp, pp, cp and the index of every other choice; first in space order among equals), a
        seeded random one without ``params``; None when every plan is scored."""
        space, cache = self.s.space, self.s.cache
        idx = [i for i, p in enumerate(space.points) if p.key not in cache]
        if not idx:
            return None
        if params is None:
            return space.params(space.points[idx[int(self.rng.integers(len(idx)))]])
        if self._features is None:
            self._features = np.array([_features(self.dists, p) for p in space.points])
        tp, ep, pp, cp = (int(params[d]) for d in ("tp", "ep", "pp", "cp"))
        dp = space.num_devices / (tp * ep * pp * cp)
        target = _feature_row(self.dists, (tp, ep, dp, pp, cp), params)
        dist = np.abs(self._features[idx] - target).sum(axis=1)
        return space.params(space.points[idx[int(np.argmin(dist))]])

    def enumerate_rest(self) -> None:
        """Score every unscored legal plan (grouped by batch size and precision) and tell the
        sampler study; the space is then exhausted."""
        s = self.s
        for batch, prec in s.groups():
            todo = [
                p
                for p in s.space.points
                if p.batch_size == batch and p.precision == prec and p.key not in s.cache
            ]
            for i in range(0, len(todo), FLUSH_POINTS):
                s.stop_reason = s.check_stop()
                if s.stop_reason:
                    return
                recs = s.score(todo[i : i + FLUSH_POINTS])
                for rec in recs:
                    s.cache[rec.point.key] = rec
                self.pending.extend(recs)
                self.teach(recs)
                self.flush()
                s.report("enumerate", s.evaluated, self.limit)

    def run(self) -> None:
        """Alternate sampler phases and local refinement until the budget is spent (module doc)."""
        s, req, limit = self.s, self.s.req, self.limit
        try:
            target = s.evaluated + math.ceil(SAMPLER_SHARE * (limit - s.evaluated))
            while s.evaluated < limit and len(s.cache) < len(s.space):
                self.sample(max(target, s.evaluated + 1))
                if s.stop_reason:
                    return
                self.refine(limit)
                if s.stop_reason:
                    return
                target = s.evaluated + math.ceil(0.5 * (limit - s.evaluated))
            if len(s.cache) >= len(s.space) and len(s.cache) < req.trials:
                s.warnings.append(
                    f"every one of the {len(s.space)} legal plans is scored; the sampler stopped "
                    f"before its budget of {req.trials} trials"
                )
        finally:
            self.flush(force=True)

    def sample(self, target: int) -> None:
        """Ask the sampler until ``target`` plans were scored in all (or the space ran out);
        once the unscored plans fit the budget left, score them all (``enumerate_rest``)."""
        s = self.s
        names = s.constraints.names()
        stale, last = 0, None
        while s.evaluated < target and len(s.cache) < len(s.space):
            s.stop_reason = s.check_stop()
            if s.stop_reason:
                return
            if len(s.space) - len(s.cache) <= self.limit - s.evaluated:
                self.enumerate_rest()
                return
            if stale >= STALE_STREAK:
                params = self.nearest_unscored(last)
                if params is None:
                    break
                self.study.enqueue_trial(params)
                stale = 0
            trial = self.study.ask(self.dists)
            last = trial.params
            point, why = s.space.point_from_params(trial.params)
            if point is None:
                s.adapter.record(trial, dict.fromkeys(names, 1.0))
                self.study.tell(trial, state=TrialState.PRUNED)
                s.pruned += 1
                stale += 1
                continue
            rec = s.cache.get(point.key)
            if rec is not None:  # a repeat: not scored, not stored, not learnt from again
                self.study.tell(trial, state=TrialState.FAIL)
                s.repeats += 1
                stale += 1
                continue
            rec = s.score([point])[0]
            s.cache[point.key] = rec
            self.pending.append(rec)
            stale = 0
            s.adapter.record(trial, rec.constraints)
            if rec.valid:
                self.study.tell(trial, list(rec.values))
            else:
                self.study.tell(trial, state=TrialState.FAIL)
            self.flush()
            s.report(self.name, s.evaluated, self.limit)

    def refine(self, limit: int) -> None:
        """Score the unscored neighbours of the current front (``refine.neighbour_order``, the
        step kinds that reached the front before first), round after round, until none is left
        (no front plan has an unscored neighbour) or ``limit`` plans were scored in all; each
        scored plan is told to the sampler study too."""
        s = self.s
        while s.evaluated < limit:
            s.stop_reason = s.check_stop()
            if s.stop_reason:
                return
            front = [r.point for r in s.front_records(list(s.cache.values()))]
            todo = neighbour_order(front, s.space, s.cache, self.credit.rates())
            todo = todo[: limit - s.evaluated]
            if not todo:
                return
            groups: dict[tuple, list] = {}
            for m in todo:
                groups.setdefault((m.point.batch_size, m.point.precision), []).append(m.point)
            for pts in groups.values():
                recs = s.score(pts)
                for rec in recs:
                    s.cache[rec.point.key] = rec
                self.pending.extend(recs)
                self.teach(recs)
            on_front = {r.point.key for r in s.front_records(list(s.cache.values()))}
            for m in todo:
                self.credit.add(m.kind, m.point.key in on_front)
            self.refined += len(todo)
            self.flush()
            s.report("refine", s.evaluated, self.limit)


def _feature_row(dists: dict, dims: tuple, values: dict) -> np.ndarray:
    """log₂ of (tp, ep, dp, pp, cp), then the index of each other choice among its values."""
    logs = [math.log2(max(float(v), 1e-9)) for v in dims]
    extra = [
        float(dist.choices.index(values[name])) if values.get(name) in dist.choices else 0.0
        for name, dist in dists.items()
        if name not in ("tp", "ep", "pp", "cp")
    ]
    return np.array(logs + extra)


def _features(dists: dict, point: Point) -> np.ndarray:
    p = point.plan
    return _feature_row(dists, (p.tp, p.ep, p.dp, p.pp, p.cp), point.to_dict())
