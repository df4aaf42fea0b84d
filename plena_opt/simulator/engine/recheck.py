"""Monte Carlo re-check of evaluated serving plans (pipeline-simulator §1.4, §3): every plan
simulated under the same noise and seed (common random numbers), with its analytic and simulated
ranks side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plena_opt.simulator.engine.noise import NoiseSpec, parse_noise
from plena_opt.simulator.engine.serving import ServingResult, simulate_estimate
from plena_opt.simulator.engine.trace import chrome_trace, write_trace
from plena_opt.stop import StopToken


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


def recheck_plans(
    estimates: Sequence[Any],
    samples: int = 1000,
    noise: NoiseSpec | Mapping | str | None = None,
    seed: int = 0,
    trace_dir: str | Path | None = None,
    max_window_steps: int = 64,
    stop: StopToken | None = None,
    windows: str = "auto",
) -> list[RecheckResult]:
    """Re-check evaluated plans (``DistributedEstimate`` objects or their ``to_dict()``) under the
    same seed for every plan (common random numbers). ``tps_p01`` is the slow tail of throughput:
    the TPS at the p99 decode period (1st percentile of the sampled TPS). TPS ranks compare the
    simulation without noise with the p50, so the simulator's first-step decode times (see the
    ``causes`` note) do not pass for a noise effect. Traces of each plan's
    serving window (deterministic, p50, p99) go to ``trace_dir/plan{i}_{sample}.json``.

    ``stop`` (deadline / cancel token) is checked between plans and inside every simulation:
    the plans done are returned, the last one possibly with fewer samples (``partial``), and no
    traces are written once it is set.

    ``windows`` (see :func:`simulate_serving`): by default a long window is shortened to a short
    sampled one; the serving window's own Monte Carlo runs only for traces (``trace_dir``), and
    neither criticality nor the other windows' representative timelines are computed (the
    re-check reports none of them)."""
    spec = parse_noise(noise)
    out: list[RecheckResult] = []
    for i, est in enumerate(estimates):
        if stop is not None and stop.is_set():
            break
        d = est.to_dict() if hasattr(est, "to_dict") and not isinstance(est, Mapping) else est
        res = simulate_estimate(
            d,
            spec,
            samples,
            seed,
            max_window_steps,
            stop=stop,
            windows=windows,
            window_samples=samples if trace_dir is not None else 0,
            lean=True,
        )
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
