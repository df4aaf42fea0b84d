"""Collectives of one layer and the pipeline transfer, priced by ``deepstack``.

Analytic-model §4.4 and §4.7.

Byte counts are per device and truncated to integers, as the reference passes ``int(nbytes)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count

import numpy as np
from deepstack import ParallelScheme
from deepstack.placement import layout

from plena_opt.estimate.layer import LayerKind, LayerShape
from plena_opt.estimate.moe_load import MoeLoad
from plena_opt.estimate.network import NetworkBackend

# Reference collective names, in report order.
COLLECTIVES = (
    "tp_all_reduce",
    "cp_attention_combine",
    "cp_kv_all_gather",
    "ep_dispatch",
    "moe_tp_all_reduce",
    "ep_combine",
)
_LAYOUT_IDS = count()  # layout ids (``layout_id``), never reused
EP_ROUTED_TOKENS = 8192  # below: routed rows; at or above: uniform closed form (§4.5)
# rows[:tokens] of read-only routing rows, one view per (rows, tokens), so that the network's
# EP dispatch finds the same object again and keeps its content key (``deepstack.collectives``)
_HEADS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
MAX_HEADS = 256


def _head(rows: np.ndarray, tokens: int) -> np.ndarray:
    """``rows[:tokens]``; for read-only rows the same view object each time (kept with its
    rows, up to ``MAX_HEADS``)."""
    if rows is None or rows.flags.writeable:
        return rows[:tokens]
    key = (id(rows), tokens)
    hit = _HEADS.get(key)
    if hit is not None and hit[0] is rows:
        return hit[1]
    if len(_HEADS) >= MAX_HEADS:
        _HEADS.clear()
    view = rows[:tokens]
    _HEADS[key] = (rows, view)
    return view


@dataclass(frozen=True)
class Cost:
    """Seconds and NoC energy (pJ, None without energy coefficients) of one collective call."""

    seconds: float
    energy_pj: float | None

    @classmethod
    def of(cls, seconds: float, energy_pj: float | None) -> Cost:
        """``Cost(seconds, energy_pj)`` without the frozen ``__init__``'s ``object.__setattr__``
        per field (≈ 100 per fresh evaluator)."""
        cost = object.__new__(cls)
        cost.__dict__.update(seconds=seconds, energy_pj=energy_pj)
        return cost


FREE = Cost(0.0, 0.0)


def _cost(c) -> Cost:
    return Cost.of(c.seconds, c.noc_energy_pj)


LAYOUT_TABLE = 1 << 16  # (scheme, dim) layouts a process keeps ids for (starts afresh beyond)
_LAYOUT_OF: dict[tuple, int] = {}  # (*scheme sizes, dim) -> layout id
_ID_OF: dict[tuple[int, int, int], int] = {}  # deepstack ``layout`` (size, stride, blocks) -> id


def layout_id(scheme: ParallelScheme, dim: str) -> int:
    """A small id of the device groups of ``dim`` in ``scheme``: equal groups, equal id.

    Pure arithmetic on the scheme's sizes, so a table per process (not per context). Ids come
    from one counter and are never reused: a key that outlives a restart of the table, or two
    threads racing, can only give one layout two ids (a memo miss), never two layouts one."""
    s = scheme  # keyed by ``scheme.sizes()`` and ``dim`` as one flat tuple (no method call)
    key = (s.tp, s.ep, s.sp, s.cp, s.dp, s.pp, dim)
    lid = _LAYOUT_OF.get(key)
    if lid is None:
        if len(_LAYOUT_OF) >= LAYOUT_TABLE:
            _LAYOUT_OF.clear()
            _ID_OF.clear()
        lid = _ID_OF.setdefault(layout(scheme, dim), next(_LAYOUT_IDS))
        _LAYOUT_OF[key] = lid
    return lid


@dataclass
class CollectivePrices:
    """``PricedNetwork``'s memo (shared by the contexts of one network, ``estimate.memo``)."""

    costs: dict[tuple[str, int, int], Cost] = field(default_factory=dict)  # (op, layout, bytes)


