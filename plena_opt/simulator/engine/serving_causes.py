"""Why a serving simulation departs from the closed forms: the ``causes`` of a
:class:`~plena_opt.simulator.engine.serving.ServingResult` (pipeline-simulator §1.4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from plena_opt.simulator.scheduler import InferenceStageTimes

_REL = 1e-9  # relative tolerance for "equals the analytic figure" (float summation order)


def _differs(a: float, b: float) -> bool:
    """``a`` and ``b`` differ by more than the float-summation tolerance :data:`_REL`."""
    return abs(a - b) > _REL * max(abs(a), abs(b), 1e-30)


def closed_form_causes(
    times: InferenceStageTimes,
    ana: Mapping[str, float],
    ttft: float,
    period: float,
    w_ttft: Sequence[float],
    w_period: float | None,
    win_steps: int,
) -> list[str]:
    """Notes where the analytic figures ``ana``, the stage-time closed forms and the simulated
    isolated TTFT, steady period and window figures (s) disagree, each with its cause."""
    out = []
    p, m = times.pp, times.micro_batches
    closed = times.analytic()
    stage_tps = times.tokens_per_micro_batch / closed["stage_period_seconds"]
    if _differs(ana["ttft_seconds"], closed["ttft_seconds"]):
        out.append(
            f"analytic TTFT {ana['ttft_seconds'] * 1e3:.6g} ms differs from the stage-time closed "
            f"form {closed['ttft_seconds'] * 1e3:.6g} ms (the estimate's stages do not add up)"
        )
    if _differs(ana["tps"], closed["tps"]):
        out.append(
            f"analytic TPS {ana['tps']:.6g} averages the per-step decode period (the slowest stage "
            f"of each step); the simulated steady stages give {closed['tps']:.6g} tokens/s"
        )
    if closed["loop_period_seconds"] > closed["stage_period_seconds"]:
        out.append(
            f"{m} micro-batches for {p} stages: the token-feedback loop, not the slowest stage, "
            f"sets the decode period ({period * 1e3:.6g} ms; closed form (Σ stages + p·X)/m = "
            f"{closed['loop_period_seconds'] * 1e3:.6g} ms vs max stage + X = "
            f"{closed['stage_period_seconds'] * 1e3:.6g} ms): {closed['tps']:.6g} tokens/s, "
            f"not the {stage_tps:.6g} of micro / (max stage + X), which would need {p} "
            "micro-batches in flight (the evaluator prices the same bound: docs/deviations.md §5)"
        )
    if w_ttft and _differs(max(w_ttft), ttft):
        out.append(
            f"prefills queued ahead of decodes: in the full window the first decode of micro-batch "
            f"b waits for stage 0 to finish all {m} prefills (window TTFT {min(w_ttft) * 1e3:.6g}–"
            f"{max(w_ttft) * 1e3:.6g} ms vs isolated {ttft * 1e3:.6g} ms)"
        )
    if w_period is not None and _differs(w_period, period):
        steady = times.steady_decode
        spread = max(steady) - min(steady)
        why = "unequal stages and the " if spread > _REL * max(steady) else ""
        out.append(
            f"window decode period {w_period * 1e3:.6g} ms vs steady {period * 1e3:.6g} ms: "
            f"{why}start-up "
            f"transient after the queued prefills (a window of {win_steps} steps is not "
            "periodic yet)"
        )
    return out
