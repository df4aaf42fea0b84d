"""Aggregated and disaggregated serving fronts side by side, and which wins (``--serving``).

Both fronts use the same devices, SLA and objectives (``search.serving.disaggregated``);
hypervolumes are normalised over the union of both fronts so they compare; the winner is the mode
with the higher goodput (best tokens/s/device of a feasible plan meeting the SLA), by the ratio of
goodputs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from plena_opt.chip import DEFAULT_CHIP
from plena_opt.estimate.cost import deployment_cost, load_prices
from plena_opt.search.fronts.hypervolume import Normaliser
from plena_opt.search.serving.disaggregated import (
    FIGURES,
    Points,
    ServingSpace,
    check_objectives,
    feasible_front,
)
from plena_opt.search.serving.serving import BASIS_UNDER_LOAD

# What the static comparison's figures model (a comparison under load names its own model in
# ``doc["under_load"]["model"]``).
STATIC_MODEL_WORDS = "prefills interrupt decoding, pools rate-matched"
ROLE_FRONT_ABOVE = 256  # devices above which ``auto`` pairs only role-front workers
TIE_RTOL = 1e-9  # goodputs this close are a tie (rounding of equal throughputs, e.g. one rate)


def front_of(points: Points, objectives: Sequence[str]) -> np.ndarray:
    """Indices of the feasible Pareto front of ``points``."""
    return feasible_front(points, objectives)


def _entries(points: Points, idx: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for i in idx:
        doc = points.describe(int(i))
        doc.update({k: float(points.figures[k][i]) for k in FIGURES})
        out.append(doc)
    return sorted(out, key=lambda e: -e["tps_per_device"])


def compare_serving(
    space: ServingSpace, objectives: Sequence[str], mode: str, sampler: str = "auto"
) -> dict[str, Any]:
    """Fronts of ``mode`` (aggregated | disaggregated | both) as one JSON-ready document.

    When the space's stop token stops the work (``space.stop_reason``), the document holds the
    fronts of what was scored, ``partial: true`` and ``stop_reason``, and no verdict."""
    objectives = check_objectives(objectives)
    t0 = time.perf_counter()
    n = space.inputs.noc.num_devices
    if sampler == "auto":
        sampler = "role-front" if n > ROLE_FRONT_ABOVE else "exhaustive"
    sets: dict[str, Points] = {}
    if mode in ("aggregated", "both") and not space.stopped():
        sets["aggregated"] = space.aggregated_points()
    if mode in ("disaggregated", "both") and not space.stopped():
        sets["disaggregated"] = space.disaggregated_points(sampler, objectives)

    def why_empty(k: str, pts: Points) -> str:
        from plena_opt.search.serving.serving_empty import empty_reason

        return empty_reason(space, k, pts.evaluated)

    doc = compare_points(sets, objectives, space.sla, sampler, mode, why_empty,
                         space.stop_reason if space.stopped() else "")  # fmt: skip
    if sampler == "optuna" and "disaggregated" in sets:
        doc[SCORED_KEY] = scored_deployments(space, sets["disaggregated"])
    doc["elapsed_seconds"] = time.perf_counter() - t0
    return doc


def compare_points(
    sets: dict[str, Points],
    objectives: Sequence[str],
    sla: dict[str, Any],
    sampler: str,
    mode: str,
    why_empty: Callable[[str, Points], str],
    stop_reason: str = "",
) -> dict[str, Any]:
    """The comparison document of the scored deployments ``sets`` (mode → ``Points``): each
    mode's front, hypervolume (normalised over both fronts) and goodput; with ``mode`` "both"
    and no ``stop_reason``, the joint front and the verdict (``stop_reason``: partial, no
    verdict). ``why_empty(mode, points)`` says why a mode's front is empty."""
    fronts = {k: front_of(p, objectives) for k, p in sets.items()}
    doc: dict[str, Any] = {"objectives": list(objectives), "sla": sla, "sampler": sampler}
    doc["figures_basis"] = BASIS_UNDER_LOAD
    allpts = [sets[k].minimised(objectives)[fronts[k]] for k in sets if len(fronts[k])]
    norm = Normaliser.from_points(np.concatenate(allpts)) if allpts else None
    for k, pts in sets.items():
        idx = fronts[k]
        entries = _entries(pts, idx)
        hv = float(norm.hypervolume(pts.minimised(objectives)[idx])) if norm and len(idx) else 0.0
        doc[k] = {
            "front": entries,
            "evaluated": pts.evaluated,
            "feasible": pts.feasible_count,
            "hypervolume": hv,
            "goodput_tps_per_device": entries[0]["tps_per_device"] if entries else None,
            "goodput_plan": entries[0]["label"] if entries else None,
        }
        if not entries and not stop_reason:
            doc[k]["empty_reason"] = why_empty(k, pts)
    if stop_reason:
        doc["partial"], doc["stop_reason"] = True, stop_reason
    elif mode == "both":
        both = _merge(sets["aggregated"], sets["disaggregated"])
        idx = front_of(both, objectives)
        doc["both"] = {"front": _entries(both, idx)}
        doc["verdict"] = verdict(doc)
    return doc


