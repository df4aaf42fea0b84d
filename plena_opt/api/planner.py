"""Use case: the planner page of ``plena-opt ui`` — a search stated as form fields.

``planner_search(fields)`` builds the ``SearchRequest`` the same fields would make as
``plena-opt search`` flags (same validators, same ``--flag: rule`` messages, field-named errors)
and loads its problem; ``PlannerSearch.command`` is the CLI command that reproduces it.
``run_planner`` runs it (``search_plans``, then ``decide_serving`` and ``recommend``) with a
progress callback and a ``StopToken``; ``front_points`` gives the points the page plots: tokens/s
per GPU against tokens/s per user, the serving fronts (aggregated, disaggregated; figures under
load) when the search compared them, else the search front (static model; under a
``percentile``'s workload, the under-load figures at that percentile), and infeasible scored
plans with the constraints they break. Times in ms, rates in tokens/s.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from plena_opt.api.planner_figures import entry_figures, serving_figures
from plena_opt.api.planner_inputs import input_error
from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.api.recommendation import Recommendation
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.result import SearchResult
    from plena_opt.stop import StopToken

#: Infeasible scored plans sent for the plot (the rest are counted only).
MAX_INFEASIBLE_POINTS = 400
#: The file name the reproducing command gives an uploaded config.json.
UPLOADED_CONFIG = "config.json"

# planner field -> the ``plena-opt search`` flag it mirrors (the command and the messages)
FLAGS = {
    "model": "--model",
    "chip": "--chip",
    "noc": "--noc",
    "devices": "--devices",
    "input_seq": "--input-seq",
    "output_seq": "--output-seq",
    "batch_sizes": "--batch-sizes",
    "precision": "--precision",
    "moe_kernel": "--moe-kernel",
    "objectives": "--objectives",
    "max_ttft_ms": "--max-ttft-ms",
    "max_tpot_ms": "--max-tpot-ms",
    "serving": "--serving",
    "sampler": "--sampler",
    "trials": "--trials",
    "seed": "--seed",
    "routing": "--routing",
    "kv_precision": "--kv-precision",
    "eplb_redundant": "--eplb-redundant",
    "include_lm_head": "--include-lm-head",
    "overlap": "--overlap",
    "frequency_hz": "--frequency-hz",
}
# the flags of a search under load (a ``percentile`` given; else they price only the plan view)
LOAD_FLAGS = {
    "concurrency": "--concurrency",
    "request_rate": "--request-rate",
    "engine": "--engine",
    "percentile": "--percentile",
    "memory_fraction": "--memory-fraction",
    "engine_version": "--engine-version",
    "range_ratio": "--range-ratio",
}


@dataclass(frozen=True)
class PlannerSearch:
    """A validated planner search: the request, its loaded problem, the reproducing command."""

    request: SearchRequest
    problem: EvaluatorInputs
    command: str
    fields: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # what the page says about the search (under load: aggregated only)
    extras: Any = None  # the plan view's LoadExtras (engine version, range ratio, speculative)


def _batches(text: str | None) -> tuple[list[int] | None, bool]:
    """``--batch-sizes`` text → (sizes, auto)."""
    if text is None or not text.strip():
        return None, False
    if text.strip() == "auto":
        return None, True
    from plena_opt.api.limits import MAX_BATCH, MAX_BATCH_SIZES
    from plena_opt.bounds import check_count

    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise PlenaInputError(
            "batch_sizes", f"--batch-sizes must be a comma list of integers, got {text[:64]!r}"
        ) from None
    check_count(len(sizes), "batch_sizes", "--batch-sizes (count)", 1, MAX_BATCH_SIZES)
    for b in sizes:
        check_count(b, "batch_sizes", "--batch-sizes", 1, MAX_BATCH)
    return sizes, False


def planner_search(fields: Mapping[str, Any]) -> PlannerSearch:
    """The search the planner fields state, validated as ``plena-opt search`` validates its
    flags; bad input raises ``PlenaInputError`` naming the field."""
    from plena_opt.api.planner_inputs import load_extras, planner_spec
    from plena_opt.search.request import MEMORY_STORAGE, SearchRequest

    spec = planner_spec(fields)
    _check_load(fields.get("engine"), fields.get("concurrency"), fields.get("request_rate"),
                fields.get("memory_fraction"))  # fmt: skip
    extras = load_extras(fields)
    load, serving, note = _search_load(fields)
    sizes, auto = _batches(fields.get("batch_sizes"))
    try:
        request = SearchRequest(
            problem=spec,
            batch_sizes=sizes,
            auto_batch=auto,
            objectives=list(fields.get("objectives") or ["ttft", "tps"]),
            max_ttft_ms=fields.get("max_ttft_ms"),
            max_tpot_ms=fields.get("max_tpot_ms"),
            sampler=fields.get("sampler") or "auto",
            trials=fields.get("trials", 200),
            seed=fields.get("seed"),
            serving=serving,
            storage=MEMORY_STORAGE,  # the page keeps its studies in memory
            **load,
        )
    except ValidationError as exc:
        raise input_error(exc) from exc
    try:
        problem = spec.load()
    except PlenaInputError as exc:  # the --model-path reader names its flag; the page's field
        if exc.field == "model_path" and fields.get("model_dir") is not None:
            raise PlenaInputError("model_dir", str(exc)) from None
        raise
    if spec.routing not in ("balanced", "random"):  # a trace not shipped: 422 before the job
        problem.evaluator()
    if request.under_load or extras.engine_version or extras.range_ratio or extras.speculation:
        from plena_opt.api.under_load import check_target_engine

        # a PLENA chip, no NoC, a version not modelled: refused before the job starts
        check_target_engine(problem, fields.get("engine") or "vllm", extras.engine_version)
    shown = {**fields, "serving": serving}
    return PlannerSearch(request, problem, search_command(shown), dict(fields), note, extras)


def _search_load(f: Mapping[str, Any]) -> tuple[dict[str, Any], str, str | None]:
    """(the ``SearchRequest`` under-load fields, its serving mode, the page's note). A
    ``percentile`` asks for the search under load (the ``concurrency`` or ``request_rate``
    workload, ``engine``'s scheduler; SLAs and objectives at that percentile); without one the
    workload prices only the plan view, as before. Under load the ``serving`` comparison is
    priced under the same workload (``api.serving_loaded``), as the CLI's."""
    serving = f.get("serving") or "aggregated"
    pct = f.get("percentile")
    if pct is None:
        return {}, serving, None
    if pct not in ("p50", "p90", "p99"):
        raise PlenaInputError(
            "percentile",
            f"--percentile: invalid choice {str(pct)[:64]!r} (choose from p50, p90, p99)",
        )
    conc, rate = f.get("concurrency"), f.get("request_rate")
    if conc is None and rate is None:
        raise PlenaInputError(
            "percentile",
            f"--percentile {pct} judges the SLA under load on this page (it runs no Monte Carlo "
            "re-check): give --concurrency or --request-rate",
        )
    engine = f.get("engine") or "vllm"
    note = f"searched {load_words(conc, rate, engine, pct)}" + (
        ": aggregated plans only" if serving == "aggregated"
        else "; the serving comparison priced under the same load")  # fmt: skip
    load = {"concurrency": conc, "request_rate": rate, "engine": engine, "percentile": pct,
            "memory_fraction": f.get("memory_fraction"), "engine_version": f.get("engine_version"),
            "range_ratio": f.get("range_ratio") or 0.0}  # fmt: skip
    return load, serving, note


def _check_load(engine: str | None, concurrency: int | None, rate: float | None = None,
                fraction: float | None = None) -> None:  # fmt: skip
    """The workload the plan view prices under load (``concurrency`` clients or ``rate``
    requests/s, not both; the KV pool at ``fraction``), checked as ``estimate`` checks it."""
    from plena_opt.api.running_cap import check_memory_fraction
    from plena_opt.api.under_load import check_load
    from plena_opt.serving.engines import ENGINES

    check_memory_fraction(fraction)
    if engine is not None and engine not in ENGINES:
        raise PlenaInputError(
            "engine", f"--engine: invalid choice {engine[:64]!r} (choose from {', '.join(ENGINES)})"
        )
    if concurrency is not None or rate is not None:
        check_load(concurrency, rate)


def search_command(f: Mapping[str, Any]) -> str:
    """The ``plena-opt search`` command that runs the same search (an uploaded config as
    ``--model-path config.json``, a model directory as ``--model-path DIR``, an uploaded NoC
    profile as ``--noc noc.json``)."""
    from plena_opt.api.planner_inputs import UPLOADED_NOC

    argv = ["plena-opt", "search"]
    if f.get("model_document") is not None:
        argv += ["--model-path", UPLOADED_CONFIG]
    elif f.get("model_dir") is not None:
        argv += ["--model-path", str(f["model_dir"])]
    custom = {"model": f.get("model_document") is not None or f.get("model_dir") is not None}
    custom["noc"] = f.get("noc_document") is not None
    if custom["noc"]:
        argv += ["--noc", UPLOADED_NOC]
    flags = {**FLAGS, **(LOAD_FLAGS if f.get("percentile") is not None else {})}
    if f.get("engine") not in (None, "", "vllm"):  # without a load: a static search on its kernels
        flags["engine"] = "--engine"
    for name, flag in flags.items():
        value = f.get(name)
        if value in (None, "", []) or custom.get(name):
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        argv += [flag] if value is True else [] if value is False else [flag, str(value)]
    return shlex.join(argv)


@dataclass
class PlannerResult:
    """A finished (or stopped) planner search: the result, its one recommendation and the
    points to plot (``front_points``)."""

    result: SearchResult
    recommendation: Recommendation | None
    points: list[dict[str, Any]]


def run_planner(
    ps: PlannerSearch,
    stop: StopToken,
    progress: Callable[[Any], None] | None = None,
) -> PlannerResult:
    """Run the search, then (unless stopped) the serving comparison; then the recommendation
    (of a stopped search: from the front it found)."""
    from plena_opt.api.planner_intervals import annotate_planner
    from plena_opt.api.recommendation import recommend
    from plena_opt.api.searches import search_plans
    from plena_opt.api.serving import decide_serving

    result = search_plans(ps.request, ps.problem, progress=progress, should_stop=stop.is_set)
    rec = None
    if not stop.is_set():  # a cancelled search is answered from the front it has
        decide_serving(result, [], ps.request, ps.problem, stop=stop)
    if result.front or result.serving:
        rec = recommend(result, ps.request)
    annotate_planner(result, ps.request, ps.problem)  # error bars and robust marks
    return PlannerResult(result, rec, front_points(result))


def _serving_point(e: dict[str, Any], basis: str) -> dict[str, Any]:
    return {
        "key": e["key"],
        "label": e["label"],
        "mode": e["serving"],
        "basis": basis,
        "tps_per_gpu": e["tps_per_device"],
        "tps_per_user": e["tps_per_user"],
        "ttft_ms": e["ttft_seconds"] * 1e3,
        "tpot_ms": e["tpot_seconds"] * 1e3,
        "devices": e["devices"],
        "usd_per_mtok": e.get("usd_per_million_output_tokens"),
        "feasible": True,
        "reason": None,
        "figures": serving_figures(e),
    }


def _entry_point(e: Any, basis: str) -> dict[str, Any]:
    broken = [k for k, v in e.constraints.items() if v > 0]
    devices = math.prod(int(e.plan.get(k, 1)) for k in ("tp", "ep", "dp", "pp", "cp"))
    return {
        "key": e.key,
        "label": e.label,
        "mode": "aggregated" if e.feasible else "infeasible",
        "basis": basis,
        "tps_per_gpu": e.tps_per_device if e.tps_per_device is not None else e.tps / devices,
        "tps_per_user": e.tps_per_sequence,
        "ttft_ms": e.ttft_ms,
        "tpot_ms": e.tpot_ms,
        "devices": devices,
        "usd_per_mtok": e.usd_per_million_output_tokens,
        "feasible": e.feasible,
        "reason": ("breaks " + ", ".join(broken)) if broken else None,
        "figures": entry_figures(e, e.tps / devices),
    }


def front_points(result: SearchResult) -> list[dict[str, Any]]:
    """What the page plots: front points (``feasible``; ``mode`` aggregated or disaggregated)
    then at most :data:`MAX_INFEASIBLE_POINTS` infeasible scored plans (``reason``)."""
    from plena_opt.api.planner_intervals import point_intervals

    cmp = (result.serving or {}).get("comparison")
    if cmp:
        basis = str(cmp.get("figures_basis", "model, under load"))
        note = {"interval_note": "no interval: a serving comparison's deployments are not bounded"}
        pts = [
            {**_serving_point(e, basis), **note}
            for mode in ("aggregated", "disaggregated")
            for e in (cmp.get(mode) or {}).get("front", [])
        ]
    else:
        pts = [{**_entry_point(e, basis_of(result)), **point_intervals(e)} for e in result.front]
    bad = [e for e in getattr(result, "scored", []) or [] if not e.feasible]
    pts += [_entry_point(e, basis_of(result)) for e in bad[:MAX_INFEASIBLE_POINTS]]
    return pts


def basis_of(result: SearchResult) -> str:
    """What a search front's figures are: the static batch, or (a search under load) the
    workload, engine and percentile they were priced at."""
    load = getattr(result, "under_load", None)
    if not load:
        return "model, static batch"
    rate = load.get("request_rate_per_s")
    return load_words(load.get("concurrency"), rate, load["engine"], load["percentile"])


def load_words(clients: int | None, rate: float | None, engine: str, pct: str) -> str:
    """``under load (16 clients, vllm, SLA at p90; steady state)``: a workload in words."""
    what = f"{clients} clients" if clients is not None else f"{rate:g} requests/s"
    return f"under load ({what}, {engine}, SLA at {pct}; steady state)"


def live_points(progress: Any, ps: PlannerSearch | None = None) -> list[dict[str, Any]]:
    """The front a running search (``ps``) has so far (``Progress.front``, at most
    ``search.progress.PROGRESS_FRONT_POINTS`` points), as the page plots it."""
    r = None if ps is None else ps.request
    basis = "model, static batch"
    if r is not None and r.under_load:
        basis = load_words(r.concurrency, r.request_rate, r.engine or "vllm", str(r.percentile))
    return [_entry_point(e, f"{basis} (search so far)") for e in progress.front]


def planner_catalog() -> dict[str, Any]:
    """The planner form's choices: catalog models, chips (``gpu`` true for GPU profiles), NoC
    profiles with their device counts, objectives, precisions, engines (and the version each is
    modelled at), MoE routing modes, speculative methods, overlap policies, serving modes,
    samplers, and the CLI's defaults."""
    from deepstack import list_noc_profiles, load_noc_profile

    from plena_opt.chip import list_chip_profiles
    from plena_opt.chip.precision import FORMATS
    from plena_opt.estimate.problem import names_gpu_chip
    from plena_opt.models import list_models
    from plena_opt.search.space.objectives import DEFAULT_OBJECTIVES, OBJECTIVES
    from plena_opt.serving.engines import ENGINES, VERSIONS
    from plena_opt.serving.speculative import METHODS
    from plena_opt.vocabulary import MOE_ROUTING_MODES, OVERLAP_POLICIES, Sampler, ServingMode

    return {
        "models": list_models(),
        "chips": [{"name": c, "gpu": bool(names_gpu_chip(c))} for c in list_chip_profiles()],
        "nocs": [
            {"name": n, "devices": load_noc_profile(n).num_devices} for n in list_noc_profiles()
        ],
        "objectives": list(OBJECTIVES),
        "default_objectives": list(DEFAULT_OBJECTIVES),
        "precisions": list(FORMATS),
        "engines": list(ENGINES),
        "engine_versions": {e: VERSIONS[e] for e in ENGINES},
        "routings": list(MOE_ROUTING_MODES),
        "speculative_methods": list(METHODS),
        "overlap_policies": list(OVERLAP_POLICIES),  # the first is the default
        "serving": [m.value for m in ServingMode],
        "samplers": [s.value for s in Sampler],
        "defaults": {"model": "llama-3.1-8b", "chip": "h200-sxm", "noc": "hgx-h200x8"},
    }
