"""The simulator's engine (pipeline-simulator.md): reads a scheduler plan without
reordering it, derives dependencies with reasons, samples durations, rebuilds timelines."""

from __future__ import annotations

from plena_opt.simulator.engine.dependencies import (
    Dependency,
    DependencyGraph,
    DepReason,
    PlanCycleError,
    build_graph,
    derive_dependencies,
)
from plena_opt.simulator.engine.noise import (
    MoeImbalanceSpec,
    NoiseSampler,
    NoiseSpec,
    StragglerSpec,
    parse_noise,
)
from plena_opt.simulator.engine.recheck import RecheckResult, recheck_plans
from plena_opt.simulator.engine.request import (
    MAX_DURATION,
    SEED_LIMIT,
    check_duration,
    check_schedule_durations,
    check_seed,
    chunked_op_types,
    duration_note,
    per_op_durations,
)
from plena_opt.simulator.engine.run import (
    MonteCarloResult,
    SimulationResult,
    base_durations,
    simulate,
)
from plena_opt.simulator.engine.serving import (
    ServingResult,
    simulate_estimate,
    simulate_serving,
)
from plena_opt.simulator.engine.statistics import QuantileStats, summarize
from plena_opt.simulator.engine.timeline import BUBBLE_DEFINITION, OpTiming, Timeline
from plena_opt.simulator.engine.trace import chrome_trace, write_trace
from plena_opt.simulator.engine.trace_validator import validate_trace

__all__ = [
    "BUBBLE_DEFINITION",
    "MAX_DURATION",
    "SEED_LIMIT",
    "DepReason",
    "Dependency",
    "DependencyGraph",
    "MoeImbalanceSpec",
    "MonteCarloResult",
    "NoiseSampler",
    "NoiseSpec",
    "OpTiming",
    "PlanCycleError",
    "QuantileStats",
    "RecheckResult",
    "ServingResult",
    "SimulationResult",
    "StragglerSpec",
    "Timeline",
    "base_durations",
    "build_graph",
    "check_duration",
    "check_schedule_durations",
    "check_seed",
    "chrome_trace",
    "chunked_op_types",
    "derive_dependencies",
    "duration_note",
    "parse_noise",
    "per_op_durations",
    "recheck_plans",
    "simulate",
    "simulate_estimate",
    "simulate_serving",
    "summarize",
    "validate_trace",
    "write_trace",
]
