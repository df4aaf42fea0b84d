"""The studies tab: the studies in the store and one study's scored plans (read only; an absent
store is never created)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.web.service.serving_study import is_serving_study, not_in_form, serving_study

#: SLA constraints of a plan study (``search.space.objectives.Constraints.names``)
SLA_CONSTRAINTS = ("max_ttft", "min_tps_per_seq", "max_tpot")


def list_studies(storage: str | None) -> list[dict[str, Any]]:
    """Summaries of the studies in the store, each with its ``kind`` (``plans``, or ``serving``
    for a serving comparison); an absent store has none and nothing is created."""
    import optuna

    from plena_opt.api.studies import list_studies as _list
    from plena_opt.api.studies import open_store

    store = open_store(storage)
    if store is None:
        return []
    rows = _list(store)
    attrs = {s.study_name: s.user_attrs for s in optuna.get_all_study_summaries(store, False)}
    for r in rows:
        r["kind"] = "serving" if is_serving_study(attrs.get(r["name"], {})) else "plans"
    return rows


@contextmanager
def _stored_study(storage: str | None, name: str) -> Iterator[tuple[Any, Any]]:
    """(store, study ``name``) read as committed on disk (``committed_view``); 404 when the
    store or the study is absent."""
    from plena_opt.api.studies import committed_view, load_existing_study, open_store

    store = open_store(storage)
    if store is None:
        raise PlenaNotFoundError("study", f"unknown study {name!r}; the store has no studies")
    with committed_view(store):
        yield store, load_existing_study(name, store)


def study_front(storage: str | None, name: str, max_trials: int) -> dict[str, Any]:
    """The first ``max_trials`` scored plans of study ``name`` (each plan once; infeasible ones
    are PRUNED trials with their values kept): plan, metrics, feasibility, membership of the
    study's feasible Pareto front (``plena_opt.search.storage.trials.front_trials``, as GetStudy)
    and the study's problem. Only what is on disk is read (``committed_view``)."""
    from optuna.trial import TrialState

    from plena_opt.api.studies import (
        METRICS_ATTR,
        PLAN_ATTR,
        VALUES_ATTR,
        front_trials,
        scored_trials,
    )

    with _stored_study(storage, name) as (_, study):
        if is_serving_study(study.user_attrs):
            raise PlenaInputError(
                "name",
                f"name: study {name!r} is a serving comparison; read /api/studies/{name}/serving",
            )
        trials = scored_trials(study)[:max_trials]
        on_front = {t.number for t in front_trials(study)}
    rows = []
    for t in trials:
        m = t.user_attrs[METRICS_ATTR]
        done = t.state == TrialState.COMPLETE
        values = t.values if done else t.user_attrs.get(VALUES_ATTR, [])
        rows.append(
            {
                "number": t.number,
                "label": t.user_attrs.get("label", ""),
                "plan": t.user_attrs.get(PLAN_ATTR, {}),
                "values": [float(v) for v in values],
                "feasible": done and bool(t.user_attrs.get("feasible", True)),
                "on_front": t.number in on_front,
                "ttft_ms": float(m["ttft_ms"]),
                "tps": float(m["tps"]),
                "tps_per_device": m.get("tps_per_device"),
                "tps_per_user": float(m["tps_per_sequence"]),
                "energy_j_per_token": m.get("energy_j_per_token"),
            }
        )
    metric_names = study.metric_names or [f"objective {i}" for i in range(len(study.directions))]
    bad = not_in_form(study.user_attrs.get("problem"))
    if "precision" not in bad and any("precision" in r["plan"] for r in rows):
        bad.append("precision")  # a --precisions study: each plan has its own format
    sla = [c for c in study.user_attrs.get("constraints") or [] if c in SLA_CONSTRAINTS]
    per_device = bool(sla) or "tps_per_device" in metric_names
    if not rows or any(r["tps_per_device"] is None for r in rows):
        per_device = False  # as ``search.run.output._plot_axes``: only when every plan has it
    return {
        "name": name,
        "view": "per-user-per-device" if per_device else "ttft-tps",
        "sla_constraints": sla,
        "metric_names": metric_names,
        "directions": [d.name.lower() for d in study.directions],
        "problem": study.user_attrs.get("problem"),
        "not_in_form": bad,
        "trials": rows,
    }


def serving_front(storage: str | None, name: str, max_trials: int) -> dict[str, Any]:
    """Serving comparison study ``name`` (``serving_study.serving_study``): its first
    ``max_trials`` deployments; the problem from the search study it compares."""
    from plena_opt.api.studies import load_existing_study

    with _stored_study(storage, name) as (store, study):
        owner_name = study.user_attrs.get("serving_comparison_of")
        try:
            owner = load_existing_study(owner_name, store) if owner_name else None
        except PlenaNotFoundError:
            owner = None  # the search study was deleted: no problem to open plans with
        return serving_study(study, owner, max_trials)
