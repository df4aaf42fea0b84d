"""How scored plans are stored as Optuna trials, and what a stored study holds.

One trial per distinct scored plan (service-conventions §1.1), written in batches:

* feasible → ``COMPLETE`` with the objective values;
* infeasible (does not fit in memory, misses an SLA) → ``PRUNED``, its objective values kept in
  the ``values`` user attribute and the broken constraints in ``infeasible``. optuna-dashboard
  takes its best trials from the COMPLETE trials without looking at constraints, so this is what
  makes its Pareto front the CLI's; Optuna's TPE still counts PRUNED trials that carry constraint
  values as infeasible;
* a plan whose objectives are not finite → ``FAIL`` with ``fail_reason``.

Every trial carries its constraint values twice: Optuna 5's ``constraints:<name>`` system
attributes and the ``constraints`` list that optuna-dashboard reads (both ≤ 0 feasible), and its
params are the whole plan (``tp, ep, dp, pp, cp, moe_tp_mode, comm_overlap, batch_size`` and,
when the search searches formats, ``precision``; where the space holds explicit MoE splits,
``moe_tp``, 0 for a shorthand plan).
Illegal suggestions and repeated suggestions of a sampler never reach the store (the sampler runs
on its own in-memory study, ``plena_opt.search.run.sampled``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.record import METRICS_ATTR, POINT_ATTR, Record
from plena_opt.search.space.space import COMM_OVERLAPS, MOE_TP_MODES, PlanSpace
from plena_opt.search.storage.journal import NUMBER_ATTR
from plena_opt.search.storage.journal_bulk import JournalTrialWriter
from plena_opt.search.storage.storage_backend import batch_writes, is_batched, journal_backend

VALUES_ATTR = "values"
INFEASIBLE_ATTR = "infeasible"
DASHBOARD_CONSTRAINTS = "constraints"  # the system attribute optuna-dashboard 0.21 reads
PLAN_PARAMS = (
    "tp",
    "ep",
    "dp",
    "pp",
    "cp",
    "moe_tp_mode",
    "comm_overlap",
    "batch_size",
    "precision",
    "moe_tp",
)
SCORED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


def plan_distributions(space: PlanSpace) -> dict[str, BaseDistribution]:
    """Distributions of the stored params: every plan field, whatever the sampler searches."""
    shapes = [p.plan for p in space.points]
    dists: dict[str, BaseDistribution] = {
        d: CategoricalDistribution(sorted({getattr(p, d) for p in shapes}) or [1])
        for d in ("tp", "ep", "dp", "pp", "cp")
    }
    dists["moe_tp_mode"] = CategoricalDistribution(list(MOE_TP_MODES))
    if space.moe_tps:
        dists["moe_tp"] = CategoricalDistribution([0, *space.moe_tps])
    dists["comm_overlap"] = CategoricalDistribution(list(COMM_OVERLAPS))
    dists["batch_size"] = CategoricalDistribution(list(space.batch_sizes))
    if space.searches_precision:
        dists["precision"] = CategoricalDistribution(list(space.precisions))
    return dists


def record_trial(rec: Record, dists: dict[str, BaseDistribution], number: int) -> FrozenTrial:
    """The trial that stores ``rec`` (state by feasibility, see the module docstring)."""
    cons = {f"constraints:{k}": float(v) for k, v in rec.constraints.items()}
    cons[DASHBOARD_CONSTRAINTS] = [float(v) for v in rec.constraints.values()]
    cons[NUMBER_ATTR] = number
    attrs = rec.user_attrs()
    if not rec.valid:
        state, values = TrialState.FAIL, None
        cons["fail_reason"] = "an objective is not available (not finite) for this plan"
    elif rec.feasible:
        state, values = TrialState.COMPLETE, list(rec.values)
    else:
        state, values = TrialState.PRUNED, None
        attrs[VALUES_ATTR] = list(rec.values)
        attrs[INFEASIBLE_ATTR] = [k for k, v in rec.constraints.items() if v > 0]
    now = datetime.now()
    # FrozenTrial directly: ``create_trial`` re-checks every distribution against the legacy
    # classes, which cost more than storing the trial (benchmarks/README_search.md, "store").
    return FrozenTrial(
        number=-1,
        state=state,
        value=None,
        values=values,
        datetime_start=now,
        datetime_complete=now,
        params={k: v for k, v in {"moe_tp": 0, **rec.point.to_dict()}.items() if k in dists},
        distributions=dists,
        user_attrs=attrs,
        system_attrs=cons,
        intermediate_values={},
        trial_id=-1,
    )


def is_scored(t: FrozenTrial) -> bool:
    """Whether ``t`` holds a scored plan (COMPLETE or PRUNED with metrics, not a repeat)."""
    return (
        t.state in SCORED_STATES
        and METRICS_ATTR in t.user_attrs
        and POINT_ATTR in t.user_attrs
        and "repeat_of" not in t.user_attrs
    )


def scored_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The study's scored plans, each plan once (its first trial), in trial order."""
    seen: set[str] = set()
    out = []
    for t in study.get_trials(deepcopy=False, states=SCORED_STATES):
        if is_scored(t) and t.user_attrs[POINT_ATTR] not in seen:
            seen.add(t.user_attrs[POINT_ATTR])
            out.append(t)
    return out


