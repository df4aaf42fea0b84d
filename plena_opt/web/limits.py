"""Bounds on every size a web API request can carry: the shared request bounds of every front
end (:mod:`plena_opt.api.limits`, the gRPC server's too) under the names the web app uses; a
request above one is refused with HTTP 422 naming the field."""

from __future__ import annotations

from plena_opt.api.limits import (
    MAX_BATCH,
    MAX_BODY_BYTES,
    MAX_CONCURRENT_SIMULATIONS,
    MAX_DEVICES,
    MAX_DURATION_KEYS,
    MAX_FRONT_TRIALS,
    MAX_INPUT_SEQ,
    MAX_MICROBATCHES,
    MAX_NAME_CHARS,
    MAX_NOISE_CHARS,
    MAX_OUTPUT_SEQ,
    MAX_PP,
    MAX_SAMPLES,
    MAX_SIMULATION_BYTES,
    MAX_TRIALS,
    MAX_VIEW_OPS,
    MAX_VPP,
    MAX_WINDOW_STEPS,
    MAX_WORK,
    MIB,
    LimitError,
    WorkSlots,
    check_op_samples,
    check_work,
)

__all__ = [
    "MAX_BATCH",
    "MAX_BODY_BYTES",
    "MAX_CONCURRENT_SIMULATIONS",
    "MAX_DEGREE",
    "MAX_DURATION_KEYS",
    "MAX_FRONT_TRIALS",
    "MAX_MICROBATCHES",
    "MAX_NAME_CHARS",
    "MAX_NOISE_CHARS",
    "MAX_OPS",
    "MAX_PP",
    "MAX_SAMPLES",
    "MAX_TRIALS",
    "MAX_INPUT_SEQ",
    "MAX_OUTPUT_SEQ",
    "MAX_SIMULATION_BYTES",
    "MAX_VPP",
    "MAX_WINDOW_STEPS",
    "MAX_WORK",
    "MIB",
    "RESULT_CACHE",
    "LimitError",
    "WorkSlots",
    "check_op_samples",
    "check_work",
]

#: Ops of one simulated plan sent to the page.
MAX_OPS = MAX_VIEW_OPS
#: Parallel degrees of a serving plan (devices of a NoC profile).
MAX_DEGREE = MAX_DEVICES
#: Simulation results kept for the trace download (least recently used dropped first).
RESULT_CACHE = 8
