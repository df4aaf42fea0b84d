"""KV capacity → batch: the largest global batch whose weights, KV cache and activations fit.

Serving engines reserve a fraction of device memory (vLLM's ``gpu_memory_utilization``, SGLang's
``mem_fraction_static``) and size the KV cache from what is left after the weights. Here the
budget per device is ``memory_fraction × capacity``; a plan fits ``b`` sequences per device when
every pipeline stage's ``weights + KV(b) + activations(b)`` is within the budget, where weights and
KV are the evaluator's own footprint (analytic-model §4.6, ``PlanCost.stage_footprints``) and
activations are the transient working set below. The global batch of ``b`` sequences per device is
``b · dp · ep · pp`` (``micro = ⌈B/pp⌉``, ``b_dev = ⌈micro/(dp·ep)⌉``, §4.3).

Activation working set (a modelling choice of this module, not of the reference): the widest
prefill layer of one device holds, per sequence, ``q = ⌈S_in/cp⌉`` tokens of the residual input and
output (``2·h``) plus the widest intermediate — the Q/K/V projections ``(H_dev + 2·KV_dev)·hd`` or
the FFN gate and up projections ``2·F_dev`` (MoE: ``2·F_e·top_k``, every choice local) — at the
activation storage precision ``aB``. Decode (q = 1) needs less, so prefill bounds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.plan import MAX_WORKLOAD, Plan

DEFAULT_MEMORY_FRACTION = 0.9  # vLLM's default gpu_memory_utilization (vLLM engine arguments)


def check_memory_fraction(value: float) -> float:
    """``value`` if it is a fraction in (0, 1]; else raise naming ``memory_fraction``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise PlenaInputError(
            "memory_fraction", f"memory_fraction must be in (0, 1] (got {value!r})"
        )
    return float(value)


@dataclass(frozen=True)
class CapacityBound:
    """The largest batch a plan holds (sequences; None when the memory has no capacity).

    ``budget_bytes`` = fraction × capacity per device; ``weight_bytes`` and
    ``kv_bytes_per_sequence`` / ``activation_bytes_per_sequence`` are those of the binding
    (fullest) stage per device, for one sequence per device.
    """

    plan: Plan
    max_batch: int | None
    sequences_per_device: int | None
    budget_bytes: float | None
    weight_bytes: float
    kv_bytes_per_sequence: float
    activation_bytes_per_sequence: float

    @property
    def replicas(self) -> int:
        """Global sequences per sequence slot of one device: ``dp · ep · pp``."""
        p = self.plan
        return p.dp * p.ep * p.pp

    def bound_at(self, batch: int, next_batch: int | None) -> bool:
        """Whether serving ``batch`` is capacity-bound: the next larger batch searched (or, with
        none, one more sequence slot per device) would not fit."""
        if self.max_batch is None:
            return False
        nxt = next_batch if next_batch is not None else batch + self.replicas
        return batch <= self.max_batch < nxt


def activation_bytes_per_sequence(cost: PlanCost) -> float:
    """Transient prefill working set of one sequence on one device (bytes; module docstring)."""
    m, d, prec = cost.ctx.model, cost.shard, cost.ctx.precision
    qkv = (d.heads + 2 * d.kv_heads) * m.head_dim
    mlp = 2 * d.expert_ffn * m.top_k if m.num_experts else 2 * d.ffn
    return float(d.q_prefill * (2 * m.hidden_size + max(qkv, mlp)) * prec.activation_bytes)


def capacity_bound(
    cost: PlanCost, memory_fraction: float = 1.0, *, include_activations: bool = True
) -> CapacityBound:
    """The largest batch ``cost.plan`` serves within ``memory_fraction`` of device memory."""
    fraction = check_memory_fraction(memory_fraction)
    act = activation_bytes_per_sequence(cost) if include_activations else 0.0
    stages0 = cost.stage_footprints(0)
    stages1 = cost.stage_footprints(1)
    cap = cost.ctx.memory.capacity_bytes
    worst = max(range(len(stages1)), key=lambda i: sum(stages1[i]))
    w, kv = stages1[worst]
    if cap is None:
        return CapacityBound(cost.plan, None, None, None, w, kv, act)
    budget = fraction * float(cap)

    def fits(b: int) -> bool:
        return all(wb + kb + b * act <= budget for wb, kb in cost.stage_footprints(b))

    # KV is linear in b per stage: a closed-form guess, then corrected by the exact predicate.
    guesses = [
        (budget - w0) / (k1 + act) for (w0, _), (_, k1) in zip(stages0, stages1, strict=True)
    ]
    limit = MAX_WORKLOAD["batch_size"] // (cost.plan.dp * cost.plan.ep * cost.plan.pp)
    b = int(max(0.0, min(min(guesses), float(limit))))
    while b > 0 and not fits(b):
        b -= 1
    while b < limit and fits(b + 1):
        b += 1
    replicas = cost.plan.dp * cost.plan.ep * cost.plan.pp
    return CapacityBound(cost.plan, b * replicas, b, budget, w, kv, act)


def auto_batch_sizes(bounds: list[CapacityBound], floor: int = 1) -> list[int]:
    """``--batch-sizes auto``: powers of two from ``floor`` up to the largest plan's bound.

    Raises when no plan reports a bound (the memory has no capacity) or none fits one sequence.
    """
    tops = [b.max_batch for b in bounds if b.max_batch is not None]
    if not tops:
        raise PlenaInputError(
            "batch_sizes",
            "--batch-sizes auto needs a memory capacity (give a memory profile with a capacity "
            "or --fixed-capacity-gib)",
        )
    top = max(tops)
    if top < floor:
        raise PlenaInputError(
            "batch_sizes",
            "--batch-sizes auto: no plan fits even one sequence per device in the memory budget",
        )
    out, b = [], floor
    while b <= top:
        out.append(b)
        b *= 2
    return out
