"""The pools of a disaggregated MoE row: each worker its own attention TP x DP and MoE split.

``serving.pools.pool_steps`` prices workers that are attention-TP plans (``Plan(tp=…)``). A
disaggregated MoE deployment (SGLang / TensorRT-LLM / vLLM prefill and decode workers with
attention data parallelism and expert parallelism, e.g. DeepSeek-R1 decode over 32 GPUs of an
NVL72 rack) runs each worker as the aggregated plan of its row fields (``Plan(tp, ep=dp,
moe_tp_mode, moe_tp)``, ``validate.serving_rows._split``) on the first devices of the NoC (the
evaluator's sub-cluster, ``estimate.disaggregated.sub_noc``). Queueing over the pools is
``serving.disaggregated`` unchanged: a pool's "TP" there is a worker's GPUs (its only use is the
GPU count). A request's KV lives on one attention-DP rank (``tp`` GPUs) of the prefill worker
and moves to one rank of a decode worker: the transfer is ``serving.pools.transfer_seconds`` with
each DP rank as a unit of ``tp`` GPUs, laid out as the workers are (DP ranks contiguous).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel
    from plena_opt.validate.serving_rows import Deployment


def moe_pool_steps(d: Deployment, parts: tuple) -> tuple[StepModel, StepModel, float]:
    """(prefill worker's step model, decode worker's, KV transfer seconds per request) of a
    disaggregated MoE deployment; ``parts``: ``serving_score._parts`` of ``d`` (model, NoC,
    memory, chip, estimate Workload, engine)."""
    from dataclasses import replace

    from plena_opt.errors import PlenaInputError
    from plena_opt.estimate import Plan
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.disaggregated import kv_bytes_per_sequence, sub_noc
    from plena_opt.serving.disaggregated import Pools
    from plena_opt.serving.pools import transfer_seconds
    from plena_opt.serving.steps import StepModel

    model, noc, memory, chip, wl, eng = parts
    assert d.pools is not None and d.pool_plans is not None
    steps = []
    for role, (tp, dp, mode, moe_tp, redundant) in zip(("prefill", "decode"), d.pool_plans,
                                                       strict=True):  # fmt: skip
        try:
            sub = sub_noc(noc, tp * dp)
        except PlenaInputError as exc:
            raise PlenaInputError(f"{role}_tp_size", exc.rule) from None
        plan = Plan(tp=tp, ep=dp, moe_tp_mode=mode, moe_tp=moe_tp)
        pool_wl = replace(wl, eplb_redundant=redundant)  # the pool's own EPLB replicas
        steps.append(StepModel.from_problem(model, sub, memory, chip, pool_wl, plan, eng))
    (ptp, pdp, *_), (dtp, ddp, *_) = d.pool_plans
    ranks = Pools(d.pools[0] * pdp, ptp, d.pools[2] * ddp, dtp)
    ctx = EstimateContext(model, sub_noc(noc, 1), memory, replace(wl, batch_size=1), chip)
    return steps[0], steps[1], transfer_seconds(noc, ranks, kv_bytes_per_sequence(ctx))


def launch_capped(step: StepModel, cap: int | None, role: str) -> StepModel:
    """``step`` with its engine's running cap no more than ``cap``, the requests the pool's
    launch file lets one worker run (``--max-num-seqs`` / ``--max-running-requests``; None:
    none written). A worker with attention-DP ranks is refused naming the pool's field: its
    cap per rank is not modelled (``serving.prefill_batch``)."""
    from dataclasses import replace

    from plena_opt.serving.steps import StepModel
    from plena_opt.validate.serving_rows import Refused

    eng = step.engine
    if cap is None or (eng.max_running is not None and eng.max_running <= cap):
        return step
    if step.attention_dp is not None:
        raise Refused(f"{role} pool: a running cap ({cap}) on attention-DP ranks is not modelled")
    return StepModel(step.costs, replace(eng, max_running=cap), step.gpus, step.attention_dp)