def trials_completed(study: optuna.Study) -> int:
    """``trials_completed``: distinct plans scored and stored in the study, feasible or not.

    The same number in ``SearchResult.trials_completed``, gRPC ``SearchResult`` and
    ``GetStudyResponse`` and ``plena-opt studies``: trials holding a plan's metrics (COMPLETE =
    feasible, PRUNED with metrics = infeasible), each plan counted once, earlier runs of a resumed
    study included. Illegal or repeated suggestions, failed and running trials are not counted.
    Plans that workers in ``front`` mode recorded on their chunks count too (only the chunks'
    fronts are trials there: ``plena_opt.search.storage.chunk_store``).
    """
    from plena_opt.search.storage.chunk_store import chunk_keys

    keys = {t.user_attrs[POINT_ATTR] for t in scored_trials(study)}
    return len(keys | chunk_keys(study))


def _feasible(t: FrozenTrial) -> bool:
    if t.state != TrialState.COMPLETE or not t.values:
        return False
    return bool(t.user_attrs.get("feasible", True))


def front_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The feasible Pareto front of the stored plans, each plan once, by TPS (highest first)."""
    feasible = [t for t in scored_trials(study) if _feasible(t)]
    if not feasible:
        return []
    signs = np.array([1.0 if d.name == "MINIMIZE" else -1.0 for d in study.directions])
    mask = pareto_mask(np.array([t.values for t in feasible]) * signs)
    front = [t for t, keep in zip(feasible, mask, strict=True) if keep]
    front.sort(key=lambda t: (-t.user_attrs[METRICS_ATTR]["tps"], t.number))
    return front


class StudyWriter:
    """Writes records to a study in batches, each plan once even with other writers on it."""

    def __init__(
        self, study: optuna.Study, storage: Any, space: PlanSpace, discard: bool = False
    ) -> None:
        """``discard``: a throw-away in-memory study nothing can read after the search (the
        library's default store): plans are deduplicated and counted, not written."""
        self.study = study
        self.storage = storage
        self.discard = discard
        # a batched journal holds its lock while writing, so nobody else writes meanwhile
        self.exclusive = discard or is_batched(storage)
        self.dists = plan_distributions(space)
        # a journal file opened here: the trials' records are appended in bulk (journal_bulk)
        self._journal = None if discard else journal_backend(storage)
        self._bulk = None
        if self._journal is not None:
            study_id = storage.get_study_id_from_name(study.study_name)
            self._bulk = JournalTrialWriter(study_id, len(study.directions), self.dists)
        self.known: dict[str, FrozenTrial] = {}
        self._seen = 0
        self.written = 0

    def refresh(self) -> list[FrozenTrial]:
        """Scored trials that appeared since the last call (this or another process)."""
        trials = self.study.get_trials(deepcopy=False)
        fresh = []
        for t in trials[self._seen :]:
            if is_scored(t) and t.user_attrs[POINT_ATTR] not in self.known:
                self.known[t.user_attrs[POINT_ATTR]] = t
                fresh.append(t)
        self._seen = len(trials)
        return fresh

    def write(self, recs: Sequence[Record]) -> tuple[list[Record], list[FrozenTrial]]:
        """Store the records whose plan is not stored yet; (stored, others' new trials)."""
        if not recs:
            return [], []
        with batch_writes(self.storage):
            others = self.refresh()
            new: dict[str, Record] = {}
            for rec in recs:
                if rec.point.key not in self.known:
                    new.setdefault(rec.point.key, rec)
            base = self._seen
            trials = [record_trial(r, self.dists, base + i) for i, r in enumerate(new.values())]
            exclusive = self.exclusive
            if self._bulk is not None:
                self._bulk.write(self._journal, trials)
                # replay them now (as add_trials does); the count checks the numbers below
                exclusive = len(self.study.get_trials(deepcopy=False)) == base + len(trials)
            elif not self.discard:
                self.study.add_trials(trials)
            if exclusive:  # nobody wrote meanwhile: the numbers are base, base + 1, …
                for i, (key, t) in enumerate(zip(new, trials, strict=True)):
                    t.number = base + i
                    self.known[key] = t
                self._seen = base + len(trials)
            else:
                self.refresh()
        for key, rec in new.items():
            rec.trial_number = None if self.discard else self.known[key].number
        self.written += len(new)
        return list(new.values()), others
