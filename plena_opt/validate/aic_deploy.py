"""The step token budget of a deployment AIConfigurator's generator wrote (NVIDIA's gap analyses).

The undated rows of the serving file (no ``measured_on``: NVIDIA's published gap analyses, not
InferenceX dumps) measure aggregated workers that AIConfigurator recommended and deployed with
its own generator. That generator does not leave the engines' per-step token budget at its
default (vLLM 8192, TensorRT-LLM 8192, SGLang 8192/16384 prompt tokens): its rules
(``src/aiconfigurator/generator/rule_plugin/{vllm,trtllm,sglang}.rule`` and their
``benchmark/`` variants, ai-dynamo/aiconfigurator) write

* vLLM ``agg max_num_tokens = max_batch_size + isl + 1500`` (``--max-num-batched-tokens``);
* TensorRT-LLM the same ``max_num_tokens``, rounded up to ``tokens_per_block`` (32);
* SGLang ``max_prefill_tokens = isl + 1500``: a prefill batch takes waiting prompts while that
  budget is not yet spent (``PrefillAdder.budget_state``: ``rem_input_tokens <= 0`` stops it), so
  the last prompt may overrun it by up to ``isl − 1`` tokens, and ``chunked_prefill_size`` (the
  engine default) still caps the batch.

At the row's ``batch_size`` (the concurrency, in every undated row) a step of a 1024-token grid
holds two or three prompts, not eight: lock-step clients (fixed lengths) are prefilled in small
groups. Not fitted: the budget is the generator's formula. On the shipped file it moves the
vLLM grid's TTFT MAPE from 53 to 24 % (its signed error from +65 % at 1k prompts and −41 % at
4k to −6 % and −36 %); see README "Serving under load" for the other engines.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving import EngineModel
    from plena_opt.validate.serving_rows import ServingRow

AIC_PROMPT_HEADROOM = 1500  # tokens the generator adds to isl (+ max_batch_size) per step
TRTLLM_TOKENS_PER_BLOCK = 32  # the generator's tokens_per_block default: max_num_tokens rounds up


def generated_batch(row: ServingRow) -> int | None:
    """The ``batch_size`` of an aggregated row deployed by AIConfigurator's generator (an
    undated row with a batch size), else None (the engine keeps its default budget)."""
    if row.get("measured_on") or row.get("mode") != "agg":
        return None
    v = row.get("batch_size")
    return int(v) if v.isdigit() and int(v) > 0 else None


def generated_engine(eng: EngineModel, batch: int, isl: int) -> EngineModel:
    """``eng`` with the step budget the generator writes for ``batch`` and prompts of ``isl``."""
    if eng.name == "sglang":  # max_prefill_tokens, overrun by the last prompt, within the chunk
        budget = min(eng.budget_tokens, isl + AIC_PROMPT_HEADROOM + isl - 1)
    else:
        budget = batch + isl + AIC_PROMPT_HEADROOM
        if eng.name == "trtllm":
            budget = math.ceil(budget / TRTLLM_TOKENS_PER_BLOCK) * TRTLLM_TOKENS_PER_BLOCK
    return replace(eng, budget_tokens=budget)
