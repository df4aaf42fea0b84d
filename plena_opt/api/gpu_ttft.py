"""Use case: TTFT under a burst of requests on a GPU (vLLM's chunked-prefill scheduler)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.estimate.gpu_queue import BurstTtft
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import EvaluatorInputs

MAX_BUDGET_TOKENS = 1 << 20  # a step budget above a million tokens is a typo


def burst_ttft(problem: EvaluatorInputs, plan: Plan, budget_tokens: int | None = None) -> BurstTtft:
    """First-token times of the workload's ``batch_size`` requests arriving together, served by
    vLLM's chunked-prefill scheduler with ``budget_tokens`` per step (default: the modelled vLLM's
    default on the chip, ``serving.engines``: 16,384 on >= 160 GiB GPUs, 8,192 on >= 70 GiB).
    GPU chips only (the scheduler is vLLM's); bad input raises naming the field."""
    from plena_opt.chip.gpu import GpuChipProfile
    from plena_opt.estimate.gpu_queue import EvaluatorStepCosts
    from plena_opt.estimate.gpu_queue import burst_ttft as replay
    from plena_opt.serving import engine_model

    if not isinstance(problem.chip, GpuChipProfile):
        raise PlenaInputError(
            "burst_ttft", "the burst TTFT replays vLLM's scheduler and needs a GPU chip (--chip)"
        )
    if problem.noc is None:
        raise PlenaInputError("noc", "a GPU chip is priced on a node profile: give --noc")
    if budget_tokens is None:
        budget = engine_model("vllm", float(problem.chip.hbm.capacity_bytes.value)).budget_tokens
    else:
        budget = budget_tokens
    if not 1 <= budget <= MAX_BUDGET_TOKENS:
        raise PlenaInputError(
            "max_num_batched_tokens", f"must be 1..{MAX_BUDGET_TOKENS} tokens; got {budget}"
        )
    wl = problem.workload
    costs = EvaluatorStepCosts(problem.model, problem.noc, problem.memory, problem.chip, wl, plan)
    return replay(wl.batch_size, wl.input_seq_len, budget, costs.prefill_seconds,
                  costs.decode_seconds)  # fmt: skip
