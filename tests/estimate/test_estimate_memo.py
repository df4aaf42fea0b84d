"""Memoised pricing gives the same figures as pricing every plan alone (issue 15).

The shared memo of ``EvaluatorInputs`` (one entry per problem, shared across batch sizes), the
per-context collective memo keyed by rank-group layout, the plans that share everything but the
comm overlap and the affine runs of a refined decode grid must not change a single figure.
"""

from __future__ import annotations

import pytest
from deepstack import Network, ParallelScheme, switch_noc

from plena_opt.estimate import Evaluator, EvaluatorInputs, Plan, Workload
from plena_opt.estimate.comm import Cost, PricedNetwork
from plena_opt.estimate.decode.stairs import KV, ONE, StairSpec
from plena_opt.estimate.decode.steps import _zone_pieces
from plena_opt.estimate.memo import PricingMemo
from plena_opt.memory import FixedBandwidthMemory, load_memory
from plena_opt.models import load_model

NOC = switch_noc(16, groups=2)
STACKED = load_memory("fictional_stacked_dram")


def _alone(inputs: EvaluatorInputs, batch: int, plans: list[Plan]) -> list:
    """Every plan on its own fresh evaluator (no memo, nothing shared between plans)."""
    w = inputs.with_batch(batch).workload
    out = []
    for p in plans:
        ev = Evaluator(inputs.model, inputs.noc, inputs.memory, w, chip=inputs.chip)
        out.append(ev.evaluate(p))
    return out


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-20b"])
def test_shared_memo_across_batch_sizes_is_exact(model: str) -> None:
    inputs = EvaluatorInputs(load_model(model), NOC, STACKED, Workload(output_seq_len=40))
    for batch in (1, 2, 8, 32):
        ev = inputs.evaluator(batch)
        plans = ev.legal_plans()
        assert ev.evaluate_batch(plans) == _alone(inputs, batch, plans)


def test_memo_shares_dense_layers_but_not_moe_layers() -> None:
    dense = EvaluatorInputs(load_model("llama-3.1-8b"), NOC, STACKED, Workload())
    a, b = dense.evaluator(1), dense.evaluator(2)
    assert a.ctx.layer_cache is b.ctx.layer_cache
    moe = EvaluatorInputs(load_model("gpt-oss-20b"), NOC, STACKED, Workload())
    c, d = moe.evaluator(1), moe.evaluator(2)
    assert c.ctx.layer_cache is not d.ctx.layer_cache
    assert c.ctx._grids is d.ctx._grids  # grids depend on neither model nor batch
    # another NoC object is another entry, even with equal contents
    other = EvaluatorInputs(dense.model, switch_noc(16, groups=2), STACKED, Workload())
    assert other.evaluator(1).ctx.layer_cache is not a.ctx.layer_cache


def test_memo_is_bounded_and_clears() -> None:
    memo = PricingMemo()
    model = load_model("llama-3.1-8b")
    first = memo.caches(model, NOC, STACKED, None, Workload(input_seq_len=10), True)
    for n in range(20):
        memo.caches(model, NOC, STACKED, None, Workload(input_seq_len=11 + n), True)
    assert len(memo._entries) <= 8
    again = memo.caches(model, NOC, STACKED, None, Workload(input_seq_len=10), True)
    assert again is not first  # the oldest entry was dropped, a fresh one made
    memo.clear()
    assert not memo._entries


def test_priced_network_equals_the_network() -> None:
    net = Network(NOC)
    priced = PricedNetwork(Network(NOC))
    for tp, dp, pp in [(4, 4, 1), (4, 1, 4), (4, 2, 2), (2, 8, 1), (16, 1, 1)]:
        s = ParallelScheme(tp=tp, dp=dp, pp=pp)
        for nbytes in (1, 4096, 10**6):
            for op in ("all_reduce", "all_gather"):
                full = getattr(net, op)(s, "tp", nbytes)
                assert priced.price(op, s, "tp", nbytes) == Cost(full.seconds, full.noc_energy_pj)
            p2p = net.pipeline_p2p(s, nbytes)
            want = Cost(p2p.seconds, p2p.noc_energy_pj_all_boundaries)
            assert priced.price("p2p", s, "pp", nbytes) == want
    # tp=4 groups are the same devices beside dp=4, pp=4 or dp=2·pp=2: one pricing per size
    keys = {k for k in priced._costs if k[0] == "all_reduce" and k[2] == 4096}
    assert len(keys) == 3  # tp=4, tp=2, tp=16 layouts


def test_zone_runs_cover_the_zone_and_keep_tiles_constant() -> None:
    spec = StairSpec(2048, None, None, None)
    pieces = _zone_pieces(spec, 6761, 9545)
    assert [(p.u0, p.u1) for p in pieces] == [(6761, 8193), (8193, 9545)]
    assert all(p.stairs == (ONE, KV) for p in pieces)
    for p in pieces:
        assert -(-p.u0 // 2048) == -(-(p.u1 - 1) // 2048)
    # with a transfer quantum the zone is still priced point by point
    from fractions import Fraction

    quantum = StairSpec(2048, Fraction(3, 7), None, None)
    assert [p.stairs for p in _zone_pieces(quantum, 6761, 9545)] == [()]


def test_long_fixed_bandwidth_decode_matches_point_by_point() -> None:
    """The affine runs of a refined grid give the per-step sum to float rounding."""
    model = load_model("llama-3.1-8b")
    mem = FixedBandwidthMemory(0.9e12, None, name="fixed")
    w = Workload(batch_size=16, input_seq_len=2048, output_seq_len=20_000)
    ev = Evaluator(model, NOC, mem, w)
    from plena_opt.estimate.decode import steps as decode_steps

    plans = ev.legal_plans()
    fast = ev.evaluate_batch(plans)
    old = decode_steps.ZONE_KV
    try:  # every range enumerated: ZONE_KV huge, compressed pieces refused
        decode_steps.ZONE_KV = 0
        decode_steps.ENUM_KV, enum_old = 10**9, decode_steps.ENUM_KV
        slow = Evaluator(model, NOC, mem, w).evaluate_batch(plans)
    finally:
        decode_steps.ZONE_KV = old
        decode_steps.ENUM_KV = enum_old
    for a, b in zip(fast, slow, strict=True):
        assert a.tps == pytest.approx(b.tps, rel=1e-12)
        assert a.ttft_seconds == pytest.approx(b.ttft_seconds, rel=1e-12)
        assert a.decode_step_seconds == pytest.approx(b.decode_step_seconds, rel=1e-12)
