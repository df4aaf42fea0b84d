"""The web UI's only door into the rest of plena-opt: simulations, estimates and the study store.

Everything the API needs from the product is called here and nowhere else in
:mod:`plena_opt.web`. Problems, estimates and simulations go through the use-case layer
(:mod:`plena_opt.api`); the study store, the Pareto mask and the plain serving simulation of
edited stage times (which has no use case yet) are called directly. Results come back as the
product's own typed objects wrapped in :class:`SimRun`; :mod:`plena_opt.web.views` turns them
into the API's pydantic responses.

Units: training durations are milliseconds (as ``plena-opt simulate --schedule``); serving plans
are simulated in seconds (as the evaluator) and :attr:`SimRun.to_ms` scales them for the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.pipeline.scheduler import (
    SCHEDULES,
    InferenceStageTimes,
    schedule_op_types,
    stage_times_from_estimate,
)
from plena_opt.pipeline.simulator import (
    BUBBLE_DEFINITION,
    DepReason,
    QuantileStats,
    SimulationResult,
    Timeline,
    check_schedule_durations,
    chrome_trace,
    chunked_op_types,
    parse_noise,
    simulate_serving,
    validate_trace,
)

__all__ = [
    "BUBBLE_DEFINITION",
    "SCHEDULES",
    "DepReason",
    "QuantileStats",
    "SimRun",
    "Timeline",
    "catalog",
    "check_noise",
    "estimate_serving",
    "list_studies",
    "not_in_form",
    "run_serving",
    "run_training",
    "study_front",
    "trace_of",
    "validate_trace",
]


@dataclass(frozen=True)
class ServingProblem:
    """A serving plan as the UI's form gives it (built-in profile names only)."""

    model: str
    noc: str
    memory: str
    tp: int = 1
    ep: int = 1
    dp: int = 1
    pp: int = 1
    cp: int = 1
    moe_tp_mode: str = "replace"
    comm_overlap: str = "none"
    batch_size: int = 16
    input_seq: int = 2048
    output_seq: int = 1024
    max_window_steps: int = 16


@dataclass(frozen=True)
class SimRun:
    """One simulation for the page. ``result`` is the shown timeline's ``SimulationResult``;
    ``to_ms`` scales its times to ms; ``metrics`` are the Monte Carlo figures to tabulate as
    ``(metric, unit, stats, scale)``; ``durations`` the per-op-type inputs used (ms)."""

    mode: str
    title: str
    result: SimulationResult
    to_ms: float
    simulate_comm: bool
    durations_ms: dict[str, float]
    metrics: list[tuple[str, str, QuantileStats, float]] = field(default_factory=list)
    analytic: dict[str, float] | None = None
    notes: list[str] = field(default_factory=list)


def catalog() -> dict[str, Any]:
    """Choices for the forms: schedules with their op types, and the shipped profiles."""
    from deepstack import list_noc_profiles

    from plena_opt.estimate.problem import DEFAULT_MEMORY, DEFAULT_MODEL, DEFAULT_NOC
    from plena_opt.memory import list_memory_profiles
    from plena_opt.models import list_models

    return {
        "schedules": {
            name: {
                "op_types": list(schedule_op_types(name)),
                "comm_op_types": [
                    t for t in schedule_op_types(name, True) if t not in schedule_op_types(name)
                ],
                "chunked": name in ("interleaved-1f1b", "bigmac-vpp"),
            }
            for name in SCHEDULES
        },
        "models": list_models(),
        "nocs": list_noc_profiles(),
        "memories": list_memory_profiles(),
        "defaults": {"model": DEFAULT_MODEL, "noc": DEFAULT_NOC, "memory": DEFAULT_MEMORY},
        "reasons": [r.value for r in DepReason],
    }


def _prefixed(exc: PlenaInputError, prefix: str) -> PlenaInputError:
    """The same error with its field under ``prefix`` (``durations.F`` → ``training.…``)."""
    field_name = exc.field or ""
    if field_name.startswith("durations"):
        field_name = field_name.replace("durations", "durations_ms", 1)
    full = f"{prefix}.{field_name}" if field_name else prefix
    cls = PlenaNotFoundError if isinstance(exc, PlenaNotFoundError) else PlenaInputError
    return cls(full, str(exc))


