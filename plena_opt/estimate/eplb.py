"""Expert-parallel load balancing (EPLB): redundant expert replicas placed by expert load.

The engines replicate the hottest experts and pack the replicas over the EP ranks so that each
rank's token-expert pairs approach the mean: vLLM ``--enable-eplb --eplb-config
'{"num_redundant_experts": N}'`` (``EPLBConfig.num_redundant_experts``, docs.vllm.ai
vllm/config/parallel; "288 physical experts / 32 EP ranks = 9 local physical experts",
vllm.distributed.eplb.eplb_state), SGLang ``--ep-num-redundant-experts N`` (docs.sglang.io
advanced_features/expert_parallelism) and TensorRT-LLM's ``moe_load_balancer``, all after
DeepSeek's EPLB (github.com/deepseek-ai/EPLB: "duplicates heavy-loaded experts, then
heuristically packs the duplicated experts to GPUs"). Every rank holds ``(E + N) / ep``
physical experts, so ``E + N`` must divide by the EP size.

This module is a deterministic greedy stand-in for those placements (not their code):
replicate one at a time the expert with the highest load per replica, then pack the replicas,
heaviest first, onto the least-loaded rank that still has a free slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from plena_opt.errors import PlenaInputError

FLAG = "eplb_redundant"  # the option's name in errors (CLI ``--eplb-redundant``)
MAX_REDUNDANT = 1 << 16  # bound on N a request may carry (E ≤ 2**16 experts in any catalog model)


@dataclass(frozen=True)
class Placement:
    """Physical experts per EP rank: ``ranks[r]`` lists ``(logical expert, token-expert
    pairs)`` of rank ``r``; ``loads[r]`` is the rank's pairs."""

    ranks: tuple[tuple[tuple[int, int], ...], ...]
    loads: tuple[int, ...]

    @property
    def busiest(self) -> int:
        """Index of the rank with the most pairs (lowest index on ties)."""
        return max(range(len(self.loads)), key=lambda r: (self.loads[r], -r))

    def busiest_counts(self) -> tuple[int, ...]:
        """Pairs of each physical expert on the busiest rank."""
        return tuple(c for _, c in self.ranks[self.busiest])


def check_redundant(redundant: int, num_experts: int, ep: int) -> None:
    """Refuse ``redundant`` replicas the engines would refuse (naming ``eplb_redundant``)."""
    if isinstance(redundant, bool) or not isinstance(redundant, int) or redundant < 0:
        raise PlenaInputError(FLAG, f"{FLAG} must be an integer ≥ 0 (got {redundant!r})")
    if redundant == 0:
        return
    if not num_experts:
        raise PlenaInputError(FLAG, f"{FLAG} needs a mixture-of-experts model (this one is dense)")
    if redundant > num_experts:
        raise PlenaInputError(
            FLAG, f"{FLAG} must be at most the model's {num_experts} experts (got {redundant})"
        )
    if ep <= 1:
        raise PlenaInputError(FLAG, f"{FLAG} needs expert parallelism (EP size > 1; got {ep})")
    if (num_experts + redundant) % ep:
        raise PlenaInputError(
            FLAG,
            f"experts + {FLAG} = {num_experts} + {redundant} must divide by the EP size {ep} "
            "(each rank holds the same number of physical experts)",
        )


def replica_counts(loads: list[int], redundant: int) -> list[int]:
    """Replicas per logical expert: one each, then ``redundant`` more, one at a time, to the
    expert with the highest load per replica (lowest id on ties)."""
    reps = [1] * len(loads)
    for _ in range(redundant):
        best = max(range(len(loads)), key=lambda e: (loads[e] / reps[e], -e))
        reps[best] += 1
    return reps


def _split(c: int, r: int) -> list[int]:
    """``c`` pairs over ``r`` replicas as whole tokens (the first ``c % r`` take one more)."""
    return [c // r + (1 if i < c % r else 0) for i in range(r)]


def place(loads: list[int], ep: int, redundant: int, counts: list[int] | None = None) -> Placement:
    """Greedy EPLB placement of ``len(loads) + redundant`` physical experts on ``ep`` ranks.

    ``loads``: token-expert pairs of each logical expert that the placement is built from (the
    measured or modelled load); ``counts``: the pairs of the step priced on it (default
    ``loads``). Replicas are packed heaviest first (ties: lower expert id) onto the
    least-loaded rank with a free slot (ties: lower rank)."""
    E = len(loads)
    check_redundant(redundant, E, ep)
    counts = loads if counts is None else counts
    slots = (E + redundant) // ep
    reps = replica_counts(loads, redundant)
    phys = []
    for e, r in enumerate(reps):
        phys += [(e, i, c) for i, c in enumerate(_split(loads[e], r))]
    phys.sort(key=lambda p: (-p[2], p[0], p[1]))
    members: list[list[tuple[int, int]]] = [[] for _ in range(ep)]
    rank_load = [0] * ep
    for e, i, c in phys:
        free = [r for r in range(ep) if len(members[r]) < slots]
        r = min(free, key=lambda j: (rank_load[j], j))
        members[r].append((e, i))
        rank_load[r] += c
    ranks = tuple(tuple((e, _split(counts[e], reps[e])[i]) for e, i in m) for m in members)
    return Placement(ranks, tuple(sum(c for _, c in m) for m in ranks))
