"""Attention-DP imbalance (issue 24): a MoE engine's attention-DP ranks wait each decode step for
the busiest rank; the expected maximum is checked against a Monte Carlo of the same model and
against the exact normal order statistics; dense DP replicas and static estimates are unchanged."""

from __future__ import annotations

import json
import math
import random

import pytest

from plena_opt.cli.main import main
from plena_opt.serving import EngineModel, ServingWorkload, StepModel, closed_loop
from plena_opt.serving.attention_dp import (
    AttentionDpImbalance,
    expected_max_standard_normal,
    imbalance_of,
)
from plena_opt.serving.replay import replay_closed_loop

MOE = ["estimate", "--model", "qwen3-30b-a3b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--devices", "8", "--input-seq", "1024", "--output-seq", "256"]  # fmt: skip


def test_blom_matches_the_exact_expected_maximum_of_normals() -> None:
    assert expected_max_standard_normal(1) == 0.0
    # exact: E[max of 2] = 1/sqrt(pi); E[max of 8] = 1.4236 (integral of x·8Φ⁷φ)
    assert expected_max_standard_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    assert expected_max_standard_normal(8) == pytest.approx(1.4236, rel=0.01)
    z = [expected_max_standard_normal(j) for j in (1, 2, 4, 8, 16, 64)]
    assert z == sorted(z) and len(set(z)) == len(z)


def test_factor_is_one_at_one_rank_and_grows_with_the_ranks() -> None:
    assert AttentionDpImbalance.of(1, 1024, 1024, 0.8).factor(64) == 1.0
    one = AttentionDpImbalance.of(8, 1024, 1024)
    assert one.factor(0) == 1.0
    # the same four requests per rank, more ranks: a larger expected maximum
    f = [AttentionDpImbalance.of(k, 1024, 1024).factor(4 * k) for k in (2, 4, 8, 16, 32)]
    assert f == sorted(f) and f[0] > 1.0 and len(set(f)) == len(f)


def test_factor_shrinks_when_the_prompt_dominates_the_output() -> None:
    # fixed lengths: only the decode progress spreads the KV (σ = L_out/√12), the mean grows
    f = [AttentionDpImbalance.of(8, li, 1024).factor(64) for li in (128, 1024, 8192, 65536)]
    assert f == sorted(f, reverse=True) and f[-1] < 1.01
    # more requests per rank average the spread out (σ/μ ∝ 1/√m)
    g = AttentionDpImbalance.of(8, 1024, 1024, 0.8)
    assert g.factor(8) > g.factor(64) > g.factor(512) > 1.0


def test_request_count_imbalance_when_the_ranks_do_not_divide_the_requests() -> None:
    a = AttentionDpImbalance.of(8, 1024, 256)
    # 9 requests on 8 ranks: the one rank holding two is the busiest (two requests' mean KV,
    # against 9/8 on the mean rank); at 16 every rank holds two and only the spread remains
    assert a.busiest_kv(9) == pytest.approx(2 * a.mean_kv)
    assert a.factor(9) == pytest.approx(16 / 9)
    assert 1.0 < a.factor(16) < a.factor(9)


def _monte_carlo(ranks: int, n: int, li: int, lo: int, r: float, trials: int = 4000) -> float:
    """Mean over trials of the busiest rank's KV tokens: requests dealt round-robin, each at a
    uniform point of its output, lengths drawn uniformly within ±r (the replay's draw)."""
    rng = random.Random(7)

    def kv() -> float:
        i = rng.uniform(li * (1 - r), li * (1 + r))
        o = rng.uniform(lo * (1 - r), lo * (1 + r))
        return i + rng.random() * o

    total = 0.0
    for _ in range(trials):
        loads = [0.0] * ranks
        for j in range(n):
            loads[j % ranks] += kv()
        total += max(loads)
    return total / trials


