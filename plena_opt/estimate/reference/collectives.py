"""Each collective of one layer, and the pipeline transfer, as its own function (§4.4, §4.7).

Byte counts are per device and truncated to whole bytes, as the reference passes ``int(n)``.
The price of one call (seconds, NoC energy in pJ) is the network's (``deepstack``): the same
figure ``estimate.comm.layer_collectives`` gets through its memo, asked here every time.
"""

from __future__ import annotations

from deepstack import ParallelScheme

from plena_opt.estimate.comm import (
    EP_ROUTED_TOKENS,
    FREE,
    Cost,
    ep_exchange,
    flat_expert_scheme,
    replicated_expert_parallel,
)
from plena_opt.estimate.layer import LayerKind
from plena_opt.estimate.moe_load import MoeLoad
from plena_opt.estimate.reference.layout import PlanLayout


def _price(lay: PlanLayout, op: str, scheme: ParallelScheme, dim: str, nbytes: int) -> Cost:
    """One collective ``op`` over the ``dim`` groups of ``scheme`` carrying ``nbytes`` each."""
    if nbytes <= 0:
        return FREE
    return Cost(*lay.ctx.net.price(op, scheme, dim, nbytes))


def _reduced_bytes(lay: PlanLayout) -> float:
    """Bytes per element a TP all-reduce carries: bf16 on a GPU whatever the weight format
    (``GPU_REDUCE_BYTES``), else the precision's activations."""
    opts = lay.ctx.pricer.collective_options(None)
    return lay.shape.precision.activation_bytes if opts.reduce_bytes is None else opts.reduce_bytes


def tp_all_reduce(lay: PlanLayout, q: int) -> Cost:
    """One TP all-reduce of a layer's partial sums: ``b_dev · q · h`` elements over the
    attention TP group (zero at tp = 1). A dense layer runs two (after attention, after the
    FFN); a MoE layer one, plus one for TP-split shared experts unless a GPU's fused MoE
    carries them (``tp_all_reduces``)."""
    if lay.plan.tp <= 1:
        return FREE
    h = lay.ctx.model.hidden_size
    nbytes = int(lay.shard.b_dev * q * h * _reduced_bytes(lay))
    return _price(lay, "all_reduce", lay.dense, "tp", nbytes)


def tp_all_reduces(lay: PlanLayout, kind: LayerKind) -> int:
    """How many TP all-reduces one layer of ``kind`` runs (see ``tp_all_reduce``)."""
    if not kind.moe:
        return 2
    d = lay.shard
    carried = lay.ctx.pricer.collective_options(None).shared_with_experts
    fused = carried and d.tp_moe == lay.plan.tp and d.ep_moe == 1
    return 1 + int(bool(d.shared_ffn) and lay.plan.tp > 1 and not fused)


def replicated_experts(lay: PlanLayout) -> bool:
    """A GPU's experts split EP over exactly the attention TP group: no token exchange, the
    routed and shared experts summed by one TP all-reduce (``comm.replicated_expert_parallel``)."""
    carried = lay.ctx.pricer.collective_options(None).shared_with_experts
    return bool(carried) and replicated_expert_parallel(lay.shape)


def cp_attention_combine(lay: PlanLayout) -> Cost:
    """Decode with context parallelism: the partial attention outputs (``b_dev · H/tp · d``
    elements) all-reduced over the CP group."""
    m, d = lay.ctx.model, lay.shard
    nbytes = int(d.b_dev * d.heads * m.head_dim * lay.shape.precision.activation_bytes)
    return _price(lay, "all_reduce", lay.dense, "cp", nbytes)


def cp_kv_all_gather(lay: PlanLayout) -> Cost:
    """Prefill with context parallelism: every rank gathers the whole prompt's K and V
    (``2 · b_dev · S_in · KV/tp · d`` elements at the KV write precision)."""
    m, d, w = lay.ctx.model, lay.shard, lay.ctx.workload
    nbytes = int(
        2 * d.b_dev * w.input_seq_len * d.kv_heads * m.head_dim * lay.shape.precision.kv_write_bytes
    )
    return _price(lay, "all_gather", lay.dense, "cp", nbytes)


