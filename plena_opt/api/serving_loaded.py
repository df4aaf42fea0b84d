"""Use case: the aggregated vs disaggregated comparison of a search under load (issue 23,
``search --serving aggregated|disaggregated|both`` with ``--concurrency`` or ``--request-rate``).

Both modes serve the same workload on the same cluster: the ``C`` clients in all (or the same
Poisson ``λ``), ``engine``'s scheduler, the SLA judged at the request's percentile.

* **Aggregated**: every legal plan on all the cluster's devices (each searched format and batch
  size), priced as the aggregated search under load prices it (``api.search_load``: the engine's
  steady state, DP replicas splitting the clients, pipeline stages as batches in flight; TTFT and
  TPOT at the percentile from one pilot replay); memory as the search judges it. Plans the
  serving model does not express are listed as not priced with the reason.
* **Disaggregated**: prefill × decode worker plans × worker counts filling the cluster, priced by
  the disaggregated model under load (``api.serving_loaded_disagg``; TTFT includes the prefill
  queue).

Goodput = the best tokens/s/GPU of a deployment meeting the SLA; the verdict is the mode with the
higher goodput, by the ratio (``search.serving.serving_compare.verdict``). The document has the
static comparison's form (``compare_points``), labelled ``under load (engine E, concurrency C)``
(``figures_basis``), with ``under_load`` (workload, engine, percentile, what each mode models)
and ``warnings`` (plans and deployments not priced, with why). No wall-clock decision: the
stop token (deadline, cancel) only cuts it short (``partial``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.request import SearchRequest
    from plena_opt.stop import StopToken

SAMPLERS = ("auto", "exhaustive")  # the one way the comparison under load searches
OBJECTIVES = ["ttft", "tps-per-device", "tps-per-user"]  # energy stays a static-batch figure
MODEL_WORDS = (
    "aggregated = the engine's continuous batching (steady state, percentiles from a pilot "
    "replay); disaggregated = prefill queue over the pool + prefill + KV transfer + decode "
    "pool batch, filling the cluster"
)

RATE_TIE = (
    " (a Poisson rate fixes the tokens/s the cluster serves: every deployment that serves it "
    "has the same goodput; compare the fronts' TTFT and TPOT, or give --concurrency)"
)


def check_loaded_serving(request: SearchRequest) -> None:
    """Before a search under load runs: its comparison prices every deployment that fills the
    cluster, so a ``serving_sampler`` other than auto/exhaustive is refused naming the field."""
    from plena_opt.errors import PlenaInputError

    sampler = str(request.serving_sampler)
    if request.under_load and request.serving != "aggregated" and sampler not in SAMPLERS:
        raise PlenaInputError(
            "serving_sampler",
            f"--serving-sampler {sampler} is not used under load: the comparison under load "
            "prices every deployment that fills the cluster (auto or exhaustive)",
        )


def loaded_basis(load: dict[str, Any]) -> str:
    """``under load (engine vllm 0.34.0, concurrency 16, p50)``: what the figures are."""
    what = (f"concurrency {load['concurrency']}" if load.get("concurrency") is not None
            else f"Poisson {load['request_rate_per_s']:g} requests/s")  # fmt: skip
    version = f" {load['engine_version']}" if load.get("engine_version") else ""
    return f"under load (engine {load['engine']}{version}, {what}, {load['percentile']})"


def mark_loaded(cmp: dict[str, Any], load: dict[str, Any]) -> dict[str, Any]:
    """Label comparison ``cmp`` as priced under the search's workload ``load`` (a search
    result's ``under_load`` document); the remote CLI applies it to a server's comparison."""
    cmp["figures_basis"] = loaded_basis(load)
    cmp["under_load"] = {**dict(load), "model": MODEL_WORDS}
    return cmp


def _aggregated(request: SearchRequest, problem: EvaluatorInputs, stop: Any,
                skipped: Counter) -> Any:  # fmt: skip
    """Every legal plan of the cluster priced under load, as ``Points``."""
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.search.serving.serving_points import Points, sla_mask
    from plena_opt.search.space.space import Point

    factory = loaded_factory(problem.evaluator, problem, request)
    rows, docs = [], []
    for prec in request.precisions or [None]:
        for batch in request.batch_list():
            ev = factory(batch, prec)
            for plan in ev.legal_plans():
                if stop is not None and stop.is_set():
                    break
                m = ev.evaluate(plan)
                refused = m.under_load.get("refused")
                if refused:
                    skipped[refused] += 1
                    rows.append((math.nan,) * 3)
                    docs.append(None)
                    continue
                tpot = 1.0 / m.tps_per_sequence
                fits = m.fits_in_memory is not False
                tps = m.under_load["output_tps_per_gpu"] if fits else math.nan
                rows.append((m.ttft_seconds, tpot, tps))
                pt = Point(plan, batch, prec)
                u = m.under_load
                docs.append({
                    "serving": "aggregated", "label": pt.label(), "key": pt.key,
                    "plan": pt.to_dict(), "devices": plan.world_size,
                    "ttft_mean_seconds": u["ttft_mean_seconds"],
                    "tpot_mean_seconds": u["tpot_mean_seconds"],
                    "e2e_mean_seconds": u["e2e_mean_seconds"], "percentile": u["percentile"],
                })  # fmt: skip
    arr = np.array(rows, dtype=float).reshape(-1, 3)
    a = {"ttft_seconds": arr[:, 0], "tpot_seconds": arr[:, 1], "tps_per_device": arr[:, 2]}
    a["tps_per_user"] = 1.0 / a["tpot_seconds"]
    a["energy_j_per_token"] = np.full(len(arr), np.nan)
    with np.errstate(invalid="ignore"):
        feasible = np.isfinite(arr).all(axis=1) & sla_mask(a, _sla(request))
    return Points(a, feasible, lambda i: dict(docs[i]), len(docs))


def _sla(request: Any) -> dict[str, Any]:
    from plena_opt.search.serving.serving import sla_dict

    return sla_dict(request)


def _empty(mode: str, pts: Any, n: int, sla: dict[str, Any]) -> str:
    """Why a mode's front under load is empty."""
    from plena_opt.search.serving.serving import sla_text

    if mode == "disaggregated" and pts.evaluated == 0:
        return (
            f"no disaggregated deployment fills the {n} devices with workers that hold "
            "their requests and are priced under load (see the warnings)"
        )
    if not np.isfinite(pts.figures["tps_per_device"]).any():
        return (
            f"none of the {pts.evaluated} {mode} deployments serves the workload within "
            "its devices' memory, or the serving model prices none (see the warnings)"
        )
    return (
        f"none of the {pts.evaluated} {mode} deployments priced under load meets the SLA "
        f"({sla_text(sla)}); relax --max-ttft-ms / --max-tpot-ms / --min-tps-per-seq"
    )


