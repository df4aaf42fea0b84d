"""TTFT under concurrency: the chunked-prefill burst replay (estimate.gpu_queue)."""

from __future__ import annotations

import csv

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.gpu_queue import MAX_BURST, EvaluatorStepCosts, burst_ttft


def _prefill(tokens: int) -> float:
    return 1e-3 * tokens  # 1 ms per prompt token


def _decode(n: int) -> float:
    return 1e-2 * n  # 10 ms per decoding request


def test_three_requests_hand_computed():
    """isl 100, budget 150. Step 1: request 0 whole + 50 of request 1 (150 ms). Step 2: one
    decode token, the 50 left of request 1 and 99 of request 2 (149 ms + 10 ms). Step 3: two
    decode tokens and request 2's last token (1 ms + 20 ms)."""
    q = burst_ttft(3, 100, 150, _prefill, _decode)
    assert q.steps == 3
    assert q.ttft_seconds == pytest.approx((0.150, 0.309, 0.330), rel=1e-12)
    assert q.mean_seconds == pytest.approx((0.150 + 0.309 + 0.330) / 3)
    assert q.max_seconds == pytest.approx(0.330)
    assert q.system_prefill_tps == pytest.approx(300 / 0.330)
    assert q.user_prefill_speed == pytest.approx((100 / 0.15 + 100 / 0.309 + 100 / 0.33) / 3)
    assert q.percentile_seconds(50) == pytest.approx(0.309)
    assert q.percentile_seconds(100) == pytest.approx(0.330)


def test_a_budget_that_holds_the_burst_is_the_static_prefill():
    q = burst_ttft(4, 10, 1000, _prefill, _decode)
    assert q.steps == 1 and q.ttft_seconds == pytest.approx((0.04,) * 4)
    assert q.user_prefill_speed == pytest.approx(q.system_prefill_tps / 4)


def test_queueing_spreads_first_tokens_in_groups():
    """8 prompts of 100 tokens at 200 tokens per step: pairs finish together, later pairs wait
    for the earlier ones and pay for their decode tokens."""
    q = burst_ttft(8, 100, 200, _prefill, _decode)
    t = q.ttft_seconds
    assert t[0] == t[1] and t[0] < t[2] < t[4] < t[6]
    assert all(b >= a for a, b in zip(t, t[1:], strict=False))
    # the user view is faster than the system view once first tokens spread out
    assert q.user_prefill_speed > q.system_prefill_tps / 8


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((0, 10, 100), "batch_size"),
        ((MAX_BURST + 1, 10, 10**9), "batch_size"),
        ((4, 0, 100), "input_seq_len"),
        ((8, 10, 8), "max_num_batched_tokens"),
    ],
)
def test_bad_bursts_are_refused_naming_the_field(args, field):
    with pytest.raises(PlenaInputError) as exc:
        burst_ttft(*args, _prefill, _decode)
    assert exc.value.field == field


def test_percentile_out_of_range_is_refused():
    with pytest.raises(PlenaInputError):
        burst_ttft(2, 10, 100, _prefill, _decode).percentile_seconds(101)


def _costs(model: str = "llama-3.1-70b") -> EvaluatorStepCosts:
    from plena_opt.validate.scorecard import _fig09_setup

    m, noc, memory, wl, chip, plan = _fig09_setup(model, 1)
    return EvaluatorStepCosts(m, noc, memory, chip, wl, plan)


def test_step_costs_are_the_evaluator_passes():
    from dataclasses import replace

    from plena_opt.estimate import Evaluator
    from plena_opt.validate.scorecard import _fig09_setup

    m, noc, memory, wl, chip, plan = _fig09_setup("llama-3.1-70b", 1)
    c = EvaluatorStepCosts(m, noc, memory, chip, wl, plan)
    ref = {
        b: Evaluator(m, noc, memory, replace(wl, batch_size=b, output_seq_len=1), chip).estimate(
            plan
        )
        for b in (2, 3, 4, 8)
    }
    assert c.prefill_seconds(2048) == pytest.approx(ref[2].prefill["latency_seconds"])
    mid = (ref[2].prefill["latency_seconds"] + ref[3].prefill["latency_seconds"]) / 2
    assert c.prefill_seconds(2560) == pytest.approx(mid)
    d4, d8 = (ref[b].first_token_decode["latency_seconds"] for b in (4, 8))
    assert c.decode_seconds(4) == pytest.approx(d4)
    assert c.decode_seconds(6) == pytest.approx((d4 + d8) / 2)
    # a half-prompt chunk: half the kernels of a one-prompt pass, the whole eager host time
    h = c.host_seconds
    assert h > 0
    assert c.prefill_seconds(512) == pytest.approx(h + (c.prefill_seconds(1024) - h) / 2)


