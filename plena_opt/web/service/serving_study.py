"""A serving comparison study (``<search study>-serving``, written by ``plena-opt search
--serving both|disaggregated``) for the studies tab: each stored deployment with its figures in SI
units, its pools, whether it meets the study's SLA, its mode's front, and the verdict.

The stored params name the pools' tp/ep/dp/pp/cp, batch, workers and precision but not the MoE
TP mode or comm overlap; those are read from the pool's label, which ``Plan.label`` writes
(``keep`` when the MoE TP mode is keep, ``overlap`` when comm overlap is full).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from plena_opt.errors import PlenaInputError

OWNER_ATTR = "serving_comparison_of"  # = plena_opt.search.serving.serving_store.OWNER_ATTR
DIMS = ("tp", "ep", "dp", "pp", "cp")
_PAIR = re.compile(r"^(\d+)P\[(.*)\] (\d+)D\[(.*)\]$")


#: The study problem's fields the serving form shows (built-in profile names and the workload).
FORM_FIELDS = ("model", "noc", "memory", "batch_size", "input_seq", "output_seq")


def not_in_form(problem: dict[str, Any] | None) -> list[str]:
    """Fields of a study's problem that the serving form cannot show: a profile given as a file
    or missing, and every other field that differs from ``ProblemSpec``'s default (a GPU chip,
    a precision, a device count…). Opening such a plan would simulate another problem."""
    from plena_opt.api import ProblemSpec, chip_carries_memory

    if not problem:
        return ["problem"]
    defaults = ProblemSpec().identity()
    bad = []
    for key, value in problem.items():
        if key == "memory" and value is None and chip_carries_memory(problem.get("chip")):
            continue  # a GPU chip's own HBM: follows from the chip (named below)
        if key in ("model", "noc", "memory"):
            if (
                not isinstance(value, str)
                or "/" in value
                or "\\" in value
                or value.endswith(".json")
            ):
                bad.append(key)
        elif key not in FORM_FIELDS and (key not in defaults or value != defaults[key]):
            bad.append(key)
    return bad


def is_serving_study(user_attrs: dict[str, Any]) -> bool:
    """Whether a study's user attributes are those of a serving comparison."""
    return OWNER_ATTR in user_attrs


def _pool(params: dict[str, Any], prefix: str, role: str, label: str) -> dict[str, Any]:
    words = label.split()
    pool: dict[str, Any] = {"role": role, "label": label}
    for d in DIMS:
        pool[d] = int(params.get(prefix + d, 1))
    pool["moe_tp_mode"] = "keep" if "keep" in words else "replace"
    pool["moe_tp"] = int(params.get(prefix + "moe_tp", 0))  # an explicit MoE split, else 0
    pool["comm_overlap"] = "full" if "overlap" in words else "none"
    pool["batch_size"] = int(params[prefix + "batch_size"])
    pool["workers"] = int(params.get(prefix + "workers", 1))
    pool["precision"] = params.get(prefix + "precision")
    pool["devices_per_worker"] = pool["tp"] * pool["ep"] * pool["dp"] * pool["pp"] * pool["cp"]
    return pool


