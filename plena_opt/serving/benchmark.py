"""What a closed-loop benchmark run reports: a start burst, then the steady state.

A run of ``prompts_per_client × C`` requests at concurrency ``C`` starts with its ``C`` clients
sending together (warm-up requests, when the tool runs them, finish before the measured run
starts its own burst), so the mean TTFT of the run is the burst's mean over its first ``C``
requests and the steady state's over the rest. The burst is replayed through the engine's
chunked-prefill scheduler (``estimate.gpu_queue.burst_ttft``, with the same step costs; on a
prefill-first engine the burst is one wave, ``steady.wave``); TPOT and
the throughputs are the steady state's. ``PROMPTS_PER_CLIENT`` is InferenceX's protocol
(``benchmark_serving --num-prompts $((CONC * 10)) --max-concurrency $CONC``, after
``--num-warmups $((2 * CONC))``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.serving.steady import closed_loop, wave

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel
    from plena_opt.serving.workload import ServingMetrics, ServingWorkload

PROMPTS_PER_CLIENT = 10
MAX_PROMPTS_PER_CLIENT = 1 << 16
# ``fixed_length_run`` replays at most this many request-tokens (requests × output tokens, the
# replay's work); a larger run is priced by ``benchmark_run`` (a bound on validation time)
MAX_REPLAY_REQUEST_TOKENS = 20_000_000


def benchmark_run(step: StepModel, wl: ServingWorkload,
                  prompts_per_client: int = PROMPTS_PER_CLIENT) -> ServingMetrics:  # fmt: skip
    """Mean metrics of a benchmark run of ``prompts_per_client × concurrency`` requests."""
    from plena_opt.estimate.gpu_queue import burst_ttft

    if not 1 <= prompts_per_client <= MAX_PROMPTS_PER_CLIENT:
        raise PlenaInputError("prompts_per_client", f"must be 1..{MAX_PROMPTS_PER_CLIENT}")
    steady = closed_loop(step, wl)
    eng = step.engine
    c = wl.concurrency if eng.max_running is None else min(wl.concurrency, eng.max_running)
    if eng.budget_tokens <= c:
        return steady
    if eng.mixed_prefill:
        burst = burst_ttft(c, wl.input_len, eng.budget_tokens, step.prefill_seconds,
                           lambda n: step.decode_seconds(n) + eng.host_step_seconds)  # fmt: skip
        first = burst.mean_seconds
    else:  # prefill first: the start burst is one wave of prompts (``steady.wave``)
        first = wave(step, wl, c)[0]
    first += (wl.concurrency - c) / steady.request_throughput_per_s
    ttft = (first + (prompts_per_client - 1) * steady.ttft_seconds) / prompts_per_client
    return replace(
        steady, ttft_seconds=ttft, e2e_seconds=ttft + (steady.e2e_seconds - steady.ttft_seconds)
    )


def fixed_length_run(step: StepModel, wl: ServingWorkload,
                     prompts_per_client: int = PROMPTS_PER_CLIENT) -> ServingMetrics:  # fmt: skip
    """Mean metrics of a fixed-length run (``range_ratio`` 0) of ``prompts_per_client × C``
    requests measured from its start burst: the discrete-event replay of the engine's scheduler
    (``replay.replay_closed_loop`` with no warm-up waves).

    With fixed lengths the run is deterministic and never leaves its start burst's lock-step:
    requests prefilled in one step finish in one step and their clients return together, and
    under overlap scheduling (SGLang, TensorRT-LLM, async vLLM) an arrival that misses a step
    merges with the next group. ``steady._lockstep`` prices the periodic regime such groups
    settle into, which a run of ten prompts per client does not reach; the replay follows the
    run itself. Runs beyond ``MAX_REPLAY_REQUEST_TOKENS`` fall back to ``benchmark_run``."""
    from plena_opt.serving.replay import replay_closed_loop

    n = prompts_per_client * wl.concurrency
    if wl.range_ratio or n * wl.output_len > MAX_REPLAY_REQUEST_TOKENS:
        return benchmark_run(step, wl, prompts_per_client)
    cap = step.engine.max_running
    if step.engine.budget_tokens <= min(wl.concurrency, cap or wl.concurrency):
        return benchmark_run(step, wl, prompts_per_client)
    # additive steps (``request_path.cycles_spread``): the shipped fixed-length rows do not show
    # the host overlap that drawn lengths do (benchmarks/README_serving.md, r10tpot)
    return replay_closed_loop(step, wl, measured=n, warmup_waves=0)