def _ep_exchange(lay: PlanLayout, q: int, load: MoeLoad) -> tuple[Cost, Cost]:
    """(dispatch, combine): one EP all-to-all each way of a micro-batch's routed tokens, lane
    by lane over the moe_ep ranks or flat over the whole expert group; routed row by row below
    ``EP_ROUTED_TOKENS`` tokens, in closed form at the busiest rank's imbalance above (as the
    chip kind carries them: ``comm.ep_exchange``)."""
    d = lay.shard
    tokens = d.micro * q
    rows = lay.rows[:tokens] if tokens < EP_ROUTED_TOKENS else None  # drawn when moe_ep > 1
    opts = lay.ctx.pricer.collective_options(None)
    scheme = lay.moe if d.moe_lanes else flat_expert_scheme(lay.moe)
    return ep_exchange(lay.ctx.net, lay.shape, scheme, d.micro, q, load, rows,
                       opts.distinct_ranks, opts.combine_bytes)  # fmt: skip


def moe_dispatch(lay: PlanLayout, q: int, load: MoeLoad) -> list[Cost]:
    """Sending each token to its experts: the EP all-to-all (moe_ep > 1), and where the
    expert TP ranks are not lane-wise an all-gather over them of the tokens routed to their
    group (the busiest group's share ``min(T·moe_ep, T·k·imbalance)``, ``T`` its local tokens)."""
    d, m = lay.shard, lay.ctx.model
    out = []
    if d.ep_moe > 1:
        out.append(_ep_exchange(lay, q, load)[0])
    if not d.moe_lanes:
        received = min(load.tokens_local * d.ep_moe, load.tokens_local * m.top_k * load.imbalance)
        nbytes = int(received * m.hidden_size * lay.shape.precision.activation_bytes)
        out.append(_price(lay, "all_gather", lay.moe, "tp", nbytes))
    return out


def moe_tp_all_reduce(lay: PlanLayout, load: MoeLoad) -> Cost:
    """The expert TP group's partial sums: one row per (token, expert) pair on the busiest
    rank (a GPU's fused MoE reduces over the top-k first: one row per token)."""
    if lay.shard.tp_moe <= 1:
        return FREE
    pairs = lay.ctx.pricer.collective_options(load).load.pairs  # type: ignore[union-attr]
    nbytes = int(pairs * lay.ctx.model.hidden_size * _reduced_bytes(lay))
    return _price(lay, "all_reduce", lay.moe, "tp", nbytes)


def moe_combine(lay: PlanLayout, q: int, load: MoeLoad) -> Cost:
    """Bringing the experts' outputs back: the EP all-to-all of the dispatch, at the combine's
    bytes where the chip kind carries them otherwise (GPU: bf16)."""
    return _ep_exchange(lay, q, load)[1] if lay.shard.ep_moe > 1 else FREE


def layer_collectives(lay: PlanLayout, kind: LayerKind, mode: str, q: int) -> dict[str, Cost]:
    """Every collective of one layer of ``kind`` on one device, by reference name (zero-cost
    ones left out; calls of one name summed)."""
    calls: list[tuple[str, Cost]] = []
    tp = tp_all_reduce(lay, q)
    calls.append(("tp_all_reduce", tp))
    if lay.plan.cp > 1:
        if mode == "decode":
            calls.append(("cp_attention_combine", cp_attention_combine(lay)))
        else:
            calls.append(("cp_kv_all_gather", cp_kv_all_gather(lay)))
    if kind.moe and replicated_experts(lay):  # every rank holds every token: one sum
        calls.append(("moe_tp_all_reduce", tp))
    else:
        calls += [("tp_all_reduce", tp)] * (tp_all_reduces(lay, kind) - 1)
        if kind.moe:
            load = lay.loads[mode]
            calls += [("ep_dispatch", c) for c in moe_dispatch(lay, q, load)]
            calls.append(("moe_tp_all_reduce", moe_tp_all_reduce(lay, load)))
            calls.append(("ep_combine", moe_combine(lay, q, load)))
    out: dict[str, Cost] = {}
    for name, c in calls:
        if c.seconds <= 0 and not (c.energy_pj or 0) > 0:
            continue
        prev = out.get(name)
        if prev is None:
            out[name] = c
        else:
            e = None if prev.energy_pj is None else prev.energy_pj + (c.energy_pj or 0)
            out[name] = Cost(prev.seconds + c.seconds, e)
    return out


def pipeline_transfer(lay: PlanLayout, q: int) -> Cost:
    """A micro-batch's activations (``b_dev · q · h``) over a stage boundary: the slowest
    boundary's seconds and every boundary's energy (zero at pp = 1)."""
    if lay.pp <= 1:
        return FREE
    sh = lay.shape
    nbytes = int(sh.shard.b_dev * q * sh.model.hidden_size * sh.precision.activation_bytes)
    return _price(lay, "p2p", lay.dense, "pp", nbytes)
