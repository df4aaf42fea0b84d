"""Decode EP dispatch of gpt-oss-120b on H200 nodes, hand-computed (issue 13 follow-up).

Why ``--ep 16``, ``--tp 4 --ep 4`` and ``--tp 8 --ep 2`` on ``hgx-h200x8@2`` report the same
decode ``ep_dispatch`` (0.6344 ms per step): the default ``--moe-tp-mode replace`` folds the TP
ranks into EP ranks (analytic-model §4.2), so all three run the MoE on one EP group of all 16
GPUs with micro/16 = 4 tokens per rank: the same exchange. Only their attention TP all-reduce
differs. In ``keep`` mode the EP group size reaches the exchange and the times differ.

Routed decode exchange (network-model §8.2, balanced rows: token t's experts are t + 32·j,
j = 0..3, on ranks ``floor(e·ep/128)``), one stage = longest route's hop latency + busiest link:
* 2 nodes: every route that leaves a node has hops NVLink up + IB up + IB down + NVLink down.
  With ep' EP ranks split evenly over the 2 nodes, a token's distinct destination ranks number
  min(4, ep') and half of them sit on the other node, so each GPU sends
  ``(64/ep')·(min(4, ep')/2)`` token copies through its own NIC (45 GB/s); the node uplink (8
  NICs) carries 8 such GPUs and ties with it. ep' = 16 → 4·2 = 8 copies; ep' = 8 → 16;
  ep' = 4 → 32; ep' = 2 → 32 (the same: every token reaches every rank once ep' ≤ top-k).
* 1 node: the busiest GPU's NVLink up-link carries its tokens times its remote destinations.
Decode is latency-bound here: on 2 nodes the 16.6 µs of hops are 16x the 1.0 µs link time.
"""

from __future__ import annotations

import pytest
from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.models import load_model

MODEL = load_model("gpt-oss-120b")  # 36 MoE layers, hidden 2880, 128 experts, top-4
BPT = MODEL.hidden_size * 2  # bf16 activation bytes per token
BATCH = 64


def _decode(noc: str, plan: Plan) -> tuple[dict, dict]:
    chip = load_chip("h200-sxm")
    w = Workload(batch_size=BATCH, input_seq_len=1024, output_seq_len=1024, precision="bf16")
    ev = Evaluator(MODEL, load_noc_profile(noc), gpu_memory(chip), w, chip)
    est = ev.estimate(plan)
    return est.moe, est.first_token_decode["stages"][0]["comm_seconds"]


def _two_node_expected(copies_through_nic: int) -> float:
    prof = load_noc_profile("hgx-h200x8@2")
    hop = 2 * prof.levels[2].hop_latency_s + 2 * prof.levels[1].hop_latency_s
    link = copies_through_nic * BPT / prof.nic_bandwidth_bps
    assert prof.levels[1].link_bandwidth_bps == pytest.approx(8 * prof.nic_bandwidth_bps)
    return MODEL.num_layers * (hop + link)


def test_replace_mode_gives_tp4_ep4_and_tp8_ep2_the_same_ep16_exchange_on_two_nodes() -> None:
    plans = (Plan(ep=16), Plan(tp=4, ep=4), Plan(tp=8, ep=2))
    runs = [_decode("hgx-h200x8@2", p) for p in plans]
    expected = _two_node_expected(4 * 2)  # 4 tokens per rank, 2 of 4 destinations off-node
    for moe, comm in runs:
        assert (moe["tp"], moe["ep"], moe["decode"]["tokens_per_rank"]) == (1, 16, 4)
        assert comm["ep_dispatch"] == pytest.approx(expected, rel=1e-12)
        assert comm["ep_combine"] == comm["ep_dispatch"]
    assert expected == pytest.approx(0.6344362e-3, rel=1e-6)  # the figure in question
    # the plans do reach the pricing: their attention TP all-reduces differ
    ar = [comm.get("tp_all_reduce", 0.0) for _, comm in runs]
    assert ar[0] == 0.0 < ar[1] < ar[2]
    # latency-bound: the hops (2 NVLink + 2 InfiniBand) dwarf the 1 µs on the NICs
    prof = load_noc_profile("hgx-h200x8@2")
    hop = 2 * prof.levels[2].hop_latency_s + 2 * prof.levels[1].hop_latency_s
    assert hop > 10 * (8 * BPT / prof.nic_bandwidth_bps)


@pytest.mark.parametrize(
    ("tp", "ep", "copies"),
    [(2, 8, 8 * 2), (4, 4, 16 * 2), (8, 2, 32 * 1)],
)
def test_keep_mode_prices_each_ep_group_on_two_nodes(tp: int, ep: int, copies: int) -> None:
    moe, comm = _decode("hgx-h200x8@2", Plan(tp=tp, ep=ep, moe_tp_mode="keep"))
    assert (moe["tp"], moe["ep"], moe["decode"]["tokens_per_rank"]) == (tp, ep, BATCH // ep)
    assert comm["ep_dispatch"] == pytest.approx(_two_node_expected(copies), rel=1e-12)
    assert comm["ep_dispatch"] > _two_node_expected(4 * 2)  # slower than the replace EP 16


@pytest.mark.parametrize(
    ("plan", "copies"),
    [
        # replace: all three are EP 8 over the node, 8 tokens per rank; rank 1 (tokens 8-15,
        # experts on ranks 0, 2, 4, 6) sends each token to 4 remote ranks
        (Plan(ep=8), 8 * 4),
        (Plan(tp=2, ep=4), 8 * 4),
        (Plan(tp=4, ep=2), 8 * 4),
        # keep EP 4: 16 tokens, each to all 4 ranks, 3 of them remote
        (Plan(tp=2, ep=4, moe_tp_mode="keep"), 16 * 3),
        # keep EP 2: 32 tokens, each to both ranks, 1 remote (ties with EP 8)
        (Plan(tp=4, ep=2, moe_tp_mode="keep"), 32 * 1),
    ],
)
def test_one_node_exchange_is_the_busiest_gpus_nvlink_bytes(plan: Plan, copies: int) -> None:
    prof = load_noc_profile("hgx-h200x8")
    moe, comm = _decode("hgx-h200x8", plan)
    assert moe["ep"] == (8 if plan.moe_tp_mode == "replace" else plan.ep)
    l1 = prof.levels[2]
    per_layer = 2 * l1.hop_latency_s + copies * BPT / l1.link_bandwidth_bps
    assert comm["ep_dispatch"] == pytest.approx(MODEL.num_layers * per_layer, rel=1e-12)
