"""``estimate --concurrency/--request-rate --engine``: a plan under a serving workload, and the
steady state against the replay at fixed lengths (the lock-step regime)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from plena_opt.cli.main import main
from plena_opt.serving import (
    EngineModel,
    ServingWorkload,
    StepModel,
    closed_loop,
    engine_model,
    replay_closed_loop,
)
from tests.serving.test_serving import LinearCosts

GIB = 1 << 30
GPU = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--devices", "1", "--input-seq", "1024", "--output-seq", "256"]  # fmt: skip

# Fixed lengths: the steady state (``steady._lockstep``) against the replay of the same scheduler
# after its warm-up waves. TPOT agrees within 5 %: both count the same prompt work per cycle, and
# the steady state places it exactly (the other groups' prompts fall in a request's decode
# window). TTFT agrees within 20 %: the steady state takes every lock-step group whole (⌊room /
# isl⌋ prompts, or back-to-back full steps for longer prompts), while the replay's periodic
# pattern keeps a few smaller groups and straddling prompts left over from the start burst.
TTFT_TOLERANCE, TPOT_TOLERANCE = 0.20, 0.05


def _linear(budget: int = 2048) -> StepModel:
    return StepModel(LinearCosts(), EngineModel("test", budget, None, None), gpus=2)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def llama8b() -> StepModel:
    from deepstack import load_noc_profile
    from deepstack.gpu_nodes import first_devices

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Plan, Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip = load_chip("h100-sxm")
    noc = first_devices(load_noc_profile("hgx-h100x8"), 1)
    wl = Workload(batch_size=1, input_seq_len=1024, output_seq_len=256)
    # vLLM's scheduler without async scheduling (before 0.14.0): the lock-step form does not
    # model an overlapping mixed engine at fixed lengths (serving.steady, "Overlap scheduling")
    eng = replace(engine_model("vllm", 80 * GIB), overlap_schedule=False)
    return StepModel.from_problem(load_model("llama-3.1-8b"), noc, gpu_memory(chip), chip, wl,
                                  Plan(), eng)  # fmt: skip


@pytest.mark.parametrize("c, isl, osl", [(2, 1024, 256), (4, 1024, 256), (16, 512, 128),
                                         (100, 512, 128), (8, 300, 64), (50, 300, 64)])  # fmt: skip
def test_fixed_length_steady_state_agrees_with_the_replay(c, isl, osl):
    step = _linear()
    steady = closed_loop(step, ServingWorkload(c, isl, osl))
    replay = replay_closed_loop(step, ServingWorkload(c, isl, osl))
    assert steady.ttft_seconds == pytest.approx(replay.ttft_seconds, rel=TTFT_TOLERANCE)
    assert steady.tpot_seconds == pytest.approx(replay.tpot_seconds, rel=TPOT_TOLERANCE)


@pytest.mark.parametrize("c", [4, 32, 128])
def test_fixed_length_steady_state_agrees_on_an_evaluated_plan(llama8b, c):
    steady = closed_loop(llama8b, ServingWorkload(c, 1024, 256))
    replay = replay_closed_loop(llama8b, ServingWorkload(c, 1024, 256))
    assert steady.ttft_seconds == pytest.approx(replay.ttft_seconds, rel=TTFT_TOLERANCE)
    assert steady.tpot_seconds == pytest.approx(replay.tpot_seconds, rel=TPOT_TOLERANCE)


def test_fixed_lengths_stay_in_lock_step_where_drawn_lengths_spread(llama8b):
    # Four 1k prompts on an 8k budget: prefilled together in every cycle (one 4k-token step),
    # not one at a time as spread clients would be: 2.1x the spread form's TTFT at the same φ
    # (with drawn lengths, so with the step in flight: ``request_path.cycles_spread``).
    from plena_opt.serving.steady import _cycle

    fixed = closed_loop(llama8b, ServingWorkload(4, 1024, 256))
    drawn = ServingWorkload(4, 1024, 256, range_ratio=0.5)
    spread_ttft, _ = _cycle(llama8b, drawn, 4, fixed.decode_batch / 4)
    assert fixed.ttft_seconds == pytest.approx(llama8b.step_seconds(4096, 0), rel=1e-6)
    assert fixed.ttft_seconds > 2 * spread_ttft
    assert closed_loop(llama8b, drawn).ttft_seconds == pytest.approx(spread_ttft, rel=0.05)


def test_estimate_prints_the_under_load_block(capsys):
    assert main([*GPU, "--concurrency", "32", "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "TTFT" in out.split("Under load")[0]  # the static-batch figures come first
    block = out.split("Under load")[1]
    assert "closed loop, 32 concurrent clients, 1024 prompt + 256 output tokens" in block
    assert (
        "engine vllm 0.34.0: chunked prefill 8192 tokens/step, max running 32 (the plan's "
        "batch: max_num_seqs in its launch files; "
    ) in block  # --batch-size defaults to C
    for name in ("TTFT ms", "TPOT ms", "ITL ms", "E2E ms", "output tokens/s per GPU"):
        assert name in block


def test_estimate_json_has_the_serving_under_load_document(capsys):
    assert main([*GPU, "--concurrency", "32", "--engine", "sglang", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ttft_seconds"] > 0 and "prefill" in doc  # the static-batch figures stay
    load = doc["serving_under_load"]
    assert load["workload"] == {"kind": "closed_loop", "concurrency": 32,
                                "request_rate_per_s": None, "input_seq_len": 1024,
                                "output_seq_len": 256, "range_ratio": 0.0}  # fmt: skip
    assert load["engine"]["name"] == "sglang" and load["engine"]["version"] == "0.5.23"
    assert load["engine"]["max_num_batched_tokens"] == 8192
    replay, steady = load["replay"], load["steady_state"]
    for key in ("ttft_seconds", "tpot_seconds", "itl_seconds", "e2e_seconds"):
        s = replay[key]
        assert 0 < s["p50"] <= s["p90"] <= s["p99"]
        assert steady[key] > 0
    assert steady["ttft_seconds"] == pytest.approx(replay["ttft_seconds"]["mean"], rel=0.2)
    assert steady["tpot_seconds"] == pytest.approx(replay["tpot_seconds"]["mean"], rel=0.05)
    # SI: seconds, tokens/s; E2E = TTFT + (output − 1)·TPOT per request, so on the means too
    e2e = replay["ttft_seconds"]["mean"] + 255 * replay["tpot_seconds"]["mean"]
    assert replay["e2e_seconds"]["mean"] == pytest.approx(e2e, rel=1e-9)
    tps = replay["request_throughput_per_s"] * 256
    assert replay["output_tps_per_gpu"] == pytest.approx(tps)  # one GPU
    assert load["benchmark_run"]["ttft_seconds"] >= replay["ttft_seconds"]["mean"] * 0.99


def test_a_request_rate_prices_poisson_arrivals(capsys):
    assert main([*GPU, "--request-rate", "4", "--json"]) == 0
    load = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert load["workload"]["kind"] == "poisson" and load["workload"]["request_rate_per_s"] == 4
    assert load["engine"]["name"] == "vllm"  # the default engine
    assert load["replay"]["request_throughput_per_s"] == 4 and load["benchmark_run"] is None


def test_more_clients_raise_tpot_and_throughput():
    from plena_opt import api

    problem = api.load_problem(model="llama-3.1-8b", chip="h100-sxm", noc="hgx-h100x8",
                               devices=1, input_seq=1024, output_seq=256)  # fmt: skip
    low = api.serve_under_load(problem, api.Plan(), "vllm", concurrency=4)
    high = api.serve_under_load(problem, api.Plan(), "vllm", concurrency=64)
    assert high.tpot.mean > low.tpot.mean
    assert high.output_tps_per_gpu > low.output_tps_per_gpu
    assert high.output_tps_per_user < low.output_tps_per_user


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--concurrency", "0"], "--concurrency must be between 1 and 4,096"),
        (["--concurrency", "5000"], "--concurrency must be between 1 and 4,096"),
        (["--request-rate", "0"], "--request-rate must be above 0 and at most 10,000"),
        (["--request-rate", "1e9"], "--request-rate must be above 0 and at most 10,000"),
        (["--concurrency", "4", "--request-rate", "1"], "not both"),
        (["--engine-version", "0.34.0"], "needs --concurrency or --request-rate"),
        (["--concurrency", "4", "--engine", "tgi"], "engine"),
        (["--concurrency", "4", "--engine-version", "0.6.0"], "version 0.34.0 only"),
        (["--concurrency", "4", "--request-rate", "1", "--server", "localhost:1"], "not both"),
        (["--concurrency", "4", "--burst-ttft"], "give one"),
        (["--concurrency", "4", "--range-ratio", "1"], "--range-ratio must be at least 0"),
        (["--concurrency", "4", "--range-ratio", "-0.1"], "--range-ratio must be at least 0"),
        (["--request-rate", "5000"], "request_rate"),  # beyond what the plan serves
    ],
)  # fmt: skip
def test_bad_load_flags_are_input_errors(capsys, extra, words):
    assert main([*GPU, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and words in err and "Traceback" not in err


def test_engine_on_a_plena_chip_is_refused_by_name(capsys):
    argv = ["estimate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8", "--tp", "8",
            "--concurrency", "8", "--engine", "vllm"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no serving engine targets PLENA chips" in err


def test_a_plan_the_serving_model_cannot_express_is_refused(capsys):
    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--tp", "4", "--cp", "2", "--concurrency", "8"]  # fmt: skip
    assert main(argv) == 2
    assert "--cp 2: serving under load models engine instances" in capsys.readouterr().err


def test_replay_itl_pools_every_gap_and_shows_the_prefill_stalls(llama8b):
    m = replay_closed_loop(llama8b, ServingWorkload(32, 1024, 256))
    # fixed lengths: every request has 255 gaps, so the pooled mean is the mean TPOT
    assert m.itl_seconds == pytest.approx(m.tpot_seconds, rel=1e-9)
    # most gaps are decode steps; the other groups' prompt steps are the slow tail
    assert m.itl_p50_seconds == pytest.approx(llama8b.step_seconds(0, m.decode_batch), rel=0.2)
    assert m.itl_p99_seconds > 5 * m.itl_p50_seconds
    assert m.e2e_p50_seconds <= m.e2e_p90_seconds <= m.e2e_p99_seconds


def test_weighted_percentile_is_nearest_rank_over_counts():
    from plena_opt.serving.workload import percentile, weighted_percentile

    pairs = [(3.0, 2), (1.0, 5), (10.0, 1), (7.0, 0)]
    flat = [3.0] * 2 + [1.0] * 5 + [10.0]
    for q in (1, 50, 62.5, 63, 90, 99, 100):
        assert weighted_percentile(pairs, q) == percentile(flat, q)


def test_drawn_lengths_spread_the_clients(capsys):
    assert main([*GPU, "--concurrency", "8", "--range-ratio", "0.5", "--json"]) == 0
    drawn = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert drawn["workload"]["range_ratio"] == 0.5
    assert main([*GPU, "--concurrency", "8", "--json"]) == 0
    fixed = json.loads(capsys.readouterr().out)["serving_under_load"]
    # eight fixed 1k prompts are prefilled together every cycle; drawn ones one by one
    assert fixed["replay"]["ttft_seconds"]["mean"] > 2 * drawn["replay"]["ttft_seconds"]["mean"]
    assert drawn["replay"]["ttft_seconds"]["p99"] > drawn["replay"]["ttft_seconds"]["p50"]
    assert drawn["steady_state"]["ttft_seconds"] == pytest.approx(
        drawn["replay"]["ttft_seconds"]["mean"], rel=0.2
    )


def test_a_dp_plan_is_priced_as_its_replicas(capsys):
    """--dp 2 on 8 GPUs: two TP 4 engines, each with half the clients; the figures are one
    replica's, the same as pricing that replica alone on its 4 GPUs."""
    base = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--input-seq", "1024", "--output-seq", "128", "--range-ratio", "0.5",
            "--json"]  # fmt: skip
    assert main([*base, "--tp", "4", "--dp", "2", "--concurrency", "16"]) == 0
    two = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert main([*base, "--devices", "4", "--tp", "4", "--concurrency", "8"]) == 0
    one = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert two["replicas"] == 2 and one["replicas"] == 1 and two["gpus"] == 4
    assert two["steady_state"] == one["steady_state"] and two["replay"] == one["replay"]
