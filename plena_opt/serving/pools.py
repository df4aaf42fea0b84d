"""The step models and KV transfer of a disaggregated deployment (``serving.disaggregated``).

Each pool worker is its plan (``Plan(tp=…)``) on the first ``tp`` devices of the NoC
(``estimate.disaggregated.sub_noc``, the evaluator's sub-cluster). The deployment lays the
prefill pool on devices ``[0, P·tp_p)`` and the decode pool right after it; a request's prompt
KV (``estimate.disaggregated.kv_bytes_per_sequence``: every layer and KV head, at the KV write
precision) goes from its prefill worker to a decode worker as one stage of flows on the
DeepStack network model of the whole NoC (device i → device i when both pools have the same TP,
else every prefill device to every decode device in equal shares). Requests spread over the
pairs, so the transfer time is the mean over pairs, taken on up to ``PAIR_SAMPLES`` evenly
spaced workers of each pool (pairs inside one node ride NVLink, the others the NIC).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from deepstack import NocProfile

    from plena_opt.estimate.plan import Workload
    from plena_opt.serving.disaggregated import Pools
    from plena_opt.serving.engines import EngineModel
    from plena_opt.serving.steps import StepModel

PAIR_SAMPLES = 4  # workers of each pool whose pairs are priced (16 pairs at most)


def _spread(n: int) -> list[int]:
    k = min(n, PAIR_SAMPLES)
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})


def transfer_seconds(noc: NocProfile, pools: Pools, nbytes: int) -> float:
    """Mean seconds to move ``nbytes`` of prompt KV from a prefill worker to a decode worker."""
    from deepstack.stage import StagePattern

    from plena_opt.estimate.distributed import shared_network

    if pools.gpus > noc.num_devices:
        raise PlenaInputError(
            "decode_workers",
            f"the pools need {pools.gpus} GPUs; {noc.name} has {noc.num_devices}",
        )
    router = shared_network(noc).router
    tp_p, tp_d = pools.prefill_tp, pools.decode_tp
    base = pools.prefill_workers * tp_p
    one_to_one = tp_p == tp_d
    flows = tp_p if one_to_one else tp_p * tp_d
    payload = math.ceil(nbytes / flows)
    times = []
    for i in _spread(pools.prefill_workers):
        for j in _spread(pools.decode_workers):
            src, dst = i * tp_p + np.arange(tp_p), base + j * tp_d + np.arange(tp_d)
            if not one_to_one:
                src, dst = np.repeat(src, tp_d), np.tile(dst, tp_p)
            cost = StagePattern(router, src, dst, np.ones(len(src), dtype=np.int64)).cost(payload)
            times.append(cost.hop_seconds + cost.link_seconds)
    return float(np.mean(times))


def pool_steps(
    model: object,
    noc: NocProfile,
    memory: object,
    chip: object,
    workload: Workload,
    pools: Pools,
    engine: EngineModel,
    memory_fraction: float | None = None,
) -> tuple[StepModel, StepModel, float]:
    """(prefill worker's step model, decode worker's, KV transfer seconds per request). The
    decode worker's running cap is no more than the requests its KV pool holds at the memory
    setting ``memory_fraction`` (None: the engine's default; ``kv_admission.admitted``)."""
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.disaggregated import kv_bytes_per_sequence, sub_noc
    from plena_opt.estimate.plan import Plan
    from plena_opt.serving.kv_admission import admitted
    from plena_opt.serving.steps import StepModel

    steps = []
    for field, tp in (("prefill_tp", pools.prefill_tp), ("decode_tp", pools.decode_tp)):
        try:
            sub = sub_noc(noc, tp)
        except PlenaInputError as exc:
            raise PlenaInputError(field, exc.rule) from None
        eng = engine
        if field == "decode_tp":
            parts = (model, sub, memory, chip, workload)
            eng = admitted(engine, parts, Plan(tp=tp), memory_fraction)[0]
        steps.append(StepModel.from_problem(model, sub, memory, chip, workload, Plan(tp=tp), eng))
    one = replace(workload, batch_size=1)
    ctx = EstimateContext(model, sub_noc(noc, 1), memory, one, chip)  # type: ignore[arg-type]
    return steps[0], steps[1], transfer_seconds(noc, pools, kv_bytes_per_sequence(ctx))
