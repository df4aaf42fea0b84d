"""Stored studies as the server sees them: the store opened once, stale trials failed, and a
study's feasible Pareto front (GetStudy, and the answer of a search that overran its deadline).

The use cases are ``plena_opt.api.studies``'s (``open_store``, ``fail_stale``, ``stored_front``,
``study_rows``); this module keeps the opened stores and maps to proto.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api.wire import summary_to_proto
from plena_opt.errors import PlenaInputError, PlenaNotFoundError, echo

_STORES: dict[str, Any] = {}
_STORES_LOCK = threading.Lock()


def _open(storage: str | None) -> Any:
    """The server's study store, opened once (a journal is then synced incrementally)."""
    from plena_opt.api.studies import DEFAULT_STORAGE, open_store

    url = storage or DEFAULT_STORAGE
    with _STORES_LOCK:
        if url in _STORES:
            return _STORES[url]
        store = open_store(storage)
        if store is not None:
            _STORES[url] = store
        return store


def fail_stale_trials(storage: str | None, name: str) -> int:
    """Mark RUNNING trials of study ``name`` FAIL (returns how many).

    Called only while this server holds the study's slot, so a RUNNING trial is left over from a
    process that died mid-trial (e.g. kill -9): ask/tell has no heartbeat (service-conventions
    §1.4), so the service fails stale trials itself. Completed trials are untouched.
    """
    from plena_opt.api.studies import fail_stale

    store = _open(storage)
    return 0 if store is None else fail_stale(store, name)


def study_exists(storage: str | None, name: str) -> bool:
    import optuna

    store = _open(storage)
    return store is not None and name in optuna.get_all_study_names(store)


def get_study(storage: str | None, name: str) -> pb.GetStudyResponse:
    """The feasible Pareto front of a stored study's completed trials."""
    from plena_opt.api.studies import stored_front

    store = _open(storage)
    if store is None:
        raise PlenaNotFoundError("study_name", f"unknown study {echo(name)}; the store is empty")
    try:
        front = stored_front(store, name)
    except PlenaNotFoundError as exc:  # its message lists the first few studies
        raise PlenaNotFoundError("study_name", exc.rule) from exc
    out = pb.GetStudyResponse(
        study_name=name, trials_completed=front.trials_completed, objectives=front.objectives
    )
    for t in front.front:
        out.front.append(summary_to_proto(t.plan, t.metrics, label=t.label, trial_number=t.number))
    return out


MAX_LISTED_STUDIES = 1000  # one ListStudies response stays far below the message size limit


def list_studies(storage: str | None) -> pb.ListStudiesResponse:
    """Summaries of the stored studies (``plena_opt.search.storage.storage.list_studies`` rows)."""
    import json

    from plena_opt.api.studies import study_rows

    store = _open(storage)
    rows = [] if store is None else study_rows(store)
    out = pb.ListStudiesResponse(truncated=len(rows) > MAX_LISTED_STUDIES)
    for row in rows[:MAX_LISTED_STUDIES]:
        out.studies.append(
            pb.StudySummary(
                name=row["name"],
                n_trials=row["n_trials"],
                trials_by_state=row["trials_by_state"],
                metric_names=list(row["metric_names"] or []),
                directions=list(row["directions"]),
                summary_json=json.dumps(row),
            )
        )
    return out


def fallback_result(storage: str | None, name: str, t0: float) -> pb.SearchResult:
    """A partial result read from the study (the library did not return before the deadline)."""
    try:
        study = get_study(storage, name)
    except PlenaInputError:  # the study was not even created yet
        study = pb.GetStudyResponse(study_name=name)
    return pb.SearchResult(
        study_name=name,
        partial=True,
        stop_reason="deadline",
        trials_completed=study.trials_completed,
        front=study.front,
        objectives=study.objectives,
        elapsed_seconds=time.perf_counter() - t0,
        warnings=["the search did not stop in time; the front was read from the study"],
    )