def pools_of(params: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """The pools of a stored deployment: one ``aggregated`` pool, or ``prefill`` and ``decode``."""
    if params.get("serving") == "aggregated":
        return [_pool(params, "", "aggregated", label)]
    m = _PAIR.match(label)
    pre, dec = (m.group(2), m.group(4)) if m else ("", "")
    return [_pool(params, "prefill_", "prefill", pre), _pool(params, "decode_", "decode", dec)]


def problem_flags(problem: dict[str, Any] | None) -> list[str]:
    """``plena-opt simulate`` flags of a study problem's fields that differ from the defaults
    (``--noc`` always; no batch size or device count: those are the pool's)."""
    from plena_opt.api import ProblemSpec

    defaults = ProblemSpec().identity()
    out: list[str] = []
    for key, value in (problem or {}).items():
        if key in ("batch_size", "devices") or value is None:
            continue
        if value == defaults.get(key) and key != "noc":
            continue
        flag = "--" + key.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def pool_command(problem: dict[str, Any] | None, pool: dict[str, Any]) -> str:
    """The ``plena-opt simulate`` command of one worker of ``pool`` on its share of the NoC."""
    argv = ["plena-opt", "simulate", *problem_flags(problem)]
    argv += ["--devices", str(pool["devices_per_worker"])]
    for d in DIMS:
        argv += [f"--{d}", str(pool[d])]
    argv += ["--moe-tp-mode", pool["moe_tp_mode"], "--comm-overlap", pool["comm_overlap"]]
    argv += ["--moe-tp", str(pool["moe_tp"])] if pool.get("moe_tp") else []
    argv += ["--batch-size", str(pool["batch_size"])]
    if pool["precision"]:
        argv += ["--precision", str(pool["precision"])]
    return shlex.join(argv)


def _meets(constraints: dict[str, Any]) -> bool:
    return all(float(v) <= 0 for v in constraints.values())


def _mode_fronts(rows: list[dict[str, Any]], values: dict[int, list[float]], signs: list[float]):
    """Mark ``on_front``: the Pareto front of each mode's SLA-meeting deployments."""
    import numpy as np

    from plena_opt.api.studies import pareto_mask

    for mode in ("aggregated", "disaggregated"):
        ok = [r for r in rows if r["serving"] == mode and r["meets_sla"]]
        if not ok:
            continue
        pts = np.array([values[r["number"]] for r in ok]) * np.array(signs)
        for r, keep in zip(ok, pareto_mask(pts), strict=True):
            r["on_front"] = bool(keep)


def _modes(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per mode: counts and goodput (best tokens/s/device meeting the SLA); the winner."""
    out = []
    for mode in ("aggregated", "disaggregated"):
        mine = [r for r in rows if r["serving"] == mode]
        if not mine:
            continue
        ok = [r for r in mine if r["meets_sla"]]
        best = max(ok, key=lambda r: r["tps_per_device"], default=None)
        out.append(
            {
                "mode": mode,
                "n_trials": len(mine),
                "n_meeting_sla": len(ok),
                "goodput_tps_per_device": None if best is None else best["tps_per_device"],
                "goodput_label": None if best is None else best["label"],
            }
        )
    good = {m["mode"]: m["goodput_tps_per_device"] for m in out}
    win: dict[str, Any] = {"winner": None, "goodput_ratio": None}
    ga, gd = good.get("aggregated"), good.get("disaggregated")
    if ga is not None and gd is not None and ga != gd:
        win["winner"] = "disaggregated" if gd > ga else "aggregated"
        win["goodput_ratio"] = max(ga, gd) / min(ga, gd)
    elif (ga is None) != (gd is None) and len(out) == 2:
        win["winner"] = "aggregated" if gd is None else "disaggregated"
    return out, win


def _row(t: Any, problem: dict[str, Any] | None) -> dict[str, Any]:
    a = t.user_attrs
    label = str(a.get("label", ""))
    pools = pools_of(t.params, label)
    mode = str(t.params.get("serving", a.get("serving")))
    cons = {str(k): float(v) for k, v in (a.get("constraints") or {}).items()}
    agg = mode == "aggregated"
    plan = None
    if agg:
        p = pools[0]
        plan = {k: p[k] for k in (*DIMS, "moe_tp_mode", "moe_tp", "comm_overlap", "batch_size")}
        if p["precision"]:
            plan["precision"] = p["precision"]
    energy = a.get("energy_j_per_token")
    return {
        "number": t.number,
        "serving": mode,
        "label": label,
        "devices": int(a["devices"]),
        "ttft_seconds": float(a["ttft_seconds"]),
        "tpot_seconds": float(a["tpot_seconds"]),
        "tps_per_device": float(a["tps_per_device"]),
        "tps_per_user": float(a["tps_per_user"]),
        "energy_j_per_token": None if energy is None else float(energy),
        "kv_transfer_seconds": a.get("kv_transfer_seconds"),
        "constraints": cons,
        "meets_sla": _meets(cons),
        "on_front": False,
        "pools": pools,
        "plan": plan,
        "simulate_commands": [] if agg else [pool_command(problem, p) for p in pools],
    }


def serving_study(study: Any, owner: Any | None, max_trials: int) -> dict[str, Any]:
    """The ``ServingStudyOut`` document of serving comparison ``study`` (``owner``: the search
    study it compares, for the problem; None when it is gone)."""
    from optuna.trial import TrialState

    attrs = study.user_attrs
    if not is_serving_study(attrs):
        raise PlenaInputError("name", f"name: study {study.study_name!r} is no serving comparison")
    problem = owner.user_attrs.get("problem") if owner is not None else None
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))[:max_trials]
    rows = [_row(t, problem) for t in done]
    signs = [1.0 if d.name == "MINIMIZE" else -1.0 for d in study.directions]
    _mode_fronts(rows, {t.number: list(t.values) for t in done}, signs)
    modes, win = _modes(rows)
    bad = not_in_form(problem)
    if "precision" not in bad and any(r["plan"] and "precision" in r["plan"] for r in rows):
        bad.append("precision")
    sla = attrs.get("sla") or {}
    return {
        "name": study.study_name,
        "serving_comparison_of": str(attrs[OWNER_ATTR]),
        "metric_names": study.metric_names or [],
        "directions": [d.name.lower() for d in study.directions],
        "sla": {k: sla.get(k) for k in ("max_ttft_seconds", "max_tpot_seconds", "min_tps_per_seq")},
        "verdict": attrs.get("verdict"),
        **win,
        "modes": modes,
        "problem": problem,
        "not_in_form": bad,
        "trials": rows,
    }