def compare_under_load(
    request: SearchRequest, problem: EvaluatorInputs, stop: StopToken | None = None
) -> dict[str, Any]:
    """The ``--serving`` comparison of ``request`` under its workload (module docstring);
    a PLENA chip, a NoC-less problem or an unknown engine is refused naming the field."""
    from plena_opt.api.moe_kernel import engine_inputs
    from plena_opt.api.search_load import load_document
    from plena_opt.api.serving_loaded_disagg import LoadedDisaggSpace, loaded_disaggregated_points
    from plena_opt.api.under_load import check_target_engine
    from plena_opt.chip import DEFAULT_CHIP
    from plena_opt.estimate.capacity import DEFAULT_MEMORY_FRACTION
    from plena_opt.search.serving.serving_compare import add_costs, compare_points
    from plena_opt.serving import engine_model
    from plena_opt.serving.calibration import calibrated

    t0 = time.perf_counter()
    check_loaded_serving(request)
    engine = request.engine or "vllm"
    version = check_target_engine(problem, engine, request.engine_version)
    problem = engine_inputs(problem, engine)
    sla, mode, skipped = _sla(request), str(request.serving), Counter()
    sets: dict[str, Any] = {}
    if mode in ("aggregated", "both"):
        sets["aggregated"] = _aggregated(request, problem, stop, skipped)
    space = None
    if mode in ("disaggregated", "both") and not (stop is not None and stop.is_set()):
        hbm = float(problem.chip.hbm.capacity_bytes.value)  # type: ignore[union-attr]
        space = LoadedDisaggSpace(
            problem, calibrated(engine_model(engine, hbm), problem.chip.name),
            request.concurrency, request.request_rate, request.range_ratio,
            str(request.percentile), sla, request.memory_fraction or DEFAULT_MEMORY_FRACTION,
            stop,
        )  # fmt: skip
        sets["disaggregated"], _ = loaded_disaggregated_points(space, request.precisions or [None])
    stop_reason = ""
    if stop is not None and stop.is_set():
        stop_reason = stop.reason or "cancelled"
    n = problem.noc.num_devices  # type: ignore[union-attr]
    doc = compare_points(sets, OBJECTIVES, sla, "exhaustive", mode,
                         lambda k, pts: _empty(k, pts, n, sla), stop_reason)  # fmt: skip
    if request.request_rate is not None and doc.get("verdict", "").startswith("tie"):
        doc["verdict"] += RATE_TIE
    mark_loaded(doc, load_document(request, version))
    for m in ("aggregated", "disaggregated", "both"):  # energy: not priced under load
        for e in (doc.get(m) or {}).get("front", []):
            e["energy_j_per_token"] = None
    doc["warnings"] = _warnings(skipped, space)
    doc["batch_sizes"] = request.batch_list()
    add_costs(doc, getattr(problem.chip, "name", DEFAULT_CHIP), getattr(request, "prices", None))
    doc["elapsed_seconds"] = time.perf_counter() - t0
    return doc


def _warnings(skipped: Counter, space: Any) -> list[str]:
    out = [f"{k} aggregated plan(s) not priced: {why}" for why, k in sorted(skipped.items())]
    if space is not None:
        from plena_opt.api.serving_loaded_disagg import KV_SHORT

        out += [f"{k} disaggregated deployment(s) infeasible: {why}" if why == KV_SHORT else
                f"{k} disaggregated worker plan(s) or deployment(s) not priced: {why}"
                for why, k in sorted(space.not_priced.items())]  # fmt: skip
    return out
