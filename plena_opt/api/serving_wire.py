"""The serving decisions (``SearchResult.serving``, a JSON-ready document) ↔ ``ServingDecisions``.

One place for both directions, so that ``decisions_from_proto(decisions_to_proto(doc)) == doc``
for every document ``api.decide_serving`` writes (the ``--server`` output equals the local one):
a key the document leaves out is an unset proto field and comes back left out; None is an unset
``optional`` field; a NaN energy (no energy model) is an unset ``energy_j_per_token``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.metrics import INTERVAL_BASIS, METRICS, interval_fields
from plena_opt.search.serving.serving import BASIS_STATIC, BASIS_UNDER_LOAD, PERCENTILE_BASIS
from plena_opt.search.space.space import Point

_DIMS = ("tp", "ep", "dp", "pp", "cp")
_PLAN_TEXT = ("moe_tp_mode", "comm_overlap")
_FIGURES = ("ttft_seconds", "tpot_seconds", "tps_per_device", "tps_per_user")
_ROLE_FIGURE = {
    "aggregated": "interference_seconds_per_token",
    "disaggregated": "kv_transfer_seconds",
}
_SLA = ("max_ttft_seconds", "max_tpot_seconds", "min_tps_per_seq")
# A priced deployment's cost fields (its ``usd_per_million_input_tokens`` is always None).
_COST = ("usd_per_million_output_tokens", "tps_per_kilowatt", "power_watts_per_device", "cost_note")


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def _sla_to(doc: Mapping[str, Any], out: pb.ServingSla) -> None:
    out.SetInParent()
    for k in _SLA:
        if doc.get(k) is not None:
            setattr(out, k, float(doc[k]))


def _sla_from(msg: pb.ServingSla) -> dict[str, Any]:
    return {k: _opt(msg, k) for k in _SLA}


def _plan_to(doc: Mapping[str, Any], out: pb.ServingPlan) -> None:
    for k in (*_DIMS, "batch_size"):
        setattr(out, k, int(doc[k]))
    for k in _PLAN_TEXT:
        setattr(out, k, doc[k])
    if "precision" in doc:
        out.precision = doc["precision"]
    if "workers" in doc:
        out.workers = int(doc["workers"])
    if doc.get("moe_tp"):
        out.moe_tp = int(doc["moe_tp"])


def _plan_from(msg: pb.ServingPlan) -> dict[str, Any]:
    doc: dict[str, Any] = {k: getattr(msg, k) for k in (*_DIMS, *_PLAN_TEXT, "batch_size")}
    if msg.HasField("precision"):
        doc["precision"] = msg.precision
    if msg.HasField("workers"):
        doc["workers"] = msg.workers
    if msg.HasField("moe_tp"):
        doc["moe_tp"] = msg.moe_tp
    return doc


def _deployment_to(e: Mapping[str, Any], out: pb.ServingDeployment) -> None:
    out.serving, out.label, out.devices = e["serving"], e["label"], int(e["devices"])
    if e["serving"] == "aggregated":
        _plan_to(e["plan"], out.plan)
    else:
        _plan_to(e["prefill"], out.prefill)
        _plan_to(e["decode"], out.decode)
    for k in _FIGURES:
        setattr(out, k, float(e[k]))
    energy = e.get("energy_j_per_token")
    if energy is not None and not math.isnan(energy):
        out.energy_j_per_token = float(energy)
    role = _ROLE_FIGURE[e["serving"]]
    if role in e:
        setattr(out, role, float(e[role]))
    if "usd_per_million_output_tokens" in e:  # priced (``estimate.cost.deployment_cost``)
        out.has_cost = True
        for k in _COST:
            if e.get(k) is not None:
                setattr(out, k, e[k])


def _plan_key(plan: Mapping[str, Any]) -> str:
    return Point.from_dict({k: v for k, v in plan.items() if k != "workers"}).key


def _deployment_key(doc: Mapping[str, Any]) -> str:
    """The key ``plena-opt export`` takes (``search.serving.serving_points``'s form)."""
    if doc["serving"] == "aggregated":
        return _plan_key(doc["plan"])
    p, d = doc["prefill"], doc["decode"]
    return f"{p.get('workers', 1)}P:{_plan_key(p)}+{d.get('workers', 1)}D:{_plan_key(d)}"


def _deployment_from(msg: pb.ServingDeployment) -> dict[str, Any]:
    doc: dict[str, Any] = {"serving": msg.serving, "label": msg.label}
    if msg.serving == "aggregated":
        doc["plan"] = _plan_from(msg.plan)
    else:
        doc["prefill"], doc["decode"] = _plan_from(msg.prefill), _plan_from(msg.decode)
    doc["key"] = _deployment_key(doc)  # derived from the plans, so not sent
    doc["devices"] = msg.devices
    role = _ROLE_FIGURE[msg.serving]
    if msg.HasField(role):
        doc[role] = getattr(msg, role)
    doc.update({k: getattr(msg, k) for k in _FIGURES})
    energy = _opt(msg, "energy_j_per_token")
    doc["energy_j_per_token"] = math.nan if energy is None else energy
    if msg.has_cost:
        doc.update({k: _opt(msg, k) for k in _COST})
        doc["usd_per_million_input_tokens"] = None  # a deployment's is inside the output figure
    return doc


def _mode_to(m: Mapping[str, Any], out: pb.ServingModeFront) -> None:
    out.SetInParent()
    for e in m["front"]:
        _deployment_to(e, out.front.add())
    if "evaluated" in m:  # the "both" front carries its deployments only
        out.evaluated, out.feasible = int(m["evaluated"]), int(m["feasible"])
        out.hypervolume = float(m["hypervolume"])
        if m.get("goodput_tps_per_device") is not None:
            out.goodput_tps_per_device = float(m["goodput_tps_per_device"])
            out.goodput_plan = m["goodput_plan"]
        if m.get("empty_reason"):
            out.empty_reason = m["empty_reason"]


def _mode_from(msg: pb.ServingModeFront, counts: bool = True) -> dict[str, Any]:
    doc: dict[str, Any] = {"front": [_deployment_from(e) for e in msg.front]}
    if counts:
        doc.update(evaluated=msg.evaluated, feasible=msg.feasible, hypervolume=msg.hypervolume)
        g = _opt(msg, "goodput_tps_per_device")
        doc["goodput_tps_per_device"] = g
        doc["goodput_plan"] = None if g is None else msg.goodput_plan
        if msg.HasField("empty_reason"):
            doc["empty_reason"] = msg.empty_reason
    return doc


def comparison_to_proto(doc: Mapping[str, Any], out: pb.ServingComparison) -> None:
    """Fill ``out`` from a ``compare_serving`` / ``serving_comparison`` document."""
    out.SetInParent()
    out.objectives.extend(doc["objectives"])
    _sla_to(doc["sla"], out.sla)
    out.sampler = doc["sampler"]
    out.batch_sizes.extend(int(b) for b in doc.get("batch_sizes", []))
    for mode in ("aggregated", "disaggregated", "both"):
        if mode in doc:
            _mode_to(doc[mode], getattr(out, mode))
    if "verdict" in doc:
        out.verdict = doc["verdict"]
    out.elapsed_seconds = float(doc["elapsed_seconds"])
    if "study" in doc:
        out.study_name = doc["study"]
    out.partial = bool(doc.get("partial", False))
    out.stop_reason = doc.get("stop_reason", "")


def comparison_from_proto(msg: pb.ServingComparison) -> dict[str, Any]:
    """The document ``comparison_to_proto`` was given."""
    doc: dict[str, Any] = {
        "objectives": list(msg.objectives),
        "sla": _sla_from(msg.sla),
        "sampler": msg.sampler,
        "figures_basis": BASIS_UNDER_LOAD,  # a constant: what the comparison's figures are
    }
    for mode in ("aggregated", "disaggregated"):
        if msg.HasField(mode):
            doc[mode] = _mode_from(getattr(msg, mode))
    if msg.HasField("both"):
        doc["both"] = _mode_from(msg.both, counts=False)
    if msg.HasField("verdict"):
        doc["verdict"] = msg.verdict
    if msg.partial:
        doc["partial"], doc["stop_reason"] = True, msg.stop_reason
    doc["elapsed_seconds"] = msg.elapsed_seconds
    if msg.batch_sizes:
        doc["batch_sizes"] = list(msg.batch_sizes)
    if msg.HasField("study_name"):
        doc["study"] = msg.study_name
    return doc


def _verdict_to(v: Mapping[str, Any], out: pb.SlaVerdict) -> None:
    out.label, out.percentile = v["label"], v["percentile"]
    out.ttft_seconds, out.tpot_seconds = float(v["ttft_seconds"]), float(v["tpot_seconds"])
    if v.get("tps_per_device") is not None:
        out.tps_per_device = float(v["tps_per_device"])
    out.meets_sla = bool(v["meets_sla"])


def _verdict_from(msg: pb.SlaVerdict) -> dict[str, Any]:
    return {
        "label": msg.label,
        "percentile": msg.percentile,
        "ttft_seconds": msg.ttft_seconds,
        "tpot_seconds": msg.tpot_seconds,
        "tps_per_device": _opt(msg, "tps_per_device"),
        "meets_sla": msg.meets_sla,
    }


def decisions_to_proto(doc: Mapping[str, Any], out: pb.ServingDecisions) -> None:
    """Fill ``out`` from ``SearchResult.serving`` (``api.decide_serving``); an empty document
    leaves it unset."""
    if not doc:
        return
    out.SetInParent()
    if "sla" in doc:  # goodput was judged (an SLA or a percentile was asked)
        _sla_to(doc["sla"], out.sla)
        out.percentile = doc["percentile"]
        if doc.get("goodput_tps_per_device") is not None:
            out.goodput_tps_per_device = float(doc["goodput_tps_per_device"])
            out.goodput_plan = doc["goodput_plan"]
        if doc.get("goodput_at_percentile") is not None:
            out.goodput_at_percentile_tps_per_device = float(doc["goodput_at_percentile"])
            out.goodput_at_percentile_plan = doc["goodput_at_percentile_plan"]
        for v in doc.get("verdicts", []):
            _verdict_to(v, out.verdicts.add())
    if "comparison" in doc:
        comparison_to_proto(doc["comparison"], out.comparison)


def decisions_from_proto(msg: pb.ServingDecisions) -> dict[str, Any]:
    """The document ``decisions_to_proto`` was given ({} when ``msg`` is unset)."""
    doc: dict[str, Any] = {}
    if msg.HasField("sla"):
        doc["percentile"] = msg.percentile
        doc["sla"] = _sla_from(msg.sla)
        g = _opt(msg, "goodput_tps_per_device")
        doc["goodput_tps_per_device"] = g
        doc["goodput_plan"] = None if g is None else msg.goodput_plan
        doc["goodput_basis"] = BASIS_STATIC
        if msg.verdicts:
            gp = _opt(msg, "goodput_at_percentile_tps_per_device")
            doc["goodput_at_percentile"] = gp
            doc["goodput_at_percentile_plan"] = (
                None if gp is None else msg.goodput_at_percentile_plan
            )
            doc["verdicts"] = [_verdict_from(v) for v in msg.verdicts]
            doc["goodput_at_percentile_basis"] = PERCENTILE_BASIS
    if msg.HasField("comparison"):
        doc["comparison"] = comparison_from_proto(msg.comparison)
    return doc


_REC_FIELDS = pb.Recommendation.DESCRIPTOR.fields_by_name


def recommendation_to_proto(rec: Any, out: pb.Recommendation, front: Sequence[Any] = ()) -> None:
    """Fill ``out`` from a ``plena_opt.api.recommendation.Recommendation``; an aggregated pick
    takes the interval fields (``plena_opt.metrics``) of its plan in ``front``."""
    out.SetInParent()
    out.kind, out.key, out.label, out.basis = rec.kind, rec.key, rec.label, rec.basis
    out.reason, out.export_command = rec.reason, rec.export_command()
    if rec.decode_key is not None:
        out.decode_key = rec.decode_key
    for m in METRICS:  # the declared figures a recommendation carries (SI)
        if m.name in _REC_FIELDS and getattr(rec, m.name, None) is not None:
            setattr(out, m.name, float(getattr(rec, m.name)))
    for name in ("devices", "prefill_workers", "decode_workers"):
        if getattr(rec, name) is not None:
            setattr(out, name, int(getattr(rec, name)))
    plan = next((e for e in front if rec.decode_key is None and e.label == rec.label), None)
    for name in () if plan is None else (*interval_fields(), *INTERVAL_BASIS):
        if getattr(plan, name, None) is not None:
            setattr(out, name, getattr(plan, name))
