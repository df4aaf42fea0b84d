"""The serving comparison as an Optuna study, so the dashboard shows it by name (issue 16).

Study ``<search study>-serving`` in the same storage: one finished trial per front deployment
of each mode. Params: ``serving`` (aggregated | disaggregated) and the plan dimensions —
``tp``…``cp`` and ``batch_size`` for an aggregated plan, ``prefill_*`` / ``decode_*`` plus
``prefill_workers`` / ``decode_workers`` for a disaggregated one; values: the comparison's
objectives under their metric names; user attributes: label, devices, TTFT, TPOT, tokens/s per
device and user, KV transfer; system attributes: the SLA constraint values as ordinary search
trials carry them (``constraints:<name>`` and the ``constraints`` list optuna-dashboard reads,
≤ 0 feasible; names in the study's ``constraints`` attribute). Memory is no constraint here: a
worker that does not fit is never paired, so every stored deployment fits. Re-running the same
comparison replaces the study's trials, except with ``--serving-sampler optuna``: every
disaggregated deployment the pair search scored is a trial (its sampler params in the
``sampler_params`` user attribute), and a re-run of the same search (same ``serving_search``
fingerprint) resumes the study, adding only the deployments it scored anew.
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from plena_opt.chip.precision import FORMATS
from plena_opt.errors import PlenaInputError
from plena_opt.search.serving.serving_points import SERVING_OBJECTIVES
from plena_opt.search.space.constraint_adapter import ConstraintAdapter
from plena_opt.search.storage.trials import DASHBOARD_CONSTRAINTS

DIMS = ("tp", "ep", "dp", "pp", "cp")
METRIC_NAMES = {
    "ttft": "ttft_seconds",
    "tps-per-device": "tps_per_device",
    "tps-per-user": "tps_per_user",
    "tps-per-seq": "tps_per_user",
    "energy": "energy_j_per_token",
}
OWNER_ATTR = "serving_comparison_of"
FINGERPRINT_ATTR = "serving_search"  # what an Optuna pair search searched (resume only the same)
SAMPLER_PARAMS = "sampler_params"  # a deployment's Optuna pair-search params (for resume)
# (constraint, SLA limit key, deployment figure, +1 for a maximum / -1 for a minimum)
_SLA_RULES = (
    ("max_ttft", "max_ttft_seconds", "ttft_seconds", 1.0),
    ("min_tps_per_seq", "min_tps_per_seq", "tps_per_user", -1.0),
    ("max_tpot", "max_tpot_seconds", "tpot_seconds", 1.0),
)
MAX_INT = 2**24  # bound of every integer param (batches, dims, worker counts)


def _params(e: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ints = IntDistribution(1, MAX_INT)
    params: dict[str, Any] = {"serving": e["serving"]}
    dists: dict[str, Any] = {"serving": CategoricalDistribution(["aggregated", "disaggregated"])}
    pools = [("", e["plan"])] if e["serving"] == "aggregated" else [
        ("prefill_", e["prefill"]), ("decode_", e["decode"])
    ]  # fmt: skip
    for prefix, pool in pools:
        for d in (*DIMS, "batch_size", "workers", "moe_tp"):  # moe_tp: an explicit MoE split
            if d in pool:
                params[prefix + d] = int(pool[d])
                dists[prefix + d] = ints
        if "precision" in pool:  # a searched format (``--precisions``)
            params[prefix + "precision"] = pool["precision"]
            dists[prefix + "precision"] = CategoricalDistribution(FORMATS)
    return params, dists


def sla_constraints(e: dict[str, Any], sla: dict[str, Any]) -> dict[str, float]:
    """The SLA constraint values of a front deployment ``e`` (relative excess over each limit,
    ≤ 0 feasible; the names and formulas of ``objectives.Constraints``); ``sla`` is SI."""
    out: dict[str, float] = {}
    for name, limit, figure, sign in _SLA_RULES:
        if sla.get(limit) is not None:
            lim = float(sla[limit])
            out[name] = sign * (float(e[figure]) - lim) / lim
    return out


def sla_constraint_names(sla: dict[str, Any]) -> list[str]:
    """The constraint names ``sla`` implies, in ``sla_constraints`` order."""
    return [name for name, limit, _, _ in _SLA_RULES if sla.get(limit) is not None]


def check_owner(storage: Any, study_name: str) -> None:
    """Raise when ``<study_name>-serving`` exists and is not this search's comparison."""
    name = f"{study_name}-serving"
    if name in optuna.get_all_study_names(storage):
        old = optuna.load_study(study_name=name, storage=storage)
        if old.user_attrs.get(OWNER_ATTR) != study_name:  # a study of the user's: keep it
            raise PlenaInputError(
                "study",
                f"study {name!r} exists and is not the serving comparison of {study_name!r}; "
                "pick another --study name",
            )


