"""r16trim: the cold loaded path's estimate shortcuts give what the long ways give (issue 26).

The pricing memo keys a workload by its class and field values but the batch size
(``memo._BATCHLESS``), and hands a new entry's own memos to its maker where nobody shares them;
``Workload.with_lengths`` checks ints inline; ``DecodeFloor.of`` sets its fields without the
frozen ``__init__``; a derived plan base re-batches the family's shard of its plan
(``DeviceShard.with_batch``) and reads its warnings and balanced MoE loads on first use;
balanced MoE loads skip the frozen ``__init__``.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.decode_floor import DecodeFloor
from plena_opt.estimate.memo import _BATCHLESS, PricingMemo
from plena_opt.estimate.moe_load import MoeLoad, busiest_rank_load
from plena_opt.estimate.plan_base import PlanBase
from plena_opt.estimate.shard import DeviceShard
from plena_opt.models import load_model
from tests.estimate.test_cold_trim import _ctx

MODES = ("prefill", "decode")
WL = Workload(batch_size=4, input_seq_len=1024, output_seq_len=1024, precision="fp8")
VARIANTS = [
    WL,
    replace(WL, batch_size=64),
    replace(WL, output_seq_len=1),
    replace(WL, input_seq_len=2048),
    replace(WL, precision="bf16"),
    replace(WL, routing="random"),
    replace(WL, eplb_redundant=8),
    replace(WL, fp8_block_moe=True),
    replace(WL, frequency_hz=1e9 + 1),
    replace(WL, bf16_attention="all"),
]


def test_memo_key_is_the_workload_at_batch_one() -> None:
    """Two workloads share a memo entry exactly when they are equal at batch 1 (the
    dataclass's ``==``): the key's field values are every field but the batch size."""
    assert _BATCHLESS(WL) == tuple(
        getattr(WL, f.name) for f in fields(Workload) if f.name != "batch_size"
    )
    model, noc, memory, chip = object(), object(), object(), object()
    for a in VARIANTS:
        for b in VARIANTS:
            memo = PricingMemo()
            ca = memo.caches(model, noc, memory, chip, a, True)
            cb = memo.caches(model, noc, memory, chip, b, True)
            same = replace(a, batch_size=1) == replace(b, batch_size=1)
            assert (ca is cb) == same
            assert (ca.grids is cb.grids) == same


def test_unshared_memo_entries_keep_grids_shared_and_layers_apart() -> None:
    """Without layer sharing (MoE, GPU) the entry's maker takes its memos; every later context
    gets fresh layer, collective, extras and shard-id memos, and the shared grids, collective
    prices and refined grids — as a fresh ``PricingCaches`` of the entry's would."""
    memo, objs = PricingMemo(), (object(), object(), object(), object())
    first = memo.caches(*objs, WL, False)
    later = [memo.caches(*objs, replace(WL, batch_size=b), False) for b in (1, 64)]
    for c in later:
        assert c.grids is first.grids and c.collectives is first.collectives
        assert c.refined is first.refined
        for name in ("layer", "comm", "extras", "shard_ids", "layer_grids"):
            assert getattr(c, name) is not getattr(first, name)
            assert getattr(c, name) == {}
    assert later[0].layer is not later[1].layer
    # a sharing context of that entry still gets its own layer memos (the entry shares none)
    assert memo.caches(*objs, WL, True).layer is not first.layer


@pytest.mark.parametrize("batch", [1, 2, 64, 2**24])
@pytest.mark.parametrize("osl", [1, 1024, 2**24])
def test_with_lengths_is_replace(batch: int, osl: int) -> None:
    got = WL.with_lengths(batch, osl)
    want = replace(WL, batch_size=batch, output_seq_len=osl)
    assert got == want and hash(got) == hash(want)
    assert type(got.batch_size) is int and type(got.output_seq_len) is int


@pytest.mark.parametrize(
    ("batch", "osl", "error", "field"),
    [
        (0, 8, PlenaInputError, "batch_size"),
        (2**24 + 1, 8, PlenaInputError, "batch_size"),
        (True, 8, PlenaTypeError, "batch_size"),
        (2.0, 8, PlenaTypeError, "batch_size"),
        (np.int64(4), 8, PlenaTypeError, "batch_size"),
        (4, 0, PlenaInputError, "output_seq_len"),
        (4, 2**24 + 1, PlenaInputError, "output_seq_len"),
        (4, True, PlenaTypeError, "output_seq_len"),
    ],
)
def test_with_lengths_still_refuses(batch, osl, error, field) -> None:
    """Anything but an int in range takes the checks and is refused naming its field."""
    with pytest.raises(error) as e:
        WL.with_lengths(batch, osl)
    assert e.value.field == field


PLANS = [
    ("qwen3-235b-a22b", {"ep": 8}),
    ("qwen3-235b-a22b", {"tp": 4, "dp": 2}),
    ("llama-3.1-70b", {"tp": 4, "pp": 2}),
    ("llama-3.1-70b", {"tp": 8}),
]


@pytest.mark.parametrize(("name", "fields_"), PLANS)
def test_decode_floor_is_the_dataclass(name: str, fields_: dict) -> None:
    """``DecodeFloor.of`` equals the frozen dataclass built from the same values (``max`` as
    written before r16trim), field for field and type for type."""
    from plena_opt.estimate.distributed import PlanCost

    for osl in (2, 1024):
        cost = PlanCost(_ctx(name, 1, osl), Plan(**fields_))
        floor = DecodeFloor.of(cost, osl)
        ctx, d, m = cost.ctx, cost.shard, cost.ctx.model
        weights, kv = cost.footprint
        w = ctx.workload
        local = expert = 0
        if m.num_experts:
            local = (m.num_experts + w.eplb_redundant) // max(d.ep_moe, 1)
            layers = sum(n for kind, n in cost.stage_kind_counts[0].items() if kind.moe)
            expert = layers * 3 * m.hidden_size * d.expert_ffn * ctx.precision.weight_bytes
        want = DecodeFloor(
            fixed_bytes=max(weights - local * expert, 0.0),
            expert_bytes=float(expert),
            local_experts=local,
            pairs_per_request=(m.top_k or 1) / max(d.ep_moe, 1),
            kv_bytes_per_request=kv
            * (w.input_seq_len + (osl - 1) / 2)
            / (w.input_seq_len + w.output_seq_len),
            requests_per_device=1.0 / (cost.plan.dp * cost.plan.ep),
            stages=cost.plan.pp,
            bandwidth=float(ctx.memory.usable_bandwidth_bytes_per_s),
        )
        assert floor == want and hash(floor) == hash(want)
        for f in fields(DecodeFloor):
            assert type(getattr(floor, f.name)) is type(getattr(want, f.name))
        assert [floor.seconds(n) for n in (0.0, 3.0, 100.0)] == [
            want.seconds(n) for n in (0.0, 3.0, 100.0)
        ]


@pytest.mark.parametrize(("name", "fields_"), PLANS)
def test_rebatched_shards_are_built_shards(name: str, fields_: dict) -> None:
    """``with_batch`` equals ``build`` at every batch (fields, types, order), and a plan base
    of a derived context holds that shard."""
    model, plan = load_model(name), Plan(**fields_)
    seed = DeviceShard.build(model, plan, WL)
    for batch in (1, 2, 3, 7, 8, 9, 63, 64, 65, 256, 1000):
        want = DeviceShard.build(model, plan, replace(WL, batch_size=batch))
        got = seed.with_batch(batch, plan)
        assert got == want and list(got.__dict__.items()) == list(want.__dict__.items())
        assert all(type(v) is type(want.__dict__[k]) for k, v in got.__dict__.items())
    memo = PricingMemo()
    first = _ctx(name, 1, 1024, memo)
    PlanBase(first, plan, True)
    for batch, osl in ((2, 1), (64, 1024), (128, 1024)):
        derived = first.with_lengths(batch, osl, memo)
        base = PlanBase(derived, plan, True)
        fresh = PlanBase(_ctx(name, batch, osl), plan, True)
        assert base._plan_warnings is None  # read on first use: equal to a fresh base's
        assert base.plan_warnings == fresh.plan_warnings and base._plan_warnings is not None
        assert base.shard == fresh.shard and base.priced_shard == fresh.priced_shard
        assert [base.load(m) for m in MODES] == [fresh.load(m) for m in MODES]
        assert base.in_flight == fresh.in_flight


@pytest.mark.parametrize("micro", [1, 2, 7, 64, 256])
@pytest.mark.parametrize("q", [1, 1024])
def test_balanced_loads_are_the_dataclass(micro: int, q: int) -> None:
    model = load_model("qwen3-235b-a22b")
    for dp, ep in ((1, 8), (2, 4), (8, 1)):
        got = busiest_rank_load(model, micro=micro, q=q, dp=dp, tp_moe=1, ep_moe=ep,
                                routing="balanced", rows=None)  # fmt: skip
        want = MoeLoad(got.tokens_local, got.pairs, got.expert_counts, 1.0, "balanced")
        assert got == want and hash(got) == hash(want)
        assert type(got.imbalance) is float and len(got.expert_counts) == 128 // ep


@pytest.mark.parametrize(("routing", "eplb"), [("balanced", 0), ("balanced", 8), ("random", 0)])
def test_balanced_loads_are_read_lazily(routing: str, eplb: int) -> None:
    """A balanced plan base without EPLB works each mode's load out on first read (a prompt
    count's plan never reads the decode's); the load is the eager one, and the report reads
    both. Other routings and EPLB fill both at once, as before."""
    from plena_opt.estimate import Evaluator
    from tests.estimate.test_cold_trim import _ctx as ctx_of

    for batch in (1, 2, 64):
        ctx = ctx_of("qwen3-235b-a22b", batch)
        if routing != "balanced" or eplb:
            ctx = Evaluator(
                ctx.model, ctx.noc, ctx.memory,
                replace(ctx.workload, routing=routing, eplb_redundant=eplb), ctx.chip,
            ).ctx  # fmt: skip
        plan = Plan(ep=8)
        base = PlanBase(ctx, plan, True)
        lazy = routing == "balanced" and not eplb
        assert (base.loads == {}) == lazy
        d, w = base.shard, ctx.workload
        for mode, q in (("prefill", d.q_prefill), ("decode", 1)):
            want = busiest_rank_load(ctx.model, micro=d.micro, q=q, dp=plan.dp, tp_moe=d.tp_moe,
                                     ep_moe=d.ep_moe, routing=w.routing, rows=base.rows,
                                     redundant=w.eplb_redundant)  # fmt: skip
            assert base.load(mode) == want and base.loads[mode] is base.load(mode)
        assert base.load("verify") is None
        report = Evaluator(ctx.model, ctx.noc, ctx.memory, ctx.workload, ctx.chip).evaluate(plan)
        assert report is not None
