"""Bounds on every size a request can carry, one set for every front end (the gRPC server's
``ServerLimits`` defaults and ``simulate_job``, the web app's ``plena_opt.web``): a request
above one is refused naming its field (gRPC RESOURCE_EXHAUSTED, HTTP 422). Also the working
memory a simulation is estimated to need (:func:`simulation_bytes`) and the slots that bound the
count and the bytes of the simulations running at once (:class:`WorkSlots`).

``request_bounds.py`` lists, per field of every request message (proto and HTTP), the bound that
applies to it; ``tests/test_request_bounds.py`` checks that none is missing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import plena_opt.bounds as _bounds
from plena_opt.estimate.eplb import MAX_REDUNDANT as _MAX_REDUNDANT
from plena_opt.search.progress import PROGRESS_FRONT_POINTS

MIB = 1024 * 1024

#: An HTTP request body, and an inline JSON document of a gRPC request.
MAX_BODY_BYTES = 1 * MIB
#: gRPC send/receive message size.
MAX_MESSAGE_BYTES = 16 * MIB
#: Monte Carlo samples per simulation or re-check, ops × samples per simulation, decode steps of a
#: serving window, ops of one training schedule (the web caps the page at :data:`MAX_VIEW_OPS`):
#: the CLI checks these too, so they live in the leaf ``plena_opt.bounds`` and are re-exported here.
MAX_SAMPLES = _bounds.MAX_SAMPLES
MAX_WORK = _bounds.MAX_WORK
MAX_WINDOW_STEPS = _bounds.MAX_WINDOW_STEPS
MAX_TRAINING_OPS = _bounds.MAX_SCHEDULE_OPS
#: Ops of one simulated plan sent to the web page: every op travels to the browser three times
#: (deterministic, p50, p99 timelines), so 65,536 ops are about 20 MB of JSON.
MAX_VIEW_OPS = 65_536
#: Pipeline ranks, virtual chunks and micro-batches of a training schedule (the web form's; the
#: gRPC server bounds their product by :data:`MAX_TRAINING_OPS`).
MAX_PP = 256
MAX_VPP = 64
MAX_MICROBATCHES = 8192
#: Devices of a NoC profile, and so every parallel degree of a plan.
MAX_DEVICES = 4096
#: Op-type keys in one durations map (a pp=256 serving plan has 3·256 + 2).
MAX_DURATION_KEYS = 1024
#: Length of a name (model, NoC, memory, study) or a noise text.
MAX_NAME_CHARS = 256
MAX_NOISE_CHARS = 4096
#: Sequences, prompt and generated tokens of a workload: the CLI's and gRPC's (plena_opt.bounds),
#: the web's forms too (the simulator's serving form, the estimate, the planner and its knobs).
MAX_BATCH = _bounds.MAX_BATCH_SIZE
MAX_INPUT_SEQ = _bounds.MAX_INPUT_SEQ
MAX_OUTPUT_SEQ = _bounds.MAX_OUTPUT_SEQ
#: Trials per search: one bound in every front end (the CLI's, ``plena_opt.bounds``); a gRPC
#: server's operator may set a lower ``max_trials`` of their own (server limits).
MAX_TRIALS = _bounds.MAX_TRIALS
#: Trials drawn in a study's front (a reply's size, not a request's).
MAX_FRONT_TRIALS = 20_000
#: Batch sizes of one search; front plans re-checked by Monte Carlo after a search.
MAX_BATCH_SIZES = 64
MAX_RECHECK_TOP_K = 16
#: Compressed trace bytes in one gRPC reply; the longest search budget, seconds.
MAX_TRACE_BYTES = 12 * MIB
MAX_DEADLINE_SECONDS = 3600.0
#: Simulations running at once (each front end), and the estimated working memory of one.
MAX_CONCURRENT_SIMULATIONS = 4
MAX_SIMULATION_BYTES = 1024 * MIB
#: MoE noise: experts and tokens per step. The largest published MoE models route over a few
#: hundred experts (DeepSeek-V3: 256 routed, Kimi K2: 384); 1024 leaves room. The noise pool
#: draws a 4096 × experts Dirichlet and multinomial (float64, int64), about 96 KiB per expert.
MAX_MOE_EXPERTS = 1024
MAX_MOE_TOKENS = 1 << 24
#: MoE noise Dirichlet concentration (above about 1e6 every expert's share is equal to float
#: precision) and the straggler slow-down factor (a rank 100× slower is a failed rank, not noise).
MAX_MOE_ALPHA = 1e6
MAX_STRAGGLER_FACTOR = 100.0
#: An SLA or cost cap of a search (ms, tokens/s, USD per million output tokens): finite, > 0.
MAX_SLA = _bounds.MAX_SLA
#: Characters of an inline model's display name.
MAX_DISPLAY_NAME = 128
#: Serving under load (issue 23): closed-loop clients and Poisson requests/s of a workload.
MAX_CONCURRENCY = _bounds.MAX_CONCURRENCY
MAX_REQUEST_RATE = _bounds.MAX_REQUEST_RATE
#: The KV pool's share of GPU memory under load (``ServingLoad.memory_fraction``): (0, 1].
MAX_MEMORY_FRACTION = _bounds.MAX_MEMORY_FRACTION
#: Speculative decoding: draft tokens per step (``ServingLoad.speculative``).
MAX_SPECULATIVE_TOKENS = _bounds.MAX_SPECULATIVE_TOKENS
#: EPLB redundant expert replicas (``Workload.eplb_redundant``, ``--eplb-redundant``).
MAX_EPLB_REDUNDANT = _MAX_REDUNDANT
#: The planner page's model directory on the machine running the UI: characters of its path,
#: and bytes of the ``config.json`` read from it (Hugging Face configs are a few KiB; the
#: largest shipped one is under 10 KiB).
MAX_PATH_CHARS = 4096
MAX_CONFIG_BYTES = 1 * MIB
#: Front points a planner job's progress carries (the front so far, thinned to this many).
MAX_LIVE_FRONT_POINTS = PROGRESS_FRONT_POINTS

# Working memory of a Monte Carlo run, per op: float32 durations and end times plus an int8
# binding slot per sample of a block (9 bytes × samples, at most SAMPLE_BLOCK), and the plan,
# dependency graph and level layout (measured: 100,000 ops of 1F1B take about 1.5 KB per op
# besides the block buffers; 2 KiB leaves a margin).
GRAPH_BYTES_PER_OP = 2048
BLOCK_BYTES_PER_SAMPLE = 9
#: The MoE imbalance pool: _MOE_POOL (4096) rows × experts × (Dirichlet float64 + multinomial
#: int64 + numpy's gamma scratch float64).
MOE_BYTES_PER_EXPERT = 4096 * 8 * 3


class LimitError(Exception):
    """A request above a bound (``busy`` False: it can never run) or a server at capacity
    (``busy`` True: retry later). gRPC: RESOURCE_EXHAUSTED; HTTP: 422 / 503."""

    def __init__(self, field: str, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.busy = busy


def check_noise(spec: Any, field: str = "noise") -> Any:
    """A validated ``NoiseSpec`` within the request bounds (MoE experts, tokens, alpha and op
    types, the straggler factor), else :class:`LimitError` naming ``<field>.…`` and the range.
    Every front end calls this one (the CLI's ``--noise`` too)."""
    st = getattr(spec, "straggler", None)
    if st is not None and st.factor_high > MAX_STRAGGLER_FACTOR:
        _above(
            f"{field}.straggler.factor_high", "between 1 and", MAX_STRAGGLER_FACTOR, st.factor_high
        )
    moe = getattr(spec, "moe", None)
    if moe is None:
        return spec
    for name, low, top in (
        ("experts", "between 1 and", MAX_MOE_EXPERTS),
        ("tokens", "between 1 and", MAX_MOE_TOKENS),
        ("alpha", "above 0 and at most", MAX_MOE_ALPHA),
    ):
        if getattr(moe, name) > top:
            _above(f"{field}.moe.{name}", low, top, getattr(moe, name))
    types = moe.op_types or []
    if len(types) > MAX_DURATION_KEYS or any(len(t) > MAX_NAME_CHARS for t in types):
        raise LimitError(
            f"{field}.moe.op_types",
            f"{field}.moe.op_types: at most {MAX_DURATION_KEYS} names of at most "
            f"{MAX_NAME_CHARS} characters",
        )
    return spec


def _above(name: str, low: str, top: float, value: float) -> None:
    shown = f"{top:g}" if isinstance(top, float) else f"{top:,}"
    got = f"{value:g}" if isinstance(value, float) else str(value)
    got = got if len(got) <= 24 else f"{got[:12]}… ({len(got)} digits)"
    raise LimitError(name, f"{name} must be {low} {shown}, got {got}")


def simulation_bytes(n_ops: int, samples: int, noise: Any = None) -> int:
    """Estimated working memory (bytes) of a Monte Carlo simulation of ``n_ops`` ops."""
    from plena_opt.simulator.engine.noise import SAMPLE_BLOCK

    block = min(max(samples, 0), SAMPLE_BLOCK)
    need = (n_ops + 1) * (block * BLOCK_BYTES_PER_SAMPLE + GRAPH_BYTES_PER_OP)
    moe = getattr(noise, "moe", None)
    if moe is not None:
        need += moe.experts * MOE_BYTES_PER_EXPERT
    return need


def check_op_samples(n_ops: int, samples: int) -> None:
    """:class:`LimitError` naming ``samples`` when ops × samples are above :data:`MAX_WORK`."""
    if n_ops * max(samples, 1) > MAX_WORK:
        raise LimitError(
            "samples", f"{n_ops} ops × {samples} samples is above the limit {MAX_WORK}"
        )


def check_work(
    n_ops: int, samples: int, noise: Any = None, max_bytes: int = MAX_SIMULATION_BYTES
) -> int:
    """The simulation's estimated bytes; :class:`LimitError` naming ``samples`` when its ops ×
    samples are above :data:`MAX_WORK` or its bytes above ``max_bytes``."""
    check_op_samples(n_ops, samples)
    need = simulation_bytes(n_ops, samples, noise)
    if need > max_bytes:
        raise LimitError(
            "samples",
            f"{n_ops} ops × {samples} samples need about {need // MIB} MiB, above the limit of "
            f"{max_bytes // MIB} MiB per simulation",
        )
    return need


class WorkSlots:
    """At most ``count`` simulations at once and at most ``total_bytes`` of their estimated
    working memory; a request beyond either is :class:`LimitError` with ``busy`` set."""

    def __init__(
        self,
        count: int = MAX_CONCURRENT_SIMULATIONS,
        total_bytes: int = MAX_CONCURRENT_SIMULATIONS * MAX_SIMULATION_BYTES,
    ) -> None:
        self.count, self.total_bytes = count, total_bytes
        self._lock = threading.Lock()
        self._running: list[int] = []

    @contextlib.contextmanager
    def slot(self, need_bytes: int = 0) -> Iterator[None]:
        """Hold a slot of ``need_bytes`` for the body."""
        with self._lock:
            if len(self._running) >= self.count:
                raise LimitError(
                    "request", f"{self.count} simulations are running; retry later", busy=True
                )
            if sum(self._running) + need_bytes > self.total_bytes:
                raise LimitError(
                    "request",
                    f"the running simulations hold {sum(self._running) // MIB} MiB of the "
                    f"{self.total_bytes // MIB} MiB allowed; retry later",
                    busy=True,
                )
            self._running.append(need_bytes)
        try:
            yield
        finally:
            with self._lock:
                self._running.remove(need_bytes)

    def active(self) -> int:
        with self._lock:
            return len(self._running)