class PricedNetwork:
    """A network back-end (``estimate.network``; ``deepstack.Network`` by default) whose
    collective and pipeline-transfer prices (seconds, energy) are memoised per evaluation
    context, keyed by the rank groups of the dimension and the byte count.

    A collective's cost depends on the scheme only through the device groups of its dimension
    (deepstack routes and prices every group of that layout), so plans whose schemes place those
    groups on the same devices (tp=8 beside dp=4 or beside pp=4) share one pricing per size.
    ``price`` asks deepstack for the two figures only (``Network.price``), not the report with
    every candidate; other calls go to the network unchanged.
    """

    def __init__(self, net: NetworkBackend, memo: CollectivePrices | None = None) -> None:
        """``memo``: where to keep the prices (shared by contexts of one network)."""
        self.net = net
        memo = CollectivePrices() if memo is None else memo
        self._costs = memo.costs

    def __getattr__(self, name: str):
        return getattr(self.net, name)

    def layout(self, scheme: ParallelScheme, dim: str) -> int:
        """A small id of the device groups of ``dim`` (equal groups, equal id): ``layout_id``."""
        return layout_id(scheme, dim)

    def price(self, op: str, scheme: ParallelScheme, dim: str, nbytes: int) -> Cost:
        """Seconds and energy of ``op`` (``all_reduce``, ``all_gather``, ``p2p`` with
        ``dim="pp"``: the slowest boundary and the energy of all), memoised (callers pass legal
        schemes and integer byte counts)."""
        key = (op, self.layout(scheme, dim), int(nbytes))
        cost = self._costs.get(key)
        if cost is None:
            cost = self._costs[key] = Cost.of(*self.net.price(op, scheme, dim, nbytes))
        return cost


def layer_collectives(
    net: PricedNetwork,
    shape: LayerShape,
    kind: LayerKind,
    mode: str,
    q: int,
    *,
    dense: ParallelScheme,
    moe: ParallelScheme | None,
    cp: int,
    input_seq_len: int,
    load: MoeLoad | None,
    rows: np.ndarray | None,
    micro: int,
    shared_with_experts: bool = False,
    reduce_bytes: float | None = None,
    distinct_ranks: bool = False,
    combine_bytes: float | None = None,
) -> dict[str, Cost]:
    """Every collective of one layer on one device, by reference name (zero-cost ones omitted).

    ``shared_with_experts``: the shared experts' partial sums ride in the routed experts' TP
    all-reduce instead of their own (vLLM builds ``shared_experts`` with ``reduce_results=False``
    and its fused MoE all-reduces the sum once, ``vllm/model_executor/models/deepseek_v2.py``
    ``DeepseekV2MoE``); used for GPU chips. The PLENA reference prices a separate one.
    ``reduce_bytes``: bytes per element the TP all-reduces carry (GPU chips: bf16 whatever the
    weight format, ``chip.precision.GPU_REDUCE_BYTES``); None: the precision's activations.
    ``distinct_ranks``, ``combine_bytes``: the EP all-to-all as GPU engines run it
    (``ep_exchange``); False / None: network-model §8.2 (the PLENA reference)."""
    m, d, prec = shape.model, shape.shard, shape.precision
    h, b = m.hidden_size, d.b_dev
    reduced = prec.activation_bytes if reduce_bytes is None else reduce_bytes
    act = int(b * q * h * reduced)
    out: dict[str, Cost] = {}

    def add(name: str, cost: Cost) -> None:
        if cost.seconds > 0 or (cost.energy_pj or 0) > 0:
            prev = out.get(name)
            if prev is None:
                out[name] = cost
            else:
                e = None if prev.energy_pj is None else prev.energy_pj + (cost.energy_pj or 0)
                out[name] = Cost.of(prev.seconds + cost.seconds, e)

    tp_ar = net.price("all_reduce", dense, "tp", act) if shape.tp > 1 else FREE
    add("tp_all_reduce", tp_ar)
    if cp > 1:
        if mode == "decode":
            nbytes = int(b * d.heads * m.head_dim * prec.activation_bytes)
            add("cp_attention_combine", net.price("all_reduce", dense, "cp", nbytes))
        else:
            nbytes = int(2 * b * input_seq_len * d.kv_heads * m.head_dim * prec.kv_write_bytes)
            add("cp_kv_all_gather", net.price("all_gather", dense, "cp", nbytes))
    if not kind.moe or (shared_with_experts and replicated_expert_parallel(shape)):
        add("moe_tp_all_reduce" if kind.moe else "tp_all_reduce", tp_ar)  # 2nd / experts' sum
        return out
    fused = shared_with_experts and d.tp_moe == shape.tp and d.ep_moe == 1
    if d.shared_ffn and shape.tp > 1 and not fused:  # shared experts' TP sums (docs/models.md)
        add("tp_all_reduce", tp_ar)
    lanes = d.moe_lanes
    if d.ep_moe > 1:
        tokens = micro * q
        a2a, back = ep_exchange(
            net, shape, moe if lanes else flat_expert_scheme(moe), micro, q, load,
            _head(rows, tokens) if tokens < EP_ROUTED_TOKENS else None, distinct_ranks,
            combine_bytes,
        )  # fmt: skip
        add("ep_dispatch", a2a)
    if not lanes:  # every MoE TP rank of a group needs the tokens routed to the group:
        # all its tokens' share (T·k/moe_ep copies on the busiest group), at most every token
        received = min(load.tokens_local * d.ep_moe, load.tokens_local * m.top_k * load.imbalance)
        nbytes = int(received * h * prec.activation_bytes)
        add("ep_dispatch", net.price("all_gather", moe, "tp", nbytes))
    if d.tp_moe > 1:
        nbytes = int(load.pairs * h * reduced)
        add("moe_tp_all_reduce", net.price("all_reduce", moe, "tp", nbytes))
    if d.ep_moe > 1:
        add("ep_combine", back)
    return out


