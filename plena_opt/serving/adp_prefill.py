"""Prompts prefilled side by side on attention-DP ranks held together by TensorRT-LLM's balancing.

With attention DP each rank prefills its own requests' prompts, and every rank of the engine
waits for the slowest at each MoE layer, so a step carrying one rank's prompt chunk lasts that
chunk's prefill for all of them. TensorRT-LLM's attention-DP balancing (``attention_dp_config.
enable_balance``, set by the InferenceX DeepSeek-R1 and gpt-oss recipes: ``EngineModel.
adp_timeout_iters`` > 0) holds prompts until every rank has one or ``T`` steps have passed
(``admission_waits.adp_balance_steps``), so a released group is prefilled on ``g`` ranks at once
and the ranks' prefills overlap: the engine pays one step of ``g`` prompts (the evaluator's
prefill of ``g`` prompts on the attention-DP plan: one per rank, their MoE tokens together) per
``g`` prompts, not one per prompt.

``g``: when the ranks fill before the timeout (``k·H(k) / λ < T``, the coupon-collector count of
arrivals ``adp_balance_steps`` uses, ``admission_waits.arrivals_to_cover``; ``λ`` arrivals a
step) every rank holds a prompt: ``g = k``;
else a release carries the ``λ·T`` arrivals of one timeout, landing on ranks at random:
``g = k·(1 − (1 − 1/k)^(λT))`` distinct ranks (at least 1). Without balancing, or with one rank,
``g = 1``. Nothing is fitted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.serving.admission_waits import arrivals_to_cover

if TYPE_CHECKING:
    from plena_opt.serving.engines import EngineModel


def ranks_prefilling_together(eng: EngineModel, arrivals_per_step: float) -> float:
    """Attention-DP ranks that prefill a released group of prompts in the same step (module
    docstring); 1 when the engine does not balance prompts over attention-DP ranks."""
    k, t = eng.adp_ranks, float(eng.adp_timeout_iters)
    if k <= 1 or t <= 0 or arrivals_per_step <= 0:
        return 1.0
    cover = arrivals_to_cover(k)
    if cover / arrivals_per_step < t:
        return float(k)
    g = k * (1.0 - (1.0 - 1.0 / k) ** (arrivals_per_step * t))
    return g if g > 1.0 else 1.0
