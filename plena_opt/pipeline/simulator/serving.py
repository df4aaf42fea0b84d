"""Re-check of evaluated serving plans: isolated request, full serving window and steady decode
(pipeline-simulator §1.4; analytic-model §4.6).

* Isolated request (1 micro-batch, 1 decode step): TTFT = end of its first decode step on the last
  stage; with zero noise it equals ``prefill.latency + first_decode.latency``.
* Steady decode (decode-only window, ``m`` rotating micro-batches): period = mean gap between
  successive last-stage decode ends over the second half of the window, divided by ``m``; with zero
  noise and ``m ≥ p`` it equals ``max_stage + X``. Decode TPS = ``micro_batch / period``.
* Full window (``m`` prefills, then the decode steps): where it departs from the closed forms the
  result lists both figures and the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plena_opt.pipeline.scheduler import (
    InferenceStageTimes,
    OpKind,
    PipelinePlan,
    serving_window,
    stage_times_from_estimate,
    without_comm,
)
from plena_opt.pipeline.simulator.engine import SimulationResult, simulate
from plena_opt.pipeline.simulator.noise import NoiseSpec, parse_noise
from plena_opt.pipeline.simulator.statistics import QuantileStats, summarize
from plena_opt.pipeline.simulator.trace import chrome_trace, write_trace
from plena_opt.stop import StopToken

_REL = 1e-9  # relative tolerance for "equals the analytic figure" (float summation order)


def _find(plan: PipelinePlan, kind: OpKind, rank: int, mb: int, step: int) -> int:
    for o in plan.ops:
        if o.kind is kind and o.rank == rank and o.microbatch == mb and o.step == step:
            return o.id
    raise KeyError((kind, rank, mb, step))


@dataclass(frozen=True)
class ServingResult:
    """Simulated serving figures (seconds, tokens/s) beside the analytic ones."""

    times: InferenceStageTimes
    analytic: dict[str, float]
    isolated: SimulationResult
    steady: SimulationResult
    window: SimulationResult
    ttft_deterministic: float
    period_deterministic: float
    window_ttft_deterministic: tuple[float, ...]
    window_period_deterministic: float | None
    ttft: QuantileStats | None
    tps: QuantileStats | None
    causes: tuple[str, ...]
    # Pessimistic TPS tail: the 1st percentile of the sampled TPS, i.e. tokens over the p99
    # decode period (the TPS counterpart of a p99 latency).
    tps_p01: float | None = None
    tps_p10: float | None = None  # 10th percentile of the sampled TPS (the p90 slow side)
    # "" when every window ran its samples; else why the Monte Carlo stopped early (the
    # distributions then cover the samples done, see ``ttft.n`` / ``tps.n``, or are None)
    stop_reason: str = ""

    @property
    def partial(self) -> bool:
        """True when a window's Monte Carlo stopped before its requested samples."""
        return bool(self.stop_reason)

    @property
    def tps_deterministic(self) -> float:
        return self.times.tokens_per_micro_batch / self.period_deterministic

    def to_dict(self) -> dict[str, Any]:
        return {
            "analytic": dict(self.analytic),
            "simulated": {
                "isolated_ttft_seconds": self.ttft_deterministic,
                "steady_decode_period_seconds": self.period_deterministic,
                "steady_decode_tps": self.tps_deterministic,
                "window_ttft_seconds": list(self.window_ttft_deterministic),
                "window_decode_period_seconds": self.window_period_deterministic,
                "window_makespan_seconds": self.window.makespan,
            },
            "ttft": self.ttft.to_dict() if self.ttft else None,
            "tps": self.tps.to_dict() if self.tps else None,
            "tps_p01": self.tps_p01,
            "causes": list(self.causes),
        }


def _steady_steps(p: int) -> int:
    return max(8, 2 * p + 4)