def run_training(
    schedule: str,
    pp: int,
    vpp: int,
    microbatches: int,
    durations_ms: dict[str, float],
    noise: Any,
    samples: int,
    seed: int,
    simulate_comm: bool,
    max_ops: int,
) -> SimRun:
    """Simulate a training schedule (``durations_ms`` per pipeline stage; chunk ops take F/v)."""
    if pp * vpp * microbatches * 2 > max_ops:  # every schedule has >= 2 ops per (rank, chunk, mb)
        raise PlenaInputError(
            "training.microbatches",
            f"pp·vpp·microbatches·2 = {pp * vpp * microbatches * 2} ops is above the {max_ops} "
            "ops the UI draws (fewer micro-batches or ranks)",
        )
    from plena_opt import api

    try:
        plan = api.build_schedule(schedule, pp, microbatches, vpp, simulate_comm=simulate_comm)
    except PlenaInputError as exc:
        raise _prefixed(exc, "training") from None
    if plan.n_ops > max_ops:
        raise PlenaInputError(
            "training.microbatches",
            f"the plan has {plan.n_ops} ops; the UI draws at most {max_ops} (fewer micro-batches "
            "or ranks)",
        )
    try:
        stage = check_schedule_durations(schedule, durations_ms, simulate_comm=simulate_comm)
        res = api.simulate_schedule(
            plan, stage, noise=noise, samples=samples, seed=seed, simulate_comm=simulate_comm
        ).result
    except PlenaInputError as exc:
        raise _prefixed(exc, "training") if exc.field.startswith("durations") else exc from None
    metrics = []
    if res.mc:
        metrics.append(("makespan", "ms", res.mc.makespan, 1.0))
    chunked = chunked_op_types(plan)
    notes = [f"chunk ops take {', '.join(t + '/v' for t in chunked)} (v={vpp})"] if chunked else []
    title = f"{schedule} pp={pp} vpp={vpp} m={microbatches}"
    return SimRun("training", title, res, 1.0, simulate_comm, dict(stage), metrics, None, notes)


def _evaluate(problem: ServingProblem) -> dict[str, Any]:
    """The estimate document of a serving plan (``api.estimate_plan``)."""
    from plena_opt import api

    for name in ("model", "noc", "memory"):
        value = getattr(problem, name)
        if "/" in value or "\\" in value or value.endswith(".json"):
            # the page names shipped profiles only: a path would let a request read local files
            raise PlenaInputError(
                f"serving.{name}", f"serving.{name}: give a built-in {name} name, not a path"
            )
    spec = dict(
        model=problem.model,
        noc=problem.noc,
        memory=problem.memory,
        batch_size=problem.batch_size,
        input_seq=problem.input_seq,
        output_seq=problem.output_seq,
    )
    plan = api.Plan(
        tp=problem.tp,
        ep=problem.ep,
        dp=problem.dp,
        pp=problem.pp,
        cp=problem.cp,
        moe_tp_mode=problem.moe_tp_mode,
        comm_overlap=problem.comm_overlap,
    )
    try:
        return api.estimate_plan(api.load_problem(spec), plan).document
    except PlenaInputError as exc:
        raise _prefixed(exc, "serving") from None


def estimate_serving(problem: ServingProblem) -> dict[str, Any]:
    """The analytic estimate of a serving plan and the duration inputs it implies (ms per op
    type: ``P_s{r}``, ``D0_s{r}``, ``D_s{r}``, hops ``XP``/``XD``)."""
    est = _evaluate(problem)
    times = stage_times_from_estimate(est, max_decode_steps=problem.max_window_steps)
    return {
        "ttft_ms": float(est["ttft_seconds"]) * 1e3,
        "tps": float(est["tps"]),
        "fits_in_memory": est.get("fits_in_memory"),
        "micro_batches": times.micro_batches,
        "decode_steps": times.decode_steps,
        "durations_ms": {k: v * 1e3 for k, v in times.durations().items()},
        "plan": est.get("plan"),
    }


def _times_from_durations(base: InferenceStageTimes, d_ms: dict[str, float]) -> InferenceStageTimes:
    """Stage times with the UI's per-op-type values (ms) in place of the estimate's."""
    p = base.pp
    allowed = {f"{k}_s{s}" for k in ("P", "D0", "D") for s in range(p)} | {"XP", "XD"}
    for key, value in d_ms.items():
        if key not in allowed:
            raise PlenaInputError(
                f"serving.durations_ms.{key}",
                f"serving.durations_ms.{key}: not an op type of this plan (P_s0…, D0_s0…, "
                "D_s0…, XP, XD)",
            )
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PlenaInputError(
                f"serving.durations_ms.{key}", f"serving.durations_ms.{key} must be >= 0"
            )
    cur = {k: v * 1e3 for k, v in base.durations().items()} | d_ms

    def stages(kind: str) -> tuple[float, ...]:
        return tuple(cur[f"{kind}_s{s}"] / 1e3 for s in range(p))

    return InferenceStageTimes(
        prefill_stage_seconds=stages("P"),
        prefill_transfer_seconds=cur["XP"] / 1e3,
        decode_stage_seconds=stages("D0"),
        decode_transfer_seconds=cur["XD"] / 1e3,
        micro_batches=base.micro_batches,
        decode_steps=base.decode_steps,
        tokens_per_micro_batch=base.tokens_per_micro_batch,
        steady_decode_stage_seconds=stages("D"),
    )


