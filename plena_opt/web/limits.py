"""Bounds on every size a web API request can carry, the same figures as the gRPC server's
(``server/plena_server/limits.py`` and ``simulate_job.py``) where both have one; a request above
one is refused with HTTP 422 naming the field."""

from __future__ import annotations

import plena_opt.bounds as bounds

MIB = 1024 * 1024

#: Request body (the gRPC server's ``max_inline_json_bytes``).
MAX_BODY_BYTES = 1 * MIB
#: Monte Carlo samples per simulation (``ServerLimits.max_samples``).
MAX_SAMPLES = bounds.MAX_SAMPLES
#: Ops × samples per request (``simulate_job.MAX_WORK``).
MAX_WORK = bounds.MAX_WORK
#: Decode steps of a serving window (``simulate_job.MAX_WINDOW_STEPS``).
MAX_WINDOW_STEPS = bounds.MAX_WINDOW_STEPS
#: Ops of one simulated plan sent to the page. Lower than the server's 200,000 training ops
#: because every op travels to the browser three times (deterministic, p50, p99 timelines):
#: 65,536 ops are about 20 MB of JSON.
MAX_OPS = 65_536
#: Pipeline ranks, virtual chunks and micro-batches of a training schedule.
MAX_PP = 256
MAX_VPP = 64
MAX_MICROBATCHES = 8192
#: Parallel degrees of a serving plan (the server's ``max_devices``).
MAX_DEGREE = 4096
#: Op-type keys in one ``durations_ms`` map (a pp=256 serving plan has 3·256 + 2).
MAX_DURATION_KEYS = 1024
#: Length of a name (model, NoC, memory, study) or a noise text.
MAX_NAME_CHARS = 256
MAX_NOISE_CHARS = 4096
#: Sequence lengths and batch of a serving workload.
MAX_SEQ = 1 << 20
MAX_BATCH = 1 << 16
#: Trials drawn in a study's front.
MAX_FRONT_TRIALS = 20_000
#: Simulation results kept for the trace download (least recently used dropped first).
RESULT_CACHE = 8