def simulate_serving(
    times: InferenceStageTimes,
    noise: NoiseSpec | Mapping | str | None = None,
    samples: int = 0,
    seed: int = 0,
    analytic: Mapping[str, float] | None = None,
    simulate_comm: bool = True,
    stop: StopToken | None = None,
) -> ServingResult:
    """Simulate the three windows; ``analytic`` overrides the closed forms of ``times`` (e.g. the
    evaluator's own ``ttft_seconds``/``tps``). ``simulate_comm`` (spec §0 rule 4; on by default
    here because the analytic TTFT and decode period charge every pipeline hop): ``False`` leaves
    the hops (``XP``/``XD`` ops) out of every window, and ``causes`` says so. With ``stop`` set
    (deadline or cancel), the Monte Carlo parts end early and the deterministic figures are still
    computed (each window's deterministic pass is a small fraction of its samples)."""
    spec = parse_noise(noise)
    p, m = times.pp, times.micro_batches
    dur = times.durations()
    ana = {**times.analytic(), **(analytic or {})}

    def window(**kw: object) -> PipelinePlan:
        plan = serving_window(times, **kw)
        return plan if simulate_comm else without_comm(plan)

    iso_plan = window(micro_batches=1, decode_steps=1)
    ttft_op = _find(iso_plan, OpKind.D, p - 1, 0, 0)
    iso = simulate(iso_plan, dur, spec, samples, seed, probes={"ttft": ttft_op}, stop=stop)

    steps = _steady_steps(p)
    t0 = steps // 2
    st_plan = window(decode_steps=steps, prefill=False)
    a = _find(st_plan, OpKind.D, p - 1, m - 1, t0)
    b = _find(st_plan, OpKind.D, p - 1, m - 1, steps - 1)
    steady = simulate(st_plan, dur, spec, samples, seed, probes={"a": a, "b": b}, stop=stop)
    span = m * (steps - 1 - t0)
    ends = steady.deterministic.ops
    period = (ends[b].end - ends[a].end) / span

    win_plan = window()
    probes = {f"ttft_mb{i}": _find(win_plan, OpKind.D, p - 1, i, 0) for i in range(m)}
    win = simulate(win_plan, dur, spec, samples, seed, probes=probes, stop=stop)
    wops = win.deterministic.ops
    w_ttft = tuple(wops[j].end for j in probes.values())
    w_period = None
    if times.decode_steps > 1:
        last = _find(win_plan, OpKind.D, p - 1, m - 1, times.decode_steps - 1)
        first = _find(win_plan, OpKind.D, p - 1, m - 1, 0)
        w_period = (wops[last].end - wops[first].end) / (m * (times.decode_steps - 1))

    ttft = tps = tps_p01 = tps_p10 = None
    if iso.mc is not None:
        ttft = summarize(iso.mc.probe_ends["ttft"])
    if steady.mc is not None:
        per = (steady.mc.probe_ends["b"] - steady.mc.probe_ends["a"]) / span
        tps_samples = times.tokens_per_micro_batch / per
        tps = summarize(tps_samples)
        tps_p01 = float(np.quantile(tps_samples, 0.01))
        tps_p10 = float(np.quantile(tps_samples, 0.1))
    causes = _causes(times, ana, iso.makespan, period, w_ttft, w_period)
    hops = times.prefill_transfer_seconds > 0 or times.decode_transfer_seconds > 0
    if not simulate_comm and hops and p > 1:
        causes.append(
            "communication not simulated (simulate_comm=False): the pipeline hops "
            f"(prefill {times.prefill_transfer_seconds:.6g} s, decode "
            f"{times.decode_transfer_seconds:.6g} s per boundary) that the analytic figures "
            "charge are left out"
        )
    return ServingResult(
        times,
        ana,
        iso,
        steady,
        win,
        iso.deterministic.ops[ttft_op].end,
        period,
        w_ttft,
        w_period,
        ttft,
        tps,
        tuple(causes),
        tps_p01,
        tps_p10,
        iso.stop_reason or steady.stop_reason or win.stop_reason,
    )


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > _REL * max(abs(a), abs(b), 1e-30)


def _causes(
    times: InferenceStageTimes,
    ana: Mapping[str, float],
    ttft: float,
    period: float,
    w_ttft: Sequence[float],
    w_period: float | None,
) -> list[str]:
    out = []
    p, m = times.pp, times.micro_batches
    closed = times.analytic()
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
    if m < p:
        out.append(
            f"{m} micro-batches for {p} stages: the token-feedback loop, not the slowest stage, "
            f"sets the decode period ({period * 1e3:.6g} ms vs analytic "
            f"{closed['decode_period_seconds'] * 1e3:.6g} ms)"
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
            f"transient after the queued prefills (a window of {times.decode_steps} steps is not "
            "periodic yet)"
        )
    return out


@dataclass
class RecheckResult:
    """Monte Carlo re-check of one evaluated plan (seconds, tokens/s), with rank changes."""

    index: int
    plan: dict[str, Any]
    analytic_ttft_seconds: float
    analytic_tps: float
    ttft_p50_seconds: float
    ttft_p99_seconds: float  # slow tail of latency
    tps_p50: float
    tps_p01: float  # slow tail of throughput: TPS at the p99 decode period
    serving: ServingResult
    trace_paths: list[str] = field(default_factory=list)
    rank_ttft_analytic: int = 0
    rank_ttft_simulated: int = 0
    rank_tps_analytic: int = 0
    rank_tps_simulated: int = 0

    @property
    def partial(self) -> bool:
        """True when this plan's Monte Carlo stopped early (deadline, cancel, shutdown)."""
        return self.serving.partial

    @property
    def rank_changed(self) -> bool:
        """True when noise reorders this plan: its TTFT rank (analytic vs p50) or its TPS rank
        (simulated without noise vs p50) differs."""
        return (
            self.rank_ttft_analytic != self.rank_ttft_simulated
            or self.rank_tps_analytic != self.rank_tps_simulated
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "plan": self.plan,
            "analytic_ttft_seconds": self.analytic_ttft_seconds,
            "analytic_tps": self.analytic_tps,
            "ttft_p50_seconds": self.ttft_p50_seconds,
            "ttft_p99_seconds": self.ttft_p99_seconds,
            "tps_p50": self.tps_p50,
            "tps_p01": self.tps_p01,
            "rank_ttft": [self.rank_ttft_analytic, self.rank_ttft_simulated],
            "rank_tps": [self.rank_tps_analytic, self.rank_tps_simulated],
            "rank_changed": self.rank_changed,
            "partial": self.partial,
            "stop_reason": self.serving.stop_reason or "completed",
            "trace_paths": self.trace_paths,
            "serving": self.serving.to_dict(),
        }