def run_serving(
    problem: ServingProblem,
    durations_ms: dict[str, float] | None,
    noise: Any,
    samples: int,
    seed: int,
    simulate_comm: bool,
) -> SimRun:
    """Simulate a serving plan's windows; the page shows the full window (prefills, then the
    decode steps); TTFT/TPS statistics come from the isolated request and the steady decode."""
    est = _evaluate(problem)
    times = stage_times_from_estimate(est, max_decode_steps=problem.max_window_steps)
    if durations_ms:
        times = _times_from_durations(times, durations_ms)
    ana = {"ttft_seconds": float(est["ttft_seconds"]), "tps": float(est["tps"])}
    res = simulate_serving(times, noise, samples, seed, analytic=ana, simulate_comm=simulate_comm)
    metrics = []
    if res.ttft:
        metrics.append(("ttft", "ms", res.ttft, 1e3))
    if res.tps:
        metrics.append(("tps", "tokens/s", res.tps, 1.0))
    if res.window.mc:
        metrics.append(("window makespan", "ms", res.window.mc.makespan, 1e3))
    plan = est.get("plan") or {}
    title = "serving " + " ".join(
        f"{k}={plan[k]}" for k in ("tp", "ep", "dp", "pp", "cp") if k in plan
    )
    analytic = {
        "ttft_ms": ana["ttft_seconds"] * 1e3,
        "tps": ana["tps"],
        "simulated_ttft_ms": res.ttft_deterministic * 1e3,
        "simulated_tps": res.tps_deterministic,
    }
    d_ms = {k: v * 1e3 for k, v in times.durations().items()}
    if not simulate_comm:
        d_ms = {k: v for k, v in d_ms.items() if k not in ("XP", "XD")}
    return SimRun(
        "serving", title, res.window, 1e3, simulate_comm, d_ms, metrics, analytic, list(res.causes)
    )


def trace_of(run: SimRun, sample: str) -> dict[str, Any]:
    """Chrome/Perfetto trace of one shown timeline (``deterministic``, ``p50`` or ``p99``)."""
    timelines = run.result.timelines()
    if sample not in timelines:
        raise PlenaInputError(
            "sample", f"sample must be one of {', '.join(timelines)}, got {sample!r}"
        )
    unit_us = 1000.0 * run.to_ms
    other = {"unit": "ms" if run.to_ms == 1.0 else "s", "title": run.title}
    return chrome_trace(timelines[sample], unit_us=unit_us, other=other)


def check_noise(noise: Any) -> Any:
    """A validated noise spec (errors name ``noise.<field>``)."""
    return parse_noise(noise)


def list_studies(storage: str | None) -> list[dict[str, Any]]:
    """Summaries of the studies in the store (an absent store has none; nothing is created)."""
    from plena_opt.search.storage import list_studies as _list
    from plena_opt.search.storage import open_storage, storage_exists

    if not storage_exists(storage):
        return []
    return _list(open_storage(storage))


#: The study problem's fields the serving form shows (built-in profile names and the workload).
FORM_FIELDS = ("model", "noc", "memory", "batch_size", "input_seq", "output_seq")


def not_in_form(problem: dict[str, Any] | None) -> list[str]:
    """Fields of a study's problem that the serving form cannot show: a profile given as a file
    or missing, and every other field that differs from ``ProblemSpec``'s default (a GPU chip,
    a precision, a device count…). Opening such a plan would simulate another problem."""
    from plena_opt.api import ProblemSpec

    if not problem:
        return ["problem"]
    defaults = ProblemSpec().identity()
    bad = []
    for key, value in problem.items():
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


def study_front(storage: str | None, name: str, max_trials: int) -> dict[str, Any]:
    """The first ``max_trials`` scored plans of study ``name`` (each plan once; infeasible ones
    are PRUNED trials with their values kept): plan, metrics, feasibility, membership of the
    study's feasible Pareto front (``plena_opt.search.trials.front_trials``, as GetStudy) and the
    study's problem. Only what is on disk is read (``committed_view``)."""
    from optuna.trial import TrialState

    from plena_opt.search.record import METRICS_ATTR, PLAN_ATTR
    from plena_opt.search.storage import (
        committed_view,
        load_existing_study,
        open_storage,
        storage_exists,
    )
    from plena_opt.search.trials import VALUES_ATTR, front_trials, scored_trials

    if not storage_exists(storage):
        raise PlenaNotFoundError("study", f"unknown study {name!r}; the store has no studies")
    store = open_storage(storage)
    with committed_view(store):
        study = load_existing_study(name, store)
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
                "energy_j_per_token": m.get("energy_j_per_token"),
            }
        )
    metric_names = study.metric_names or [f"objective {i}" for i in range(len(study.directions))]
    bad = not_in_form(study.user_attrs.get("problem"))
    if "precision" not in bad and any("precision" in r["plan"] for r in rows):
        bad.append("precision")  # a --precisions study: each plan has its own format
    return {
        "name": name,
        "metric_names": metric_names,
        "directions": [d.name.lower() for d in study.directions],
        "problem": study.user_attrs.get("problem"),
        "not_in_form": bad,
        "trials": rows,
    }
