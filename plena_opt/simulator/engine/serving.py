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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.engine.dependencies import DependencyGraph, build_graph
from plena_opt.simulator.engine.noise import NoiseSpec, parse_noise
from plena_opt.simulator.engine.run import SimulationResult, simulate
from plena_opt.simulator.engine.serving_causes import closed_form_causes
from plena_opt.simulator.engine.statistics import QuantileStats, summarize
from plena_opt.simulator.scheduler import (
    InferenceStageTimes,
    OpKind,
    PipelinePlan,
    serving_window,
    stage_times_from_estimate,
    without_comm,
)
from plena_opt.stop import StopToken

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


def recheck_ops(times: InferenceStageTimes, windows: str = "auto") -> tuple[int, int]:
    """(ops of the windows a lean re-check of ``times`` builds and runs once — isolated, steady
    and serving —, ops one of its Monte Carlo samples simulates — isolated and steady —): what
    its CPU time grows with (``api.recheck``'s cost model). The isolated window is counted as
    4 ops a stage (prefill, its hop, decode, its hop), an upper bound."""
    steps, win_steps = _window_steps(times, windows)
    per_step = _ops_per_step(times)
    sampled = 4 * times.pp + steps * per_step
    return sampled + 2 * times.pp * times.micro_batches + win_steps * per_step, sampled


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
    steps, win_steps = _window_steps(times, windows)
    run = _Windows(times, times.durations(), spec, seed, simulate_comm, lean, stop)
    iso, ttft_op = run.isolated(samples)
    steady, period, span = run.steady(samples, steps)
    w_samples = samples if window_samples is None else window_samples
    win, w_ttft, w_period = run.serving(w_samples, win_steps)
    ana = {**times.analytic(), **(analytic or {})}
    ttft = summarize(iso.mc.probe_ends["ttft"]) if iso.mc is not None else None
    tps, tps_p01, tps_p10 = _tps_stats(times, steady, span)
    causes = closed_form_causes(times, ana, iso.makespan, period, w_ttft, w_period, win_steps)
    causes += _short_causes(times, steps, win_steps)
    causes += _comm_causes(times, simulate_comm)
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


@dataclass(frozen=True)
class _Windows:
    """Simulates the three windows of one :func:`simulate_serving` call (same durations, noise,
    seed and options for each)."""

    times: InferenceStageTimes
    dur: Mapping[str, float]
    spec: NoiseSpec
    seed: int
    simulate_comm: bool
    lean: bool
    stop: StopToken | None

    def window(
        self, m: int, steps: int, prefill: bool = True
    ) -> tuple[PipelinePlan, DependencyGraph]:
        t = self.times
        xp, xd = t.prefill_transfer_seconds > 0, t.decode_transfer_seconds > 0
        return window_graph(t.pp, m, steps, prefill, xp, xd, self.simulate_comm)

    def run(
        self,
        plan: PipelinePlan,
        g: DependencyGraph,
        samples: int,
        probes: dict[str, int],
        **kw: Any,
    ) -> SimulationResult:
        mc = {"criticality": not self.lean, "stop": self.stop}
        return simulate(plan, self.dur, self.spec, samples, self.seed, probes, graph=g, **kw, **mc)

    def isolated(self, samples: int) -> tuple[SimulationResult, int]:
        """One request alone (1 micro-batch, 1 decode step); the result and its TTFT op."""
        p = self.times.pp
        iso_plan, g = self.window(1, 1)
        ttft_op = _find(iso_plan, OpKind.D, p - 1, 0, 0)
        iso = self.run(iso_plan, g, samples, {"ttft": ttft_op}, representative=not self.lean)
        return iso, ttft_op

    def steady(self, samples: int, steps: int) -> tuple[SimulationResult, float, int]:
        """The decode-only window; the result, its deterministic period (s per micro-batch token
        step) and the micro-batch tokens between its probes ``a`` and ``b``."""
        p, m = self.times.pp, self.times.micro_batches
        t0, t1 = (steps - 1) // 2, steps - 2  # the last step sends no hops: not measured
        st_plan, g = self.window(m, steps, prefill=False)
        a = _find(st_plan, OpKind.D, p - 1, m - 1, t0)
        b = _find(st_plan, OpKind.D, p - 1, m - 1, t1)
        steady = self.run(st_plan, g, samples, {"a": a, "b": b}, representative=not self.lean)
        span = m * (t1 - t0)
        ends = steady.deterministic.ops
        return steady, (ends[b].end - ends[a].end) / span, span

    def serving(
        self, samples: int, win_steps: int
    ) -> tuple[SimulationResult, tuple[float, ...], float | None]:
        """The full window (``m`` prefills, then ``win_steps`` decode steps); the result, each
        micro-batch's TTFT (s) and the decode period (s; None for one step)."""
        p, m = self.times.pp, self.times.micro_batches
        win_plan, g = self.window(m, win_steps)
        probes = {f"ttft_mb{i}": _find(win_plan, OpKind.D, p - 1, i, 0) for i in range(m)}
        win = self.run(win_plan, g, samples, probes)
        wops = win.deterministic.ops
        w_ttft = tuple(wops[j].end for j in probes.values())
        w_period = None
        if win_steps > 1:
            last = _find(win_plan, OpKind.D, p - 1, m - 1, win_steps - 1)
            first = _find(win_plan, OpKind.D, p - 1, m - 1, 0)
            w_period = (wops[last].end - wops[first].end) / (m * (win_steps - 1))
        return win, w_ttft, w_period


def _comm_causes(times: InferenceStageTimes, simulate_comm: bool) -> list[str]:
    """The note that the hops the analytic figures charge were left out (``simulate_comm``)."""
    hops = times.prefill_transfer_seconds > 0 or times.decode_transfer_seconds > 0
    if simulate_comm or not hops or times.pp <= 1:
        return []
    return [
        "communication not simulated (simulate_comm=False): the pipeline hops "
        f"(prefill {times.prefill_transfer_seconds:.6g} s, decode "
        f"{times.decode_transfer_seconds:.6g} s per boundary) that the analytic figures "
        "charge are left out"
    ]


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
