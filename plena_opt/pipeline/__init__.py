"""Monte Carlo pipeline simulator: ``scheduler`` (plans, labels) and ``simulator`` (imports the
scheduler, never the reverse), noise, traces (pipeline-simulator.md)."""

from __future__ import annotations

from plena_opt.pipeline.scheduler import (
    SCHEDULES,
    InferenceStageTimes,
    PipelinePlan,
    build_schedule,
    serving_window,
    stage_times_from_estimate,
)
from plena_opt.pipeline.simulator import (
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
