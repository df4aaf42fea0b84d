"""What the launch files cap per engine: the requests one engine runs at once (the plan's batch,
``running_cap``; ``running_argv``: none on a prefill server) and the tokens of one step
(``budget_argv``: the budget the plan was priced with, ``ExportSpec.budgets``)."""

from __future__ import annotations

from math import ceil

from plena_opt.estimate.plan import Plan
from plena_opt.export.launch import ENGINES, ExportSpec


def budget_argv(engine: str, spec: ExportSpec) -> list[str]:
    """The step token budget ``engine`` was priced with (``spec.budgets``) as its launch
    argument (``engines.json`` ``budget``: vLLM --max-num-batched-tokens, SGLang
    --chunked-prefill-size, TensorRT-LLM --max_num_tokens); none where it is not known."""
    budget = dict(spec.budgets).get(engine)
    return [] if budget is None else [ENGINES[engine]["flags"]["budget"], str(budget)]


# The launch option that caps the requests one engine runs at once, per engine.
RUNNING_CAP_FLAG = {"vllm": "max_num_seqs", "sglang": "max_running_requests",
                    "trtllm": "max_batch_size"}  # fmt: skip


def running_argv(engine: str, role: str, plan: Plan, batch: int) -> list[str]:
    """The argument capping the requests one server of ``role`` runs (``engines.json``
    ``max_seqs``) when it exports ``plan``'s global ``batch`` (sequences): ``sglang_running``
    for SGLang, ``ceil(batch/(dp·ep))`` per DP / attention-DP rank for vLLM and TensorRT-LLM.
    None on a prefill server of a disaggregated deployment: it runs the engine's default cap, a
    step taking the waiting prompts the step token budget holds (``serving.prefill_batch``, as
    ``search`` / ``estimate`` price the prefill pool; issue 23, r18pfexp)."""
    if role == "prefill":
        return []
    cap = sglang_running(plan, batch) if engine == "sglang" else ceil(batch / (plan.dp * plan.ep))
    return [ENGINES[engine]["flags"]["max_seqs"], str(cap)]


def sglang_running(plan: Plan, batch: int) -> int:
    """SGLang's ``--max-running-requests`` for the plan's global ``batch``: plain ``--dp-size``
    applies the flag whole to each worker, so each gets ``ceil(batch/dp)``."""
    return ceil(batch / plan.dp)


def running_cap(engine: str, plan: Plan, batch: int) -> int:
    """Requests one DP replica of ``plan`` (its ``tp·pp·cp·ep`` devices) runs at once when the
    ``export.engines`` builders export the plan's global ``batch`` (sequences). vLLM and
    TensorRT-LLM write ``ceil(batch/(dp·ep))`` per DP / attention-DP rank, ``ep`` ranks to a
    replica; SGLang writes
    ``ceil(batch/dp)`` (``batch`` at dp = 1), which 0.5.23 applies whole to each worker of plain
    ``--dp-size`` and as ``max(1, flag // dp-size)`` per rank under ``--enable-dp-attention``
    (``attn_dp_size``; sglang/srt/model_executor/pool_configurator.py,
    requested_max_running_requests_per_worker)."""
    if engine == "sglang":
        flag = sglang_running(plan, batch)
        return max(1, flag // plan.ep) * plan.ep if plan.moe_tp and plan.ep > 1 else flag
    return ceil(batch / (plan.dp * plan.ep)) * plan.ep
