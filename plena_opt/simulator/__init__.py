"""Monte Carlo pipeline simulator: ``scheduler`` (plans, labels) and ``engine`` (dependencies,
noise, the deterministic and Monte Carlo passes, serving windows, traces; it imports the scheduler,
never the reverse), ``report`` (typed simulation reports) (pipeline-simulator.md)."""

from __future__ import annotations

from plena_opt.simulator.engine import (
    DepReason,
    NoiseSpec,
    RecheckResult,
    SimulationResult,
    chrome_trace,
    recheck_plans,
    simulate,
    simulate_serving,
    validate_trace,
)
from plena_opt.simulator.scheduler import (
    SCHEDULES,
    InferenceStageTimes,
    PipelinePlan,
    build_schedule,
    serving_window,
    stage_times_from_estimate,
)

__all__ = [
    "SCHEDULES",
    "DepReason",
    "InferenceStageTimes",
    "NoiseSpec",
    "PipelinePlan",
    "RecheckResult",
    "SimulationResult",
    "build_schedule",
    "chrome_trace",
    "recheck_plans",
    "serving_window",
    "simulate",
    "simulate_serving",
    "stage_times_from_estimate",
    "validate_trace",
]