def test_fig09_prefill_columns_behave_as_a_chunked_burst():
    """The data's own shape: for the dense models at BS >= 64 the measured user/system prefill
    ratio is within 7 % of the harmonic number of BS/8 (first tokens in BS/8 groups of 8
    prompts, vLLM's 8,192-token step), the premise of the fig09_prefill dataset."""
    from plena_opt.validate.scorecard import FIG09_FILES, data_dir

    for model in ("llama-3.1-70b", "llama-3.1-405b"):
        with open(data_dir() / "fig09" / FIG09_FILES[model], newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["Eager_Mode"] == "False"]
        for r in rows:
            b = int(r["BS"])
            if not 64 <= b <= 512:
                continue
            ratio = float(r["User Prefill Speed"]) / (float(r["System Prefill TPS"]) / b)
            harmonic = sum(1 / g for g in range(1, b // 8 + 1))
            assert ratio == pytest.approx(harmonic, rel=0.07), (model, b)


def test_burst_prefill_beats_the_static_pass_on_dense_fig09():
    """At BS >= 64 the burst replay is within 15 % of the measured system prefill tokens/s and
    within 12 % of the per-request speed (prompt / own TTFT) for both dense models; a static
    pass, every first token at the end of one prefill of the whole batch, is more than 50 %
    too slow per request."""
    from plena_opt.validate.scorecard import fig09_measurements, fig09_prefill_predict

    system = fig09_measurements(column="System Prefill TPS")
    user = dict(fig09_measurements(column="User Prefill Speed"))
    for model in ("llama-3.1-70b", "llama-3.1-405b"):
        pts = [(b, v) for b, v in system[model] if b >= 64]
        pred = fig09_prefill_predict(model, [b for b, _ in pts])
        users = dict(user[model])
        for b, v in pts:
            assert pred[b].system_prefill_tps == pytest.approx(v, rel=0.15), (model, b)
            assert pred[b].user_prefill_speed == pytest.approx(users[b], rel=0.12), (model, b)
            static_user = pred[b].system_prefill_tps / b  # all first tokens at the last one
            assert static_user < 0.5 * users[b], (model, b)


_GPU = ["estimate", "--model", "llama-3.1-8b", "--chip", "h200-sxm", "--noc", "hgx-h200x8",
        "--tp", "8", "--batch-size", "24", "--input-seq", "1024", "--output-seq", "16"]  # fmt: skip


def test_estimate_burst_ttft_json_matches_the_replay(capsys):
    import json

    from plena_opt import api
    from plena_opt.api.gpu_ttft import burst_ttft
    from plena_opt.cli.main import main
    from plena_opt.estimate.plan import Plan

    assert main([*_GPU, "--burst-ttft", "4096", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["burst_ttft"]
    problem = api.load_problem(
        model="llama-3.1-8b", chip="h200-sxm", noc="hgx-h200x8", memory=None, batch_size=24,
        input_seq=1024, output_seq=16,
    )  # fmt: skip
    q = burst_ttft(problem, Plan(tp=8), 4096)
    assert doc["requests"] == 24 and doc["max_num_batched_tokens"] == 4096
    assert doc["steps"] == q.steps == 7  # 4 prompts in step 1, then 4096 - decodes per step
    assert doc["mean_seconds"] == pytest.approx(q.mean_seconds)
    assert (
        doc["max_seconds"] == pytest.approx(q.max_seconds)
        and doc["max_seconds"] > doc["p50_seconds"]
    )


def test_estimate_without_the_flag_is_unchanged(capsys):
    import json

    from plena_opt.cli.main import main

    assert main([*_GPU, "--json"]) == 0
    assert "burst_ttft" not in json.loads(capsys.readouterr().out)
    assert main([*_GPU, "--burst-ttft"]) == 0
    out = capsys.readouterr().out
    # step 1: 8 prompts; 2: 7 prompts + 1016 tokens beside 8 decodes; 3: that prompt's last 8
    # tokens, 7 prompts and 1001 tokens beside 15 decodes; 4: the last 23 tokens

    assert "Burst TTFT      24 requests at once, 8192 tokens/step (4 steps)" in out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--burst-ttft", "8"], "max_num_batched_tokens"),
        (["--burst-ttft", "0"], "max_num_batched_tokens"),
        (["--burst-ttft", "--server", "localhost:1"], "without --server"),
    ],
)
def test_estimate_burst_ttft_refusals(capsys, extra, needle):
    from plena_opt.cli.main import main

    assert main([*_GPU, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and "Traceback" not in err


def test_estimate_burst_ttft_needs_a_gpu_chip(capsys):
    from plena_opt.cli.main import main

    argv = ["estimate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_cluster_32",
            "--dp", "32", "--burst-ttft"]  # fmt: skip
    assert main(argv) == 2
    assert "GPU chip" in capsys.readouterr().err
