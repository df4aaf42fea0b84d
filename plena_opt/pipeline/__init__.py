"""Deprecated: the simulator is ``plena_opt.simulator`` now; this shim keeps the old names."""

from __future__ import annotations

import warnings

from plena_opt.simulator import (
    SCHEDULES,
    DepReason,
    InferenceStageTimes,
    NoiseSpec,
    PipelinePlan,
    RecheckResult,
    SimulationResult,
    build_schedule,
    chrome_trace,
    recheck_plans,
    serving_window,
    simulate,
    simulate_serving,
    stage_times_from_estimate,
    validate_trace,
)

warnings.warn(
    "plena_opt.pipeline is deprecated; import from plena_opt.simulator",
    DeprecationWarning,
    stacklevel=2,
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
