"""The study store a front end reads and repairs: open, list, the front of a stored study, journal
scan/salvage, stale-trial and stale-lock care, the dashboard, the gRPC storage proxy of workers.

The use cases (``open_store``, ``study_rows``, ``stored_front``, ``fail_stale``,
``clear_stale_lock``) are defined here; the store's lower names are re-exports of
``plena_opt.search`` storage modules, so no front end imports them (docs/ARCHITECTURE.md).
Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_STORAGE": "plena_opt.search.storage.storage",
    "METRICS_ATTR": "plena_opt.search.record",
    "PLAN_ATTR": "plena_opt.search.record",
    "VALUES_ATTR": "plena_opt.search.storage.trials",
    "check_owner": "plena_opt.search.serving.serving_store",
    "clear_stale_journal_lock": "plena_opt.search.storage.storage",
    "committed_view": "plena_opt.search.storage.storage",
    "fail_stale_trials": "plena_opt.search.storage.storage",
    "front_trials": "plena_opt.search.storage.trials",
    "list_studies": "plena_opt.search.storage.storage",
    "load_existing_study": "plena_opt.search.storage.storage",
    "open_storage": "plena_opt.search.storage.storage",
    "pareto_mask": "plena_opt.search.fronts.pareto",
    "run_dashboard": "plena_opt.search.storage.dashboard",
    "salvage_journal": "plena_opt.search.storage.journal",
    "scan_journal": "plena_opt.search.storage.journal",
    "scored_trials": "plena_opt.search.storage.trials",
    "serve_proxy": "plena_opt.search.storage.grpc_proxy",
    "storage_exists": "plena_opt.search.storage.storage",
    "torn_tail_note": "plena_opt.search.storage.storage",
    "trials_completed": "plena_opt.search.storage.trials",
}

USE_CASES = ["FrontTrial", "StoredFront", "clear_stale_lock", "fail_stale", "open_store"]
USE_CASES += ["stored_front", "study_rows"]
__all__ = sorted([*_EXPORTS, *USE_CASES])

__getattr__ = lazy_exports(__name__, _EXPORTS)


@dataclass(frozen=True)
class FrontTrial:
    """One plan of a stored study's feasible Pareto front: the plan and metric documents as
    stored (``search.record``; metrics in SI units), its label and trial number."""

    plan: dict[str, Any]
    metrics: dict[str, Any]
    label: str
    number: int


@dataclass(frozen=True)
class StoredFront:
    """A stored study's feasible Pareto front (``search.storage.trials.front_trials``: each plan
    once, highest tokens/s first), its distinct scored plans and its objective names."""

    name: str
    trials_completed: int
    objectives: list[str]
    front: list[FrontTrial]


def open_store(storage: str | None) -> Any | None:
    """The study store at ``storage`` (default: ``DEFAULT_STORAGE``), or None when it does not
    exist (an absent store is never created)."""
    from plena_opt.search.storage.storage import open_storage, storage_exists

    return open_storage(storage) if storage_exists(storage) else None


def study_rows(store: Any) -> list[dict[str, Any]]:
    """One summary row per stored study (``search.storage.storage.list_studies``), as on disk."""
    from plena_opt.search.storage.storage import committed_view, list_studies

    with committed_view(store):  # store order, as `plena-opt studies`
        return list_studies(store)


def stored_front(store: Any, name: str) -> StoredFront:
    """The feasible Pareto front of study ``name``'s completed trials, read as committed on disk
    (a kill -9 then loses none of it); an unknown name raises ``PlenaNotFoundError``."""
    from plena_opt.search.record import METRICS_ATTR, PLAN_ATTR
    from plena_opt.search.storage.storage import committed_view, load_existing_study
    from plena_opt.search.storage.trials import front_trials, trials_completed

    with committed_view(store):
        study = load_existing_study(name, store)
        done = trials_completed(study)
        objectives = list(study.metric_names or [])
        front = front_trials(study)
    rows = [
        FrontTrial(
            plan=t.user_attrs[PLAN_ATTR],
            metrics=t.user_attrs[METRICS_ATTR],
            label=str(t.user_attrs.get("label", "")),
            number=t.number,
        )
        for t in front
    ]
    return StoredFront(name=name, trials_completed=done, objectives=objectives, front=rows)


def fail_stale(store: Any, name: str) -> int:
    """Mark every RUNNING trial of study ``name`` FAIL (how many; 0 for an unknown study). Only
    for a caller that holds the study, so a RUNNING trial is left over from a dead process."""
    import optuna

    from plena_opt.search.storage.storage import fail_stale_trials

    if name not in optuna.get_all_study_names(store):
        return 0
    return len(fail_stale_trials(optuna.load_study(study_name=name, storage=store), older_than_s=0))


def clear_stale_lock(storage: str | None, stale_after: float) -> bool:
    """Remove a journal lock (``storage``, default ``DEFAULT_STORAGE``) unchanged for
    ``stale_after`` seconds, left by a process killed mid-append; whether it did."""
    from plena_opt.search.storage.storage import DEFAULT_STORAGE, clear_stale_journal_lock

    return clear_stale_journal_lock(storage or DEFAULT_STORAGE, stale_after)