def _ranks(values: Sequence[float], descending: bool) -> list[int]:
    order = np.argsort(-np.asarray(values) if descending else np.asarray(values), kind="stable")
    ranks = np.empty(len(values), dtype=int)
    ranks[order] = np.arange(1, len(values) + 1)
    return ranks.tolist()


def simulate_estimate(
    estimate: Mapping[str, Any],
    noise: NoiseSpec | Mapping | str | None,
    samples: int,
    seed: int,
    max_window_steps: int = 64,
    check_work: Callable[[InferenceStageTimes], None] | None = None,
    simulate_comm: bool = True,
    stop: StopToken | None = None,
) -> ServingResult:
    """The serving simulation of one estimate document (``DistributedEstimate.to_dict()``):
    its stage times over ``max_window_steps`` decode steps, simulated beside its analytic TTFT
    (s) and TPS (tokens/s). The one estimate → simulation path (CLI, server, re-check);
    ``check_work(times)`` may refuse the work before it runs; ``stop`` ends the Monte Carlo
    early (see :func:`simulate_serving`)."""
    times = stage_times_from_estimate(estimate, max_decode_steps=max_window_steps)
    if check_work is not None:
        check_work(times)
    ana = {"ttft_seconds": float(estimate["ttft_seconds"]), "tps": float(estimate["tps"])}
    return simulate_serving(
        times,
        parse_noise(noise),
        max(samples, 0),
        seed,
        analytic=ana,
        simulate_comm=simulate_comm,
        stop=stop,
    )


def recheck_plans(
    estimates: Sequence[Any],
    samples: int = 1000,
    noise: NoiseSpec | Mapping | str | None = None,
    seed: int = 0,
    trace_dir: str | Path | None = None,
    max_window_steps: int = 64,
    stop: StopToken | None = None,
) -> list[RecheckResult]:
    """Re-check evaluated plans (``DistributedEstimate`` objects or their ``to_dict()``) under the
    same seed for every plan (common random numbers). ``tps_p01`` is the slow tail of throughput:
    the TPS at the p99 decode period (1st percentile of the sampled TPS). TPS ranks compare the
    simulation without noise with the p50, so the simulator's first-step decode times (see the
    ``causes`` note) do not pass for a noise effect. Traces of each plan's
    serving window (deterministic, p50, p99) go to ``trace_dir/plan{i}_{sample}.json``.

    ``stop`` (deadline / cancel token) is checked between plans and inside every simulation:
    the plans done are returned, the last one possibly with fewer samples (``partial``), and no
    traces are written once it is set."""
    spec = parse_noise(noise)
    out: list[RecheckResult] = []
    for i, est in enumerate(estimates):
        if stop is not None and stop.is_set():
            break
        d = est.to_dict() if hasattr(est, "to_dict") and not isinstance(est, Mapping) else est
        res = simulate_estimate(d, spec, samples, seed, max_window_steps, stop=stop)
        ana = res.analytic
        ttft_p50 = res.ttft.p50 if res.ttft else res.ttft_deterministic
        ttft_p99 = res.ttft.p99 if res.ttft else res.ttft_deterministic
        tps_p50 = res.tps.p50 if res.tps else res.tps_deterministic
        tps_p01 = res.tps_p01 if res.tps_p01 is not None else res.tps_deterministic
        paths: list[str] = []
        if trace_dir is not None and not (stop is not None and stop.is_set()):
            for name, tl in res.window.timelines().items():
                label = name if name == "deterministic" else name.split()[0]
                tr = chrome_trace(tl, unit_us=1e6, other={"plan": d.get("plan"), "index": i})
                paths.append(str(write_trace(Path(trace_dir) / f"plan{i}_{label}.json", tr)))
        out.append(
            RecheckResult(
                i,
                dict(d.get("plan") or {}),
                ana["ttft_seconds"],
                ana["tps"],
                ttft_p50,
                ttft_p99,
                tps_p50,
                tps_p01,
                res,
                paths,
            )
        )
    for attr, value, desc in (
        ("rank_ttft_analytic", lambda x: x.analytic_ttft_seconds, False),
        ("rank_ttft_simulated", lambda x: x.ttft_p50_seconds, False),
        ("rank_tps_analytic", lambda x: x.serving.tps_deterministic, True),
        ("rank_tps_simulated", lambda x: x.tps_p50, True),
    ):
        for r, rank in zip(out, _ranks([value(x) for x in out], desc), strict=True):
            setattr(r, attr, rank)
    return out