@pytest.mark.parametrize("ranks, n, li, lo, r", [(8, 32, 1024, 1024, 0.0), (8, 32, 1024, 1024, 0.8),
                                                 (4, 64, 256, 2048, 0.0), (16, 40, 1024, 512, 0.8),
                                                 (8, 8, 1024, 1024, 0.8)])  # fmt: skip
def test_expected_max_agrees_with_a_monte_carlo(ranks, n, li, lo, r) -> None:
    a = AttentionDpImbalance.of(ranks, li, lo, r)
    mc = _monte_carlo(ranks, n, li, lo, r)
    assert a.busiest_kv(n) == pytest.approx(mc, rel=0.015)
    # and the excess over the mean rank, which the step time pays, within 15 %
    mean_rank = n / ranks * a.mean_kv
    assert a.busiest_kv(n) - mean_rank == pytest.approx(mc - mean_rank, rel=0.15)


def test_dense_models_and_plans_without_attention_dp_get_no_imbalance() -> None:
    from plena_opt.estimate import Plan
    from plena_opt.models import load_model

    dense, moe = load_model("llama-3.1-8b"), load_model("qwen3-30b-a3b")
    assert imbalance_of(dense, Plan(dp=8), 1024, 256, 0.8) is None  # DP replicas: independent
    assert imbalance_of(moe, Plan(tp=8), 1024, 256, 0.8) is None  # one attention rank
    assert imbalance_of(moe, Plan(tp=2, dp=4), 1024, 256, 0.8) is None  # replicas of TP2
    assert imbalance_of(moe, Plan(ep=8), 1024, 256, 0.8) is not None


class KvCosts:
    """Made-up step costs whose decode grows with the KV length: first step at KV = L_in, the
    mean over the output at L_in + (L_out − 1)/2 (seconds)."""

    host_seconds = 0.0

    def __init__(self, li: int, lo: int) -> None:
        from plena_opt.estimate import Workload

        self.workload = Workload(batch_size=1, input_seq_len=li, output_seq_len=lo)

    def prefill_seconds(self, tokens: float) -> float:
        return 0.004 + 2e-6 * tokens

    def _step(self, n: int, kv: float) -> float:
        return 0.005 + 1e-4 * n + 2e-9 * math.ceil(n / 8) * kv  # 8 attention-DP ranks

    def decode_seconds(self, n: int) -> float:
        return self._step(n, self.workload.input_seq_len)

    def decode_mean_seconds(self, n: int) -> float:
        w = self.workload
        return self._step(n, w.input_seq_len + (w.output_seq_len - 1) / 2)


def _kv_step(li: int, lo: int, r: float, imbalance: bool) -> StepModel:
    adp = AttentionDpImbalance.of(8, li, lo, r) if imbalance else None
    return StepModel(KvCosts(li, lo), EngineModel("test", 8192, None, None), 8, adp)  # type: ignore[arg-type]


def test_the_step_pays_the_busiest_rank_and_the_replay_agrees_with_the_steady_state() -> None:
    li, lo, r, c = 2048, 512, 0.8, 64
    plain, slow = _kv_step(li, lo, r, False), _kv_step(li, lo, r, True)
    n = 64  # 8 per rank: the KV part is scaled by the busiest rank's factor, the rest is not
    kv_part = plain.decode_seconds(n) - KvCosts(li, lo)._step(n, 0)
    extra = slow.decode_seconds(n) - plain.decode_seconds(n)
    assert extra == pytest.approx(kv_part * (slow.attention_dp.factor(n) - 1), rel=1e-6)
    wl = ServingWorkload(c, li, lo, r)
    st0, st1 = closed_loop(plain, wl), closed_loop(slow, wl)
    rp0, rp1 = replay_closed_loop(plain, wl), replay_closed_loop(slow, wl)
    assert st1.tpot_seconds > st0.tpot_seconds and rp1.tpot_seconds > rp0.tpot_seconds
    # both read the same step times: the TPOT increase agrees on the mean
    assert st1.tpot_seconds / st0.tpot_seconds == pytest.approx(
        rp1.tpot_seconds / rp0.tpot_seconds, rel=0.01
    )
    assert slow.with_spread(0.0).attention_dp.sd_kv < slow.attention_dp.sd_kv