SCORED_KEY = "_scored"  # the Optuna pair search's deployments, popped before any output


def scored_deployments(space: ServingSpace, pts: Points) -> list[dict[str, Any]]:
    """Every deployment the Optuna pair search scored, with its sampler params and whether
    this run scored it (``new``), for ``serving_store``."""
    out = []
    for i, (prm, new) in enumerate(zip(space.optuna.params, space.optuna.new, strict=True)):
        e = pts.describe(i)
        e.update({k: float(pts.figures[k][i]) for k in FIGURES})
        e.update(sampler_params=prm, new=new)
        out.append(e)
    return out


def serving_fingerprint(request: Any) -> dict[str, Any]:
    """What an Optuna pair search searched: a stored study resumes only the same search."""
    from plena_opt.search.serving.serving import sla_dict

    return {
        "serving": request.serving,
        "sampler": "optuna",
        "objectives": list(request.objectives),
        "sla": sla_dict(request),
        "batch_sizes": request.batch_sizes,
        "auto_batch": request.auto_batch,
        "memory_fraction": request.memory_fraction,
        "precisions": request.precisions,
        "seed": request.seed,
    }


def _merge(a: Points, b: Points) -> Points:
    figs = {k: np.concatenate([a.figures[k], b.figures[k]]) for k in a.figures}
    na = len(a)
    return Points(
        figs,
        np.concatenate([a.feasible, b.feasible]),
        lambda i: a.describe(i) if i < na else b.describe(i - na),
        a.evaluated + b.evaluated,
    )


def verdict(doc: dict[str, Any]) -> str:
    """Which mode wins on goodput, and by how much."""
    ga = doc["aggregated"]["goodput_tps_per_device"]
    gd = doc["disaggregated"]["goodput_tps_per_device"]
    if ga is None and gd is None:
        return "neither mode has a plan meeting the SLA"
    if ga is None or gd is None:
        who = "disaggregated" if ga is None else "aggregated"
        return f"{who} wins: only it has plans meeting the SLA"
    if math.isclose(ga, gd, rel_tol=TIE_RTOL):
        return f"tie: goodput {ga:.2f} tokens/s/device in both modes"
    if gd > ga:
        return f"disaggregated wins: goodput {gd:.2f} vs {ga:.2f} tokens/s/device (x{gd / ga:.2f})"
    if ga > gd:
        return f"aggregated wins: goodput {ga:.2f} vs {gd:.2f} tokens/s/device (x{ga / gd:.2f})"
    return f"tie: goodput {ga:.2f} tokens/s/device in both modes"


