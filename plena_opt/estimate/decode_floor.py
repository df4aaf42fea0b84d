"""A floor of a decode step from a plan's footprint: the bytes it must stream (issue 26, r13cold).

``DecodeFloor.seconds(n)``: the time to read, at the memory's usable bandwidth, what a decode step
of ``n`` requests reads at least: the fullest stage's weights on one device, of a MoE stage only
the local experts its tokens reach, and the KV cache of the requests on that device at the mean
decode context, over every pipeline stage. It leaves out the kernels' fixed times, collectives and
host time, so a priced step is several floors (1.3-6 on the benchmark's rows). Nothing reads it as
a figure: the open loop's search starts where Little's law with a few floors puts its root
(``serving.spine.open_near``), which decides only which step costs are priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.estimate.distributed import PlanCost


@dataclass(frozen=True)
class DecodeFloor:
    """Bytes a decode step streams on the fullest device (B) and the rate it reads them (B/s)."""

    fixed_bytes: float  # weights that every step reads (all but the routed experts)
    expert_bytes: float  # one local expert's weights over the stage's MoE layers
    local_experts: int  # routed experts on one device (0: a dense model)
    pairs_per_request: float  # (request, expert) pairs per request that reach one device
    kv_bytes_per_request: float  # one request's KV cache on its device at the mean context
    requests_per_device: float  # requests per device per decoding request (1 / attention DP)
    stages: int  # pipeline stages a token passes
    bandwidth: float  # usable HBM bandwidth (B/s)

    def seconds(self, n: float) -> float:
        """The floor (s) of a decode step of ``n`` (≥ 0) requests."""
        reached = min(self.local_experts, math.ceil(n * self.pairs_per_request))
        read = (self.fixed_bytes + reached * self.expert_bytes
                + n * self.requests_per_device * self.kv_bytes_per_request)  # fmt: skip
        return self.stages * read / self.bandwidth

    @classmethod
    def of(cls, cost: PlanCost, output_len: int) -> DecodeFloor | None:
        """The floor of ``cost``'s plan (priced at one request: its footprint per request);
        None where the memory gives no bandwidth."""
        ctx, d, plan = cost.ctx, cost.shard, cost.plan
        m, w = ctx.model, ctx.workload
        bw = ctx.memory.usable_bandwidth_bytes_per_s
        if not bw:
            return None
        weights, kv = cost.footprint  # fullest stage, one request per device
        held = w.input_seq_len + w.output_seq_len
        mean = w.input_seq_len + (output_len - 1) / 2
        ep = 1 if 1 > d.ep_moe else d.ep_moe  # max(ep_moe, 1)
        local = expert = 0
        if m.num_experts:
            local = (m.num_experts + w.eplb_redundant) // ep
            moe_layers = 0
            for kind, n in cost.stage_kind_counts[0].items():
                if kind.moe:
                    moe_layers += n
            expert = moe_layers * 3 * m.hidden_size * d.expert_ffn * ctx.precision.weight_bytes
        fixed = weights - local * expert
        # the frozen dataclass's fields set without its generated ``__init__`` (r16trim); each
        # ``max(x, 0.0)`` / ``max(ep, 1)`` written as the comparison that picks the same operand
        new = object.__new__(cls)
        new.__dict__.update(
            fixed_bytes=0.0 if 0.0 > fixed else fixed,
            expert_bytes=float(expert),
            local_experts=local,
            pairs_per_request=(m.top_k or 1) / ep,
            kv_bytes_per_request=kv * mean / held,
            requests_per_device=1.0 / (plan.dp * plan.ep),
            stages=plan.pp,
            bandwidth=float(bw),
        )
        return new