def test_a_moe_attention_dp_plan_under_load_is_slower_and_says_why(capsys) -> None:
    assert main([*MOE, "--ep", "8", "--concurrency", "32", "--range-ratio", "0.8", "--json"]) == 0
    load = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert load["attention_dp_imbalance"] > 1.0
    tpot = load["steady_state"]["tpot_seconds"]
    off = StepModel._straggler  # what ``straggler_seconds`` and a first decode read add
    try:  # the same plan without the imbalance
        StepModel._straggler = lambda self, n, grow: 0.0  # type: ignore[method-assign]
        assert main([*MOE, "--ep", "8", "--concurrency", "32", "--range-ratio", "0.8",
                     "--json"]) == 0  # fmt: skip
    finally:
        StepModel._straggler = off  # type: ignore[method-assign]
    base = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert tpot > base["steady_state"]["tpot_seconds"]
    assert load["replay"]["tpot_seconds"]["mean"] > base["replay"]["tpot_seconds"]["mean"]
    assert main([*MOE, "--ep", "8", "--concurrency", "32"]) == 0
    assert "attention DP: busiest rank's KV" in capsys.readouterr().out


def test_dense_dp_replicas_under_load_are_unchanged(capsys) -> None:
    dense = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
             "--devices", "2", "--dp", "2", "--input-seq", "1024", "--output-seq", "256",
             "--concurrency", "16", "--range-ratio", "0.8", "--json"]  # fmt: skip
    assert main(dense) == 0
    doc = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert doc["attention_dp_imbalance"] is None and doc["replicas"] == 2
    off = StepModel._straggler  # what ``straggler_seconds`` and a first decode read add
    try:  # a straggler term that would show if it were applied
        StepModel._straggler = lambda self, n, grow: 1.0  # type: ignore[method-assign]
        assert main(dense) == 0
    finally:
        StepModel._straggler = off  # type: ignore[method-assign]
    again = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert again["steady_state"] == doc["steady_state"] and again["replay"] == doc["replay"]


def test_a_speculative_verify_step_waits_for_the_busiest_rank_too() -> None:
    from plena_opt.serving.speculative import Speculation, VerifyStepModel

    spec = Speculation("ngram", 2, (0.5, 0.5), "test")
    li, lo = 2048, 512
    plain, slow = _kv_step(li, lo, 0.8, False), _kv_step(li, lo, 0.8, True)
    v0 = VerifyStepModel(spec, KvCosts(li, lo), plain, 48).verify_seconds(64)
    v1 = VerifyStepModel(spec, KvCosts(li, lo), slow, 48).verify_seconds(64)
    assert v1 - v0 == pytest.approx(slow.straggler_seconds(64)) and v1 > v0


def test_the_imbalance_travels_over_grpc() -> None:
    from dataclasses import replace

    from plena_opt.api.under_load import Stats, UnderLoad
    from plena_opt.api.under_load_wire import under_load_from_proto, under_load_to_proto
    from plena_opt.serving.error_bars import ErrorBand
    from plena_opt.serving.workload import ServingMetrics

    s = Stats(0.1, 0.1, 0.2, 0.3)
    st = ServingMetrics(0.1, 0.01, 2.0, 5.0, 1000.0, 125.0, 100.0, 32.0)
    band = ErrorBand("g", 3, 0.5, 2.0, 0.5, 2.0, 0.9)
    u = UnderLoad("vllm", "0.34.0", 8192, None, 512, 0.0, "src", 32, None, 1024, 256, 0.8, 8,
                  128, s, s, s, s, 125.0, 100.0, 5.0, st, None, band, 1, 1.3)  # fmt: skip
    assert under_load_from_proto(under_load_to_proto(u)) == u
    none = replace(u, attention_dp_imbalance=None)
    assert under_load_from_proto(under_load_to_proto(none)).attention_dp_imbalance is None
