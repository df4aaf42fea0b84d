"""What a front end needs around ``simulate_plan``/``simulate_schedule``: the schedules, noise and
seed checks, trace writing and validation, the reports. Re-exports of ``plena_opt.simulator`` so no
front end imports it (docs/ARCHITECTURE.md).

Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "BUBBLE_DEFINITION": "plena_opt.simulator.engine",
    "DepReason": "plena_opt.simulator.engine",
    "InferenceStageTimes": "plena_opt.simulator.scheduler",
    "NoiseSpec": "plena_opt.simulator.engine",
    "QuantileStats": "plena_opt.simulator.engine",
    "SCHEDULES": "plena_opt.simulator.scheduler",
    "SimulationResult": "plena_opt.simulator.engine",
    "Timeline": "plena_opt.simulator.engine",
    "check_duration": "plena_opt.simulator.engine",
    "check_schedule_durations": "plena_opt.simulator.engine",
    "check_schedule_shape": "plena_opt.simulator.scheduler",
    "check_seed": "plena_opt.simulator.engine",
    "chrome_trace": "plena_opt.simulator.engine",
    "chunked_op_types": "plena_opt.simulator.engine",
    "parse_noise": "plena_opt.simulator.engine",
    "render_schedule": "plena_opt.simulator.report",
    "render_serving": "plena_opt.simulator.report",
    "schedule_op_types": "plena_opt.simulator.scheduler",
    "simulate_serving": "plena_opt.simulator.engine",
    "stage_times_from_estimate": "plena_opt.simulator.scheduler",
    "validate_trace": "plena_opt.simulator.engine",
    "write_trace": "plena_opt.simulator.engine",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