def render_comparison(doc: dict[str, Any], limit: int = 10) -> str:
    """Text: each mode's front (best goodput first) and the verdict."""
    basis = doc.get("figures_basis", BASIS_UNDER_LOAD)
    how = (doc.get("under_load") or {}).get("model", STATIC_MODEL_WORDS)
    lines = [
        f"serving fronts ({basis}: {how}; objectives "
        f"{', '.join(doc['objectives'])}; sampler {doc['sampler']})"
    ]
    for mode in ("aggregated", "disaggregated"):
        if mode not in doc:
            continue
        m = doc[mode]
        lines.append(
            f"{mode}: {len(m['front'])} front plans of {m['feasible']} feasible "
            f"({m['evaluated']} scored), hypervolume {m['hypervolume']:.4f}"
        )
        if m.get("empty_reason"):
            lines.append(f"  warning: no {mode} deployment: {m['empty_reason']}")
            continue
        lines.append(
            f"  {'deployment':<52}{'devices':>8}{'TTFT ms':>10}{'TPOT ms':>10}{'tok/s/dev':>11}"
            "  key (plena-opt export KEY)"
        )
        for e in m["front"][:limit]:
            lines.append(
                f"  {e['label'][:52]:<52}{e['devices']:>8}{e['ttft_seconds'] * 1e3:>10.1f}"
                f"{e['tpot_seconds'] * 1e3:>10.2f}{e['tps_per_device']:>11.2f}  {e['key']}"
            )
        if len(m["front"]) > limit:
            lines.append(f"  ... {len(m['front']) - limit} more (--json for all)")
    lines += [f"warning: {w}" for w in doc.get("warnings", [])]
    if doc.get("partial"):
        lines.append(
            f"comparison stopped ({doc['stop_reason']}): the fronts of the deployments scored "
            "so far, no verdict; not stored"
        )
    if "verdict" in doc:
        lines.append(doc["verdict"])
    if "study" in doc:
        lines.append(f"fronts stored as study {doc['study']} (plena-opt dashboard shows them)")
    return "\n".join(lines)


def serving_comparison(
    request: Any,
    sampler: str | None = None,
    inputs: Any = None,
    stop: Any = None,
    resume: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The ``--serving`` comparison of a ``SearchRequest``: its problem, batches (``auto``
    resolved as the search does), SLA and searched formats (``precisions``: both pools of a
    deployment in one format); objectives TTFT, tokens/s/device, tokens/s/user, plus
    energy when asked and the cluster and memory report it; ``sampler`` (None: the request's
    ``serving_sampler``); ``optuna`` scores deployments until ``request.trials`` are scored in all,
    the stored ones ``resume`` names included (``serving_store.resume_params``). ``stop`` (a
    ``StopToken``) is polled per worker priced and per chunk of pairs or trial (a partial
    document)."""
    from plena_opt.search.serving.serving import CapacityCache, sla_dict

    inputs = inputs if inputs is not None else request.problem.load()
    cache = CapacityCache(request)
    batches = cache.batches(request, inputs.evaluator)
    fraction = cache.fraction if cache.judges_memory else None
    space = ServingSpace.build(
        inputs,
        batches,
        sla_dict(request),
        memory_fraction=fraction,
        precisions=request.precisions,
        stop=stop,
    )
    space.budget, space.seed, space.resume = request.trials, request.seed or 0, list(resume)
    objectives = ["ttft", "tps-per-device", "tps-per-user"]
    if "energy" in request.objectives and not space.stopped():
        agg = space.aggregated_points()
        if len(agg) and not np.isnan(agg.figures["energy_j_per_token"]).any():
            objectives.append("energy")
    sampler = sampler or request.serving_sampler
    doc = compare_serving(space, objectives, request.serving, sampler)
    doc["batch_sizes"] = batches
    add_costs(doc, getattr(inputs.chip, "name", DEFAULT_CHIP), getattr(request, "prices", None))
    return doc


def add_costs(doc: dict[str, Any], chip: str, prices_path: str | None) -> None:
    """Each front deployment's cost and power fields (``estimate.cost.deployment_cost``)."""
    prices = load_prices(prices_path)
    for mode in ("aggregated", "disaggregated", "both"):
        for e in (doc.get(mode) or {}).get("front", []):
            cost = deployment_cost(e["tps_per_device"], e.get("energy_j_per_token"), chip, prices)
            e.update(cost.to_dict())
