"""Disaggregated serving (issue 16): closed forms, rate matching, fronts against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from deepstack import switch_noc

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.disaggregated import (
    aggregated_serving,
    disaggregated_serving,
    kv_transfer,
    price_worker,
    rate_match,
    sub_noc,
)
from plena_opt.estimate.distributed import EstimateContext, PlanCost
from plena_opt.estimate.problem import EvaluatorInputs
from plena_opt.memory import FixedBandwidthMemory
from plena_opt.models import load_model
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.serving.disaggregated import ServingSpace, rate_match_arrays
from plena_opt.search.serving.serving_compare import compare_serving

L8 = load_model("llama-3.1-8b")
MEM = FixedBandwidthMemory(2e12, 80 * 2**30, name="fixed")
WL = Workload(batch_size=16, input_seq_len=1024, output_seq_len=32)


def test_one_prefill_one_decode_same_shape_closed_form():
    """1P1D of the aggregated worker's shape: TTFT + KV transfer, TPOT − interference."""
    noc = switch_noc(8, groups=2)
    plan = Plan(tp=2, pp=2)
    w = price_worker(L8, noc, MEM, WL, plan)
    agg = aggregated_serving(w, WL.output_seq_len)
    xs, xe = kv_transfer(noc, plan, plan, w.kv_bytes_per_micro)
    dis = disaggregated_serving(w, w, xs, xe, WL.output_seq_len, 8, counts=(1, 1))
    assert xs > 0
    assert dis.ttft_s == pytest.approx(agg.ttft_s + xs, rel=1e-12)
    assert dis.tpot_s == pytest.approx(agg.tpot_s - agg.interference_s_per_token, rel=1e-12)
    # the pieces: interference = prefill of the batch (pp micro-batches pipelined) per token
    cost = PlanCost(EstimateContext(L8, sub_noc(noc, 4), MEM, WL), plan)
    t_pf = cost.prefill.latency_at(0) + (plan.pp - 1) * float(cost.prefill.period[0])
    assert agg.interference_s_per_token == pytest.approx(t_pf / WL.output_seq_len, rel=1e-12)
    assert dis.tpot_s == pytest.approx(plan.pp * cost.decode_seconds / 32, rel=1e-12)
    assert agg.ttft_s == pytest.approx(w.prefill_latency_s + w.first_decode_s, rel=1e-12)
    # KV bytes: 2 · S_in · KV heads · head_dim · layers · kvW per sequence, micro sequences
    per_seq = 2 * 1024 * L8.num_kv_heads * L8.head_dim * L8.num_layers * 1.125
    assert w.kv_bytes_per_micro == math.ceil(per_seq) * w.micro
    assert dis.devices == 8 and (dis.prefill_workers, dis.decode_workers) == (1, 1)


def test_kv_transfer_is_priced_on_the_network():
    """Same shape: device i → i; one flow per device, so on switch_noc(8, 2) the 4+4 split
    crosses the L2 switch (50 GB/s links) and 2+2 stays on one L1 switch (100 GB/s)."""
    noc = switch_noc(8, groups=2)
    a = Plan(tp=4)
    cross, _ = kv_transfer(noc, a, a, 4 * 10**8)
    b = Plan(tp=2)
    local, _ = kv_transfer(noc, b, b, 2 * 10**8)
    assert cross > local > 0
    # 1e8 bytes per flow over a 100 GB/s L1 link plus hops
    assert local == pytest.approx(1e8 / 100e9, rel=0.05)


def test_rate_match_hand_computed():
    # R_p = 10/s per prefill worker, R_d = 4/s per decode worker, 8 devices each, 64 in all:
    # y/x = 2.5 ideal; 2P5D serves min(20, 20) = 20/s on 56 devices = 0.357/s/device, better than
    # 1P2D (8/24 = 0.333), 1P3D (10/32), 2P6D (20/64), 3P5D (20/64), 1P1D (4/16).
    assert rate_match(8, 8, 10.0, 4.0, 64) == (2, 5, 20.0)
    # prefill-bound: R_p = 1, R_d = 3 → 3P1D on 4+4? n_p=4, n_d=4, 16 devices: 3P1D = 3/16
    assert rate_match(4, 4, 1.0, 3.0, 16) == (3, 1, 3.0)
    with pytest.raises(PlenaInputError, match="exceed"):
        rate_match(8, 8, 1.0, 1.0, 12)


def test_rate_match_arrays_equals_scalar_and_brute_force():
    rng = np.random.default_rng(1)
    n_p = rng.choice([1, 2, 4, 8], 200).astype(float)
    n_d = rng.choice([1, 2, 4, 8], 200).astype(float)
    r_p, r_d = rng.uniform(0.1, 10, 200), rng.uniform(0.1, 10, 200)
    x, y, rate = rate_match_arrays(n_p, n_d, r_p, r_d, 16)
    for i in range(200):
        a, b, c = rate_match(int(n_p[i]), int(n_d[i]), r_p[i], r_d[i], 16)
        assert (x[i], y[i], rate[i]) == (a, b, c)
        best = max(
            min(u * r_p[i], v * r_d[i]) / (u * n_p[i] + v * n_d[i])
            for u in range(1, 17)
            for v in range(1, 17)
            if u * n_p[i] + v * n_d[i] <= 16
        )
        assert c / (a * n_p[i] + b * n_d[i]) == pytest.approx(best, rel=1e-12)