def ep_exchange(net: PricedNetwork | NetworkBackend, shape: LayerShape, scheme: ParallelScheme,
                micro: int, q: int, load: MoeLoad, rows: np.ndarray | None,
                distinct_ranks: bool = False,
                combine_bytes: float | None = None) -> tuple[Cost, Cost]:  # fmt: skip
    """(dispatch, combine) of one micro-batch's routed tokens over the EP groups of ``scheme``.

    The dispatch carries ``h`` activations a token at the precision's bytes. ``distinct_ranks``
    (GPU engines): at or above the routed-rows threshold a token goes once to each distinct
    destination rank (as DeepEP's ``Buffer.dispatch`` and the routed branch below it), not
    ``top_k/ep`` times to every rank (§8.2), except for balanced routing, whose rows put a
    token's experts on distinct ranks by construction. ``combine_bytes``: bytes per element of
    the combine (GPU: bf16, DeepEP ``deep_ep/buffer.py`` ``Buffer.combine`` takes ``x`` in
    ``torch.bfloat16``; vLLM ``fused_moe/deepep_ht_prepare_finalize.py`` quantises only before
    ``dispatch``); None: the dispatch's cost."""
    m, h = shape.model, shape.model.hidden_size
    kw = {"num_experts": m.num_experts, "top_k": m.top_k, "micro_batch": micro, "seq": q,
          "imbalance": load.imbalance, "rows": rows}  # fmt: skip
    if distinct_ranks and load.source != "balanced":
        kw["distinct_ranks"] = True
    sent = int(h * shape.precision.activation_bytes)
    a2a = _cost(net.ep_all_to_all(scheme, bytes_per_token=sent, **kw))
    back = sent if combine_bytes is None else int(h * combine_bytes)
    if back == sent:
        return a2a, a2a
    return a2a, _cost(net.ep_all_to_all(scheme, bytes_per_token=back, **kw))


def replicated_expert_parallel(shape: LayerShape) -> bool:
    """Whether the experts are split EP (``moe_ep`` > 1) over exactly the attention TP group, so
    every rank of the MoE group already holds every token (no attention DP inside it).

    GPU engines then exchange no tokens: each rank routes all tokens to its local experts and
    one TP all-reduce sums the routed and shared experts' outputs, as for TP experts. SGLang
    ``--ep-size`` without ``--enable-dp-attention`` and with the default ``--moe-a2a-backend
    none`` (``sglang/srt/models/deepseek_v2.py``, ``DeepseekV2MoE.forward_normal``: shared
    output added, then ``tensor_model_parallel_all_reduce``; the InferenceX
    ``benchmarks/dsr1_fp4_b200.sh`` recipe: ``--tensor-parallel-size $TP --ep-size $EP_SIZE``);
    vLLM ``--enable-expert-parallel`` at data-parallel size 1 and TensorRT-LLM's MoE without
    ``enable_attention_dp`` reduce the same way. The all-to-all dispatch / combine applies only
    when attention DP ranks (``Plan.ep`` > 1) share the MoE group."""
    d = shape.shard
    return d.ep_moe > 1 and d.tp_moe * d.ep_moe == shape.tp


def flat_expert_scheme(moe: ParallelScheme) -> ParallelScheme:
    """The expert group as one EP group of ``moe_tp·moe_ep`` ranks (the same devices): the
    flat token exchange of a layout that is not ``shard.lane_wise``."""
    return ParallelScheme(
        tp=1, ep=moe.tp * moe.ep, cp=moe.cp, dp=moe.dp, pp=moe.pp, ep1=moe.tp * moe.ep, ep2=1
    )


def pipeline_transfer(net: PricedNetwork, dense: ParallelScheme, shape: LayerShape, q: int) -> Cost:
    """Slowest stage-boundary transfer of one micro-batch's activations, and the energy of all
    boundaries (pJ). Zero when pp = 1."""
    if dense.pp <= 1:
        return FREE
    nbytes = int(shape.shard.b_dev * q * shape.model.hidden_size * shape.precision.activation_bytes)
    return net.price("p2p", dense, "pp", nbytes)
