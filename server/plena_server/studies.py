"""Stored studies as the server sees them: the store opened once, stale trials failed, and a
study's feasible Pareto front (GetStudy, and the answer of a search that overran its deadline).

Only Optuna's public API is used (stale trials: ``Study.tell(number, state=FAIL)`` through
``plena_opt.search.storage.fail_stale_trials``; the front: ``plena_opt.search.trials``).
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
    from plena_opt.api.studies import DEFAULT_STORAGE, open_storage, storage_exists

    url = storage or DEFAULT_STORAGE
    with _STORES_LOCK:
        if url in _STORES:
            return _STORES[url]
        if not storage_exists(storage):
            return None
        _STORES[url] = open_storage(storage)
        return _STORES[url]


def fail_stale_trials(storage: str | None, name: str) -> int:
    """Mark RUNNING trials of study ``name`` FAIL (returns how many).

    Called only while this server holds the study's slot, so a RUNNING trial is left over from a
    process that died mid-trial (e.g. kill -9): ask/tell has no heartbeat (service-conventions
    §1.4), so the service fails stale trials itself. Completed trials are untouched.
    """
    import optuna

    from plena_opt.api.studies import fail_stale_trials as fail_stale

    store = _open(storage)
    if store is None or name not in optuna.get_all_study_names(store):
        return 0
    return len(fail_stale(optuna.load_study(study_name=name, storage=store), older_than_s=0))


def study_exists(storage: str | None, name: str) -> bool:
    import optuna

    store = _open(storage)
    return store is not None and name in optuna.get_all_study_names(store)


def get_study(storage: str | None, name: str) -> pb.GetStudyResponse:
    """The feasible Pareto front of a stored study's completed trials."""
    from plena_opt.api.studies import (
        METRICS_ATTR,
        PLAN_ATTR,
        committed_view,
        front_trials,
        load_existing_study,
        trials_completed,
    )

    store = _open(storage)
    if store is None:
        raise PlenaNotFoundError("study_name", f"unknown study {echo(name)}; the store is empty")
    with committed_view(store):  # report only what is on disk: a kill -9 then loses none of it
        try:
            study = load_existing_study(name, store)
        except PlenaNotFoundError as exc:  # its message lists the first few studies
            raise PlenaNotFoundError("study_name", exc.rule) from exc
        out = pb.GetStudyResponse(
            study_name=name,
            trials_completed=trials_completed(study),
            objectives=list(study.metric_names or []),
        )
        front = front_trials(study)
    for t in front:
        out.front.append(
            summary_to_proto(
                t.user_attrs[PLAN_ATTR],
                t.user_attrs[METRICS_ATTR],
                label=str(t.user_attrs.get("label", "")),
                trial_number=t.number,
            )
        )
    return out


MAX_LISTED_STUDIES = 1000  # one ListStudies response stays far below the message size limit


def list_studies(storage: str | None) -> pb.ListStudiesResponse:
    """Summaries of the stored studies (``plena_opt.search.storage.list_studies`` rows)."""
    import json

    from plena_opt.api.studies import committed_view
    from plena_opt.api.studies import list_studies as rows_of

    store = _open(storage)
    if store is None:
        rows = []
    else:
        with committed_view(store):  # store order, as `plena-opt studies`
            rows = rows_of(store)
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