def test_sub_noc_takes_whole_levels_or_part_of_a_switch():
    noc = switch_noc(16, groups=4)
    assert sub_noc(noc, 2).num_devices == 2
    assert sub_noc(noc, 12).num_devices == 12
    with pytest.raises(PlenaInputError, match="whole levels"):
        sub_noc(noc, 6)


# -- fronts against brute force ------------------------------------------------------------
OBJ = ["ttft", "tps-per-device", "tps-per-user"]
SIGN = np.array([1.0, -1.0, -1.0])


def _vec(f):
    return (f.ttft_s, f.tps_per_device, 1.0 / f.tpot_s)


def _brute(inputs, batches, sla, precisions=(None,)):
    """Every aggregated plan and every (prefill, decode, x, y) deployment, scored one by one;
    with ``precisions``, every worker in each format and both pools in the same one."""
    from dataclasses import replace

    from plena_opt.estimate import Evaluator

    noc, n, out = inputs.noc, inputs.noc.num_devices, inputs.workload.output_seq_len

    def workers(size):
        res = []
        for b, prec in itertools.product(batches, precisions):
            wl = inputs.with_batch(b).workload
            wl = wl if prec is None else replace(wl, precision=prec)
            for plan in Evaluator(
                inputs.model, sub_noc(noc, size), inputs.memory, wl
            ).legal_plans():
                res.append((prec, price_worker(inputs.model, noc, inputs.memory, wl, plan)))
        return res

    ok = lambda v: sla.get("max_tpot_seconds") is None or 1 / v[2] <= sla["max_tpot_seconds"]  # noqa: E731
    agg = [_vec(aggregated_serving(w, out)) for _, w in workers(n) if w.fits_in_memory]
    pool = [pw for s in (1, 2, 4) for pw in workers(s) if pw[1].fits_in_memory]
    dis = []
    for (fp, p), (fd, d) in itertools.product(pool, pool):
        if p.devices + d.devices > n or fp != fd:
            continue
        xs, xe = kv_transfer(noc, p.plan, d.plan, p.kv_bytes_per_micro)
        for x, y in itertools.product(range(1, n + 1), range(1, n + 1)):
            if x * p.devices + y * d.devices <= n:
                dis.append(_vec(disaggregated_serving(p, d, xs, xe, out, n, counts=(x, y))))
    fronts = {}
    for name, vecs in (("aggregated", agg), ("disaggregated", dis), ("both", agg + dis)):
        v = np.unique(np.array([x for x in vecs if ok(x)]), axis=0)  # repeats dominate nothing
        fronts[name] = {tuple(np.round(r, 9)) for r in v[pareto_mask(v * SIGN)]}
    return fronts


@pytest.mark.parametrize(("sla", "chunk"), [({}, 200_000), ({"max_tpot_seconds": 3e-3}, 50)])
def test_every_front_equals_brute_force(sla, chunk, monkeypatch):
    """Pairs scored in one piece or in chunks of ~50 (the union of chunk fronts)."""
    import plena_opt.search.serving.disaggregated as dis

    monkeypatch.setattr(dis, "PAIR_CHUNK", chunk)
    inputs = EvaluatorInputs(L8, switch_noc(8, groups=2), MEM, WL)
    batches = [4, 32]
    space = ServingSpace.build(
        inputs, batches, {"max_ttft_seconds": None, "min_tps_per_seq": None, **sla}
    )
    doc = compare_serving(space, OBJ, "both", sampler="exhaustive")
    brute = _brute(inputs, batches, sla)
    for mode in ("aggregated", "disaggregated", "both"):
        got = {
            tuple(np.round((e["ttft_seconds"], e["tps_per_device"], e["tps_per_user"]), 9))
            for e in doc[mode]["front"]
        }
        assert got == brute[mode], mode
    assert "wins" in doc["verdict"] or "tie" in doc["verdict"]


def test_precisions_front_equals_brute_force_with_one_format_per_deployment():
    """``--precisions`` with ``--serving both``: workers in every format, pools paired only in
    the same format; every front equals the brute force over (format, prefill, decode, x, y)."""
    inputs = EvaluatorInputs(L8, switch_noc(8, groups=2), MEM, WL)
    batches, precs = [4, 32], ["bf16", "mxfp4"]
    sla = {"max_ttft_seconds": None, "min_tps_per_seq": None}
    space = ServingSpace.build(inputs, batches, sla, precisions=precs)
    assert {w.precision for w in space.workers} == set(precs)
    doc = compare_serving(space, OBJ, "both", sampler="exhaustive")
    brute = _brute(inputs, batches, {}, precs)
    for mode in ("aggregated", "disaggregated", "both"):
        got = {
            tuple(np.round((e["ttft_seconds"], e["tps_per_device"], e["tps_per_user"]), 9))
            for e in doc[mode]["front"]
        }
        assert got == brute[mode], mode
    for e in doc["disaggregated"]["front"]:
        assert e["prefill"]["precision"] == e["decode"]["precision"] in precs
        assert e["label"].count(e["prefill"]["precision"]) == 2
    assert all(e["plan"]["precision"] in precs for e in doc["aggregated"]["front"])
    # one format alone is a subset of the two-format space: its front is never better
    one = compare_serving(
        ServingSpace.build(inputs, batches, sla, precisions=["bf16"]), OBJ, "disaggregated",
        sampler="exhaustive",
    )  # fmt: skip
    assert one["disaggregated"]["evaluated"] < doc["disaggregated"]["evaluated"]
