"""A serving plan from the UI's form: its analytic estimate (``api.estimate_plan``), the duration
inputs it implies, and its simulated serving window (seconds inside, ms for the page)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from plena_opt.api.simulation_io import (
    InferenceStageTimes,
    simulate_serving,
    stage_times_from_estimate,
)
from plena_opt.errors import PlenaInputError
from plena_opt.web.service.runs import SimRun, prefixed


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
    moe_tp: int = 0
    comm_overlap: str = "none"
    batch_size: int = 16
    input_seq: int = 2048
    output_seq: int = 1024
    max_window_steps: int = 16
    chip: str | None = None


def _evaluate(problem: ServingProblem) -> dict[str, Any]:
    """The estimate document of a serving plan (``api.estimate_plan``)."""
    from plena_opt import api

    for name in ("model", "noc", "memory", "chip"):
        value = getattr(problem, name) or ""
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
    if problem.chip is not None:
        spec["chip"] = problem.chip
        if api.chip_carries_memory(problem.chip):
            del spec["memory"]  # a GPU chip carries its HBM
    try:
        plan = api.Plan(
            tp=problem.tp,
            ep=problem.ep,
            dp=problem.dp,
            pp=problem.pp,
            cp=problem.cp,
            moe_tp_mode=problem.moe_tp_mode,
            comm_overlap=problem.comm_overlap,
            moe_tp=problem.moe_tp,
        )
        return api.estimate_plan(api.load_problem(spec), plan).document
    except PlenaInputError as exc:
        raise prefixed(exc, "serving") from None


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
