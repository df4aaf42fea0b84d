"""Re-check of evaluated serving plans: isolated request, full serving window and steady decode
(pipeline-simulator §1.4; analytic-model §4.6).

* Isolated request (1 micro-batch, 1 decode step): TTFT = end of its first decode step on the last
  stage; with zero noise it equals ``prefill.latency + first_decode.latency``.
* Steady decode (decode-only window, ``m`` rotating micro-batches): period = mean gap between
  successive last-stage decode ends of micro-batch ``m−1`` from step ``(steps−1)//2`` to step
  ``steps−2``, divided by ``m`` (the last step is left out: it sends no hops); with zero noise it
  equals the closed form ``max(max_stage + X, (Σ stages + p·X)/m)`` (the slowest stage, or for
  ``m < p`` the token-feedback loop). Decode TPS = ``micro_batch / period``.
* Full window (``m`` prefills, then the decode steps): where it departs from the closed forms the
  result lists both figures and the cause.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.pipeline.scheduler import (
    InferenceStageTimes,
    OpKind,
    PipelinePlan,
    serving_window,
    stage_times_from_estimate,
    without_comm,
)
from plena_opt.pipeline.simulator.dependencies import DependencyGraph, build_graph
from plena_opt.pipeline.simulator.engine import SimulationResult, simulate
from plena_opt.pipeline.simulator.noise import NoiseSpec, parse_noise
from plena_opt.pipeline.simulator.statistics import QuantileStats, summarize
from plena_opt.stop import StopToken

_REL = 1e-9  # relative tolerance for "equals the analytic figure" (float summation order)


#: Serving windows (plan and dependency graph) of up to this many ops are kept for reuse: the
#: windows depend only on (p, m, steps, prefill, which hops exist), so the plans of a re-check
#: that share pp and micro-batches share them.
_CACHE_MAX_OPS = 65_536
_CACHE_SIZE = 8
_cache: OrderedDict[tuple, tuple[PipelinePlan, DependencyGraph]] = OrderedDict()
_cache_lock = threading.Lock()


def window_graph(
    p: int, m: int, steps: int, prefill: bool, xp: bool, xd: bool, simulate_comm: bool
) -> tuple[PipelinePlan, DependencyGraph]:
    """The serving window (:func:`serving_window`) of ``p`` stages, ``m`` micro-batches and
    ``steps`` decode steps, with prefill and decode hops where ``xp``/``xd`` (left out when not
    ``simulate_comm``), and its dependency graph; op types name the durations
    (:meth:`InferenceStageTimes.durations`), so one window serves every plan of that shape."""
    key = (p, m, steps, prefill, xp, xd, simulate_comm)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    shape = InferenceStageTimes((1.0,) * p, float(xp), (1.0,) * p, float(xd), m, steps, 1)
    plan = serving_window(shape, decode_steps=steps, prefill=prefill)
    plan = plan if simulate_comm else without_comm(plan)
    out = (plan, build_graph(plan))
    if plan.n_ops <= _CACHE_MAX_OPS:
        with _cache_lock:
            _cache[key] = out
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return out


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
    steady_steps: int = 0  # decode steps of the simulated steady window
    window_steps: int = 0  # decode steps of the simulated serving window

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
                "steady_window_steps": self.steady_steps,
                "serving_window_steps": self.window_steps,
            },
            "ttft": self.ttft.to_dict() if self.ttft else None,
            "tps": self.tps.to_dict() if self.tps else None,
            "tps_p01": self.tps_p01,
            "causes": list(self.causes),
        }


#: Ops of a serving window at or under which it is simulated in full (every decode step of the
#: steady window, every capped step of the serving window); bigger windows are shortened.
FULL_WINDOW_OPS = 32_768
#: Op budget of a shortened steady window (at least :data:`SHORT_MIN_STEPS` decode steps; a
#: shortened serving window keeps its prefills and first decode step, which set the TTFTs).
SHORT_WINDOW_OPS = 6_144
#: Decode steps of a shortened steady window: one start-up step, one measured round (steps 1 → 2)
#: and the last step (left out of the measurement: it sends no hops).
SHORT_MIN_STEPS = 4
WINDOW_MODES = ("auto", "full", "short")


def _steady_steps(p: int) -> int:
    return max(8, 2 * p + 4)


def _ops_per_step(times: InferenceStageTimes) -> int:
    """Ops of one decode step of a window: a decode op (and its hop) per stage and micro-batch."""
    return times.pp * times.micro_batches * (2 if times.decode_transfer_seconds > 0 else 1)


def _window_steps(times: InferenceStageTimes, mode: str) -> tuple[int, int]:
    """Decode steps of the steady and of the serving window for ``mode`` (see
    :func:`simulate_serving`)."""
    if mode not in WINDOW_MODES:
        raise PlenaInputError("windows", f"windows must be one of {', '.join(WINDOW_MODES)}")
    steady, full = _steady_steps(times.pp), times.decode_steps
    per_step = _ops_per_step(times)
    prefill_ops = times.pp * times.micro_batches * 2
    short = mode == "short" or (
        mode == "auto" and max(steady * per_step, prefill_ops + full * per_step) > FULL_WINDOW_OPS
    )
    if not short:
        return steady, full
    return min(steady, max(SHORT_MIN_STEPS, SHORT_WINDOW_OPS // per_step)), 1


def simulate_serving(
    times: InferenceStageTimes,
    noise: NoiseSpec | Mapping | str | None = None,
    samples: int = 0,
    seed: int = 0,
    analytic: Mapping[str, float] | None = None,
    simulate_comm: bool = True,
    stop: StopToken | None = None,
    windows: str = "auto",
    window_samples: int | None = None,
    lean: bool = False,
) -> ServingResult:
    """Simulate the three windows; ``analytic`` overrides the closed forms of ``times`` (e.g. the
    evaluator's own ``ttft_seconds``/``tps``). ``simulate_comm`` (spec §0 rule 4; on by default
    here because the analytic TTFT and decode period charge every pipeline hop): ``False`` leaves
    the hops (``XP``/``XD`` ops) out of every window, and ``causes`` says so. With ``stop`` set
    (deadline or cancel), the Monte Carlo parts end early and the deterministic figures are still
    computed (each window's deterministic pass is a small fraction of its samples).

    ``windows``: ``"full"`` simulates every step (the steady window ``max(8, 2p+4)`` steps, the
    serving window ``times.decode_steps``); ``"short"`` simulates a short sampled window instead
    (:data:`SHORT_WINDOW_OPS`, at least :data:`SHORT_MIN_STEPS` steady steps; the serving window
    keeps its prefills and first decode step): the steady decode is periodic from its second
    step at zero noise, so the deterministic period still equals the closed form
    (``times.analytic()``), while a sampled period averages fewer rounds (a wider TPS spread);
    ``"auto"`` (default) is ``"full"`` when both windows have at most :data:`FULL_WINDOW_OPS`
    ops. ``window_samples`` (default
    ``samples``) sets the serving window's own Monte Carlo samples (its representative traces);
    ``lean=True`` skips what the serving figures do not use: critical-path counts, and the
    representative timelines of the isolated and steady windows."""
    spec = parse_noise(noise)
    p, m = times.pp, times.micro_batches
    dur = times.durations()
    ana = {**times.analytic(), **(analytic or {})}
    steps, win_steps = _window_steps(times, windows)
    w_samples = samples if window_samples is None else window_samples
    mc = {"criticality": not lean, "stop": stop}

    def window(m: int, steps: int, prefill: bool = True) -> tuple[PipelinePlan, DependencyGraph]:
        xp, xd = times.prefill_transfer_seconds > 0, times.decode_transfer_seconds > 0
        return window_graph(p, m, steps, prefill, xp, xd, simulate_comm)

    iso_plan, g = window(1, 1)
    ttft_op = _find(iso_plan, OpKind.D, p - 1, 0, 0)
    probe = {"ttft": ttft_op}
    iso = simulate(
        iso_plan, dur, spec, samples, seed, probe, graph=g, representative=not lean, **mc
    )

    t0, t1 = (steps - 1) // 2, steps - 2  # the last step sends no hops: not measured
    st_plan, g = window(m, steps, prefill=False)
    a = _find(st_plan, OpKind.D, p - 1, m - 1, t0)
    b = _find(st_plan, OpKind.D, p - 1, m - 1, t1)
    probe = {"a": a, "b": b}
    steady = simulate(
        st_plan, dur, spec, samples, seed, probe, graph=g, representative=not lean, **mc
    )
    span = m * (t1 - t0)
    ends = steady.deterministic.ops
    period = (ends[b].end - ends[a].end) / span

    win_plan, g = window(m, win_steps)
    probes = {f"ttft_mb{i}": _find(win_plan, OpKind.D, p - 1, i, 0) for i in range(m)}
    win = simulate(win_plan, dur, spec, w_samples, seed, probes=probes, graph=g, **mc)
    wops = win.deterministic.ops
    w_ttft = tuple(wops[j].end for j in probes.values())
    w_period = None
    if win_steps > 1:
        last = _find(win_plan, OpKind.D, p - 1, m - 1, win_steps - 1)
        first = _find(win_plan, OpKind.D, p - 1, m - 1, 0)
        w_period = (wops[last].end - wops[first].end) / (m * (win_steps - 1))

    ttft = summarize(iso.mc.probe_ends["ttft"]) if iso.mc is not None else None
    tps, tps_p01, tps_p10 = _tps_stats(times, steady, span)
    causes = _causes(times, ana, iso.makespan, period, w_ttft, w_period, win_steps)
    causes += _short_causes(times, steps, win_steps)
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
        steady_steps=steps,
        window_steps=win_steps,
    )


def _tps_stats(
    times: InferenceStageTimes, steady: SimulationResult, span: int
) -> tuple[QuantileStats | None, float | None, float | None]:
    """Sampled decode TPS of the steady window (tokens over each sample's period between the
    probes ``a`` and ``b``, ``span`` micro-batch tokens apart): stats, 1st and 10th percentile."""
    if steady.mc is None:
        return None, None, None
    per = (steady.mc.probe_ends["b"] - steady.mc.probe_ends["a"]) / span
    tps_samples = times.tokens_per_micro_batch / per
    q01, q10 = np.quantile(tps_samples, (0.01, 0.1))
    return summarize(tps_samples), float(q01), float(q10)


def _short_causes(times: InferenceStageTimes, steps: int, win_steps: int) -> list[str]:
    """Notes for shortened windows (``windows="short"``/``"auto"`` on a long window)."""
    out, full = [], _steady_steps(times.pp)
    if steps < full:
        out.append(
            f"steady decode sampled over a short window of {steps} steps (the full {full}-step "
            f"window has {full * _ops_per_step(times)} ops); its period without noise equals "
            "the closed form "
            f"{times.analytic()['decode_period_seconds'] * 1e3:.6g} ms, the sampled TPS averages "
            f"{steps - 2 - (steps - 1) // 2} round(s) per sample"
        )
    if win_steps < times.decode_steps:
        out.append(
            f"serving window simulated over {win_steps} of its {times.decode_steps} decode steps "
            "(its TTFTs are those of the full window; no window decode period)"
        )
    return out


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > _REL * max(abs(a), abs(b), 1e-30)


def _causes(
    times: InferenceStageTimes,
    ana: Mapping[str, float],
    ttft: float,
    period: float,
    w_ttft: Sequence[float],
    w_period: float | None,
    win_steps: int,
) -> list[str]:
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


def simulate_estimate(
    estimate: Mapping[str, Any],
    noise: NoiseSpec | Mapping | str | None,
    samples: int,
    seed: int,
    max_window_steps: int = 64,
    check_work: Callable[[InferenceStageTimes], None] | None = None,
    simulate_comm: bool = True,
    stop: StopToken | None = None,
    **options: Any,
) -> ServingResult:
    """The serving simulation of one estimate document (``DistributedEstimate.to_dict()``):
    its stage times over ``max_window_steps`` decode steps, simulated beside its analytic TTFT
    (s) and TPS (tokens/s). The one estimate → simulation path (CLI, server, re-check);
    ``check_work(times)`` may refuse the work before it runs; ``stop`` ends the Monte Carlo
    early; ``options`` (``windows``, ``window_samples``, ``criticality``) go to
    :func:`simulate_serving`."""
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
        **options,
    )
