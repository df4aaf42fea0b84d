"""MoE routing: the busiest EP rank's load per phase and its expert compute.

Analytic-model §4.4–§4.5.

Balanced routing spreads tokens evenly; ``power_law`` draws skewed per-expert loads for each
step's tokens (``deepstack.power_law``); ``random`` and user traces count the busiest (window,
rank) from routing rows below 4096 micro-batch tokens and use DeepStack's closed-form imbalance
at or above (network-model §11.2–§11.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import ceil

import numpy as np
from deepstack import moe as ds_moe
from deepstack.power_law import busiest_block, power_law_counts

from plena_opt.chip import PerfModel
from plena_opt.models import ModelSpec

CLOSED_FORM_TOKENS = 4096  # compute side: closed form at micro-batch tokens ≥ 4096 (§11.3)
# ``power_law`` routing: the exponent of the per-expert load law (deepstack.power_law), by HF
# ``model_type``. Values: NVIDIA AIConfigurator's estimates from measured serving latency on
# CNN/DailyMail and OpenOrca (ai-dynamo/aiconfigurator, collector/README_power_law.md, "Alpha
# Parameter Guide"): 1.01 for DeepSeek-V3/R1, 1.2 for Qwen3-235B, and 1.2 is AIC's default for
# every MoE model (ModelConfig.workload_distribution = "power_law" → power_law_1.2). Not fitted
# here.
POWER_LAW_ALPHA_DEFAULT = 1.2
POWER_LAW_ALPHA = {"deepseek_v3": 1.01, "deepseek_v2": 1.01}
POWER_LAW_SEED = 0
# ``power_law`` routing over EP ranks: the draw's expert ids carry no load meaning, except that
# its cap step (``deepstack.power_law._cap``) moves the overflow onto the lowest-numbered empty
# experts, which at decode token counts piles it into the first EP block (DeepSeek-R1, 4 tokens,
# EP 8: 20 of the 32 pairs on rank 0, 18 active experts; the kernel table's TP1 × EP8 nvfp4
# power_law_1.01 row at 4 tokens, 0.044 ms, sits by the TP8 × EP1 row, 0.037 ms,
# ../shared/data/kernels/b200_sxm_moe_vllm-0.19.0.csv.gz). An engine's experts sit on ranks by
# id, unrelated to load, so the ranks hold random expert sets: ``EP_PLACEMENT_DRAWS`` seeded
# random placements, the one whose busiest rank is nearest their mean priced. Not fitted.
EP_PLACEMENT_DRAWS = 16


def power_law_alpha(model: ModelSpec) -> float:
    """The expert-load power-law exponent ``power_law`` routing uses for ``model``."""
    return POWER_LAW_ALPHA.get(model.model_type, POWER_LAW_ALPHA_DEFAULT)


@dataclass(frozen=True)
class MoeLoad:
    """Load of the busiest EP rank for one phase (tokens, token-expert pairs, per-expert counts)."""

    tokens_local: int
    pairs: int
    expert_counts: tuple[int, ...]
    imbalance: float
    source: str

    @property
    def active_experts(self) -> int:
        return sum(1 for c in self.expert_counts if c > 0)

    def to_dict(self) -> dict:
        return {
            "tokens_per_rank": self.tokens_local,
            "token_expert_pairs_on_busiest_rank": self.pairs,
            "active_experts_on_busiest_rank": self.active_experts,
            "imbalance": self.imbalance,
            "source": self.source,
        }


def typical_busiest_block(counts: np.ndarray, ep: int) -> np.ndarray:
    """The busiest EP rank's per-expert counts under a random expert placement: of
    ``EP_PLACEMENT_DRAWS`` seeded permutations of the experts, the one whose busiest rank's
    pairs are nearest the mean over them (the first of equals); ``counts`` as is at ep = 1."""
    if ep <= 1 or counts.size % ep:  # (``busiest_block`` refuses an ep that does not divide)
        return busiest_block(counts, ep)
    placed = counts[_placements(counts.size)].reshape(EP_PLACEMENT_DRAWS, ep, -1)
    sums = placed.sum(axis=2)  # [draw, rank] pairs
    rank = sums.argmax(axis=1)  # each draw's busiest rank (the first of equals)
    pairs = sums[np.arange(EP_PLACEMENT_DRAWS), rank].astype(float)
    i = int(np.argmin(np.abs(pairs - pairs.mean())))
    return placed[i, rank[i]].copy()


@lru_cache(maxsize=16)
def _placements(experts: int) -> np.ndarray:
    """The ``EP_PLACEMENT_DRAWS`` seeded permutations of ``experts`` expert ids, one a row (the
    same for every call: drawn once per expert count, read-only)."""
    draws = [
        np.random.default_rng(POWER_LAW_SEED + seed).permutation(experts)
        for seed in range(EP_PLACEMENT_DRAWS)
    ]
    out = np.stack(draws)
    out.flags.writeable = False
    return out


def busiest_rank_load(
    model: ModelSpec,
    *,
    micro: int,
    q: int,
    dp: int,
    tp_moe: int,
    ep_moe: int,
    routing: str,
    rows: np.ndarray | None,
    redundant: int = 0,
) -> MoeLoad:
    """Busiest-rank load for ``micro`` sequences of ``q`` tokens (§4.5).

    ``rows`` are the routing rows (expert ids, one row per token, top-k columns) for non-balanced
    routing; ``routing`` labels the source. ``redundant`` > 0: EPLB replicas (``estimate.eplb``)
    placed by the per-expert load, the busiest rank of that placement priced.
    """
    closed = routing not in ("balanced", "power_law") and micro * q >= CLOSED_FORM_TOKENS
    if redundant and not closed:  # closed form: random fluctuation, which EPLB does not remove
        return _eplb_load(model, micro, q, dp, ep_moe, routing, rows, redundant)
    E, k = model.num_experts, model.top_k
    tokens = micro * q
    group_tokens = ceil(micro / dp) * q
    local_experts = E // ep_moe
    tl = ceil(group_tokens / ep_moe)
    balanced_pairs = ceil(group_tokens * k / ep_moe)
    if routing == "balanced":
        per_expert = ceil(group_tokens * k / E)
        # ``MoeLoad(tl, balanced_pairs, (per_expert,) * local_experts, 1.0, "balanced")``
        # without the frozen dataclass's generated ``__init__`` (every field given; r16trim)
        load = object.__new__(MoeLoad)
        load.__dict__.update(tokens_local=tl, pairs=balanced_pairs,
                             expert_counts=(per_expert,) * local_experts, imbalance=1.0,
                             source="balanced")  # fmt: skip
        return load
    if routing == "power_law":
        alpha = power_law_alpha(model)
        all_counts = power_law_counts(group_tokens, E, k, alpha, POWER_LAW_SEED)
        counts = tuple(int(c) for c in typical_busiest_block(all_counts, ep_moe))
        pairs = sum(counts)
        imbalance = pairs / (group_tokens * k / ep_moe)
        return MoeLoad(tl, pairs, counts, imbalance, f"power_law (alpha {alpha:g})")
    if tokens < CLOSED_FORM_TOKENS:
        counts = ds_moe.busiest_rank_counts(rows[:tokens], E, ep_moe, group_tokens)
        counts = tuple(int(c) for c in counts)
        pairs = sum(counts)
        return MoeLoad(tl, pairs, counts, pairs / (group_tokens * k / ep_moe), routing)
    ratio = ds_moe.estimate_moe_routing_imbalance_overhead(E, k, ep_moe, group_tokens, tp_moe * dp)
    pairs = round(tl * k * ratio)
    counts = tuple(int(c) for c in ds_moe.estimate_experts_activated(pairs, local_experts))
    return MoeLoad(tl, pairs, counts, pairs / balanced_pairs, f"{routing} (DeepStack estimate)")


def _eplb_load(
    model: ModelSpec, micro: int, q: int, dp: int, ep: int, routing: str,
    rows: np.ndarray | None, redundant: int,
) -> MoeLoad:  # fmt: skip
    """Busiest rank under a greedy EPLB placement of ``redundant`` replicas.

    The placement is built from the modelled (long-run) expert load, as the engines build it
    from a moving window of measured loads: balanced and ``random``: even; ``power_law``: the
    law's counts; a trace: its expert counts over all its rows. It is priced on the step's own
    counts (its first ``ceil(micro / dp)·q`` routing rows). At or above ``CLOSED_FORM_TOKENS``
    random / trace routing keeps the closed-form busiest rank (per-step fluctuation, which a
    static placement does not remove)."""
    from plena_opt.estimate.eplb import place

    E, k = model.num_experts, model.top_k
    group_tokens = ceil(micro / dp) * q
    tl = ceil(group_tokens / ep)
    if routing == "balanced":
        loads = [ceil(group_tokens * k / E)] * E
        step = loads
    elif routing == "power_law":
        alpha = power_law_alpha(model)
        loads = [int(c) for c in power_law_counts(group_tokens, E, k, alpha, POWER_LAW_SEED)]
        step = loads
    else:
        step = np.bincount(rows[:group_tokens].ravel(), minlength=E).tolist()
        if routing == "random":  # uniform in expectation: no expert is hot in the long run
            loads = [ceil(group_tokens * k / E)] * E
        else:
            loads = np.bincount(rows.ravel(), minlength=E).tolist()
    placed = place(loads, ep, redundant, step)
    counts = placed.busiest_counts()
    pairs = sum(counts)
    label = f"{routing}, EPLB {redundant} redundant experts (greedy placement)"
    return MoeLoad(tl, pairs, counts, pairs / (group_tokens * k / ep), label)


def moe_cycles(perf: PerfModel, model: ModelSpec, load: MoeLoad, expert_ffn: int, mode: str) -> int:
    """Routed-expert compute on the busiest EP rank (cycles, §4.4 ``moe_cycles``)."""
    p = perf
    M, Bl, Vl = p.MLEN, p.BLEN, p.VLEN
    h, E, k, Fe = model.hidden_size, model.num_experts, model.top_k, expert_ffn
    tl, P = load.tokens_local, load.pairs
    pf = p.I("H_PREFETCH_M")
    cyc = ceil(h / Vl) * p.I("V_BASIC") * 4 * tl
    if mode == "prefill":
        cyc += (4 + ceil(h / M) * p.I("M_MM") + pf) * ceil(tl / Bl) * ceil(E / Bl)
    else:
        cyc += tl * (4 + ceil(h / M) * p.I("M_MV") + pf) * ceil(E / Bl)
    cyc += (4 + ceil(E / Vl) * p.I("V_TOPK")) * tl
    cyc += tl * ceil(k / Vl) * (p.I("V_EXP_V") + p.I("V_RED_MAX") + p.I("V_BASIC"))
    if mode == "prefill":
        up = 4 + ceil(h / M) * p.I("M_MM") + pf
        down = 4 + ceil(Fe / M) * p.I("M_MM") + pf
        for n in load.expert_counts:
            if n > 0:
                cyc += up * ceil(n / Bl) * ceil(2 * Fe / Bl) + down * ceil(n / Bl) * ceil(h / Bl)
    else:
        cyc += P * (4 + ceil(h / M) * p.I("M_MV") + pf) * ceil(2 * Fe / Bl)
        cyc += P * (4 + ceil(Fe / M) * p.I("M_MV") + pf) * ceil(h / Bl)
    cyc += P * ceil(Fe / Vl) * 6 * p.I("V_BASIC")
    cyc += tl * k * ceil(h / Vl) * (p.I("V_MUL_VV") + p.I("V_ADD_VV"))
    return cyc