def _trial(e: dict[str, Any], doc: dict[str, Any], extra: dict[str, Any] | None = None) -> Any:
    """The finished trial of deployment ``e`` of comparison ``doc``."""
    params, dists = _params(e)
    attrs = {k: v for k, v in e.items() if k not in ("plan", "prefill", "decode")}
    cons = sla_constraints(e, doc["sla"])
    attrs["constraints"] = cons
    attrs.update(extra or {})
    return create_trial(
        state=TrialState.COMPLETE,
        values=[e[SERVING_OBJECTIVES[k][1]] for k in doc["objectives"]],
        params=params,
        distributions=dists,
        user_attrs=attrs,
        # Optuna 5's ``constraints:<name>`` or 4's ``constraints`` (one adapter), and the list
        # optuna-dashboard reads
        system_attrs={
            **ConstraintAdapter().system_attrs(cons),
            DASHBOARD_CONSTRAINTS: list(cons.values()),
        },
    )


def _resumable(storage: Any, name: str, fingerprint: dict[str, Any] | None) -> Any:
    """The stored study ``name`` when an Optuna pair search with ``fingerprint`` made it."""
    if fingerprint is None or name not in optuna.get_all_study_names(storage):
        return None
    study = optuna.load_study(study_name=name, storage=storage)
    return study if study.user_attrs.get(FINGERPRINT_ATTR) == fingerprint else None


def resume_params(
    storage: Any, study_name: str, fingerprint: dict[str, Any]
) -> list[dict[str, Any]]:
    """The sampler params of the deployments an earlier Optuna pair search with the same
    ``fingerprint`` stored in ``<study_name>-serving`` (empty when there is none)."""
    check_owner(storage, study_name)
    study = _resumable(storage, f"{study_name}-serving", fingerprint)
    if study is None:
        return []
    return [
        dict(t.user_attrs[SAMPLER_PARAMS]) for t in study.trials if SAMPLER_PARAMS in t.user_attrs
    ]


def store_comparison(
    doc: dict[str, Any],
    storage: Any,
    study_name: str,
    scored: list[dict[str, Any]] | None = None,
    fingerprint: dict[str, Any] | None = None,
) -> str:
    """Write the fronts of ``doc`` (``compare_serving``) as study ``<study_name>-serving``.

    With ``scored`` (the Optuna pair search's deployments, each with its ``sampler_params`` and
    ``new`` flag), every disaggregated deployment scored is a trial instead of the front only;
    a study made by a search with the same ``fingerprint`` is resumed: only the new ones are
    added (the aggregated front, deterministic, is there already)."""
    name = f"{study_name}-serving"
    check_owner(storage, study_name)
    study = _resumable(storage, name, fingerprint) if scored is not None else None
    if study is None:
        study = _new_study(doc, storage, study_name, fingerprint)
        trials = [_trial(e, doc) for e in doc.get("aggregated", {}).get("front", [])]
        if scored is None:
            trials += [_trial(e, doc) for e in doc.get("disaggregated", {}).get("front", [])]
    else:
        trials = []
    for e in scored or []:
        if e["new"]:
            body = {k: v for k, v in e.items() if k not in ("new", SAMPLER_PARAMS)}
            trials.append(_trial(body, doc, {SAMPLER_PARAMS: e[SAMPLER_PARAMS]}))
    if "verdict" in doc:
        study.set_user_attr("verdict", doc["verdict"])
    study.add_trials(trials)
    return name


def _new_study(
    doc: dict[str, Any], storage: Any, study_name: str, fingerprint: dict[str, Any] | None
) -> Any:
    """A fresh ``<study_name>-serving`` (an older one of this search is replaced)."""
    name = f"{study_name}-serving"
    objectives = doc["objectives"]
    if name in optuna.get_all_study_names(storage):
        optuna.delete_study(study_name=name, storage=storage)
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        directions=["minimize" if SERVING_OBJECTIVES[k][0] > 0 else "maximize" for k in objectives],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([METRIC_NAMES[k] for k in objectives])
    study.set_user_attr(OWNER_ATTR, study_name)
    study.set_user_attr("sla", doc["sla"])
    study.set_user_attr("constraints", sla_constraint_names(doc["sla"]))
    if fingerprint is not None:
        study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
    return study
