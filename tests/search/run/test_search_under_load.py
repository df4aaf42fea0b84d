"""``search --concurrency C --engine E`` (issue 23): objectives and SLAs judged on the plans'
under-load figures at ``--percentile``; the static batch's kept under ``static_*``."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from plena_opt.cli.main import main

# The example: Llama-3.1-70B with 8k prompts on 8×H100 under 64 concurrent clients
SEARCH = ["search", "--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
          "--precision", "fp8", "--input-seq", "8192", "--output-seq", "1024", "--batch-sizes",
          "64", "--storage", ":memory:", "--trials", "100", "--objectives", "ttft,tps-per-device",
          "--quiet"]  # fmt: skip
LOAD = ["--concurrency", "64", "--range-ratio", "0.8"]


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_ttft_sla_the_static_batch_misses_is_met_under_load(capsys):
    """Static: every plan's TTFT is the prefill of the whole batch of 64 8k prompts (> 2 s): no
    plan meets 2 s. Under load the engine's chunked prefill gives TTFT well under it."""
    code, static = _json(capsys, [*SEARCH, "--max-ttft-ms", "2000"])
    assert code == 2 and static["front"] == []
    code, doc = _json(capsys, [*SEARCH, *LOAD, "--max-ttft-ms", "2000"])
    assert code == 0 and doc["front"]
    assert "under load" in doc["figures_basis"] and doc["under_load"]["concurrency"] == 64
    for e in doc["front"]:
        u = e["under_load"]
        assert e["ttft_seconds"] == pytest.approx(u["ttft_seconds"]) and u["ttft_seconds"] < 2
        assert e["static_ttft_seconds"] > 2  # the static batch's figure, kept under its name
        assert e["tps_per_sequence"] == pytest.approx(1 / u["tpot_seconds"])
        assert u["percentile"] == "p50"


def test_the_percentile_judged_moves_the_figures_not_the_mean(capsys):
    _, p50 = _json(capsys, [*SEARCH, *LOAD])
    _, p99 = _json(capsys, [*SEARCH, *LOAD, "--percentile", "p99"])
    a = {e["label"]: e["under_load"] for e in p50["front"]}
    b = {e["label"]: e["under_load"] for e in p99["front"]}
    both = set(a) & set(b)
    assert both
    for label in both:
        assert a[label]["ttft_mean_seconds"] == b[label]["ttft_mean_seconds"]
        assert b[label]["ttft_seconds"] > a[label]["ttft_seconds"]
        assert b[label]["tpot_seconds"] >= a[label]["tpot_seconds"]
        assert b[label]["percentile"] == "p99"


def _loaded(concurrency: int = 16):
    from plena_opt import api
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.search.request import SearchRequest

    req = SearchRequest(concurrency=concurrency, range_ratio=0.8)
    inputs = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                              input_seq=1024, output_seq=256)  # fmt: skip
    return inputs, loaded_factory(inputs.evaluator, inputs, req)(16)


def test_a_plan_prices_as_its_steady_state_and_dp_replicas_split_the_clients():
    from plena_opt import api
    from plena_opt.estimate.disaggregated import sub_noc
    from plena_opt.estimate.plan import Plan

    inputs, ev = _loaded(16)
    whole = ev.evaluate(Plan(tp=8))
    u = api.serve_under_load(inputs, Plan(tp=8), concurrency=16, range_ratio=0.8)
    assert whole.under_load["ttft_mean_seconds"] == pytest.approx(u.steady.ttft_seconds)
    assert whole.under_load["tpot_mean_seconds"] == pytest.approx(u.steady.tpot_seconds)
    assert whole.tps == pytest.approx(u.steady.output_tps)
    two = ev.evaluate(Plan(tp=4, dp=2))  # two TP4 engines, 8 clients each
    half = replace(inputs, noc=sub_noc(inputs.noc, 4))
    r = api.serve_under_load(half, Plan(tp=4), concurrency=8, range_ratio=0.8).steady
    assert two.under_load["tpot_mean_seconds"] == pytest.approx(r.tpot_seconds)
    assert two.tps == pytest.approx(2 * r.output_tps)
    assert two.static_figures["static_tps"] != two.tps


def test_a_plan_the_serving_model_does_not_express_scores_invalid():
    from plena_opt.estimate.plan import Plan

    _, ev = _loaded()
    m = ev.evaluate(Plan(tp=4, cp=2))
    assert m.ttft_seconds != m.ttft_seconds  # NaN: not priced as something else
    assert "one engine instance" not in m.under_load["refused"]
    assert "DP replicas" in m.under_load["refused"]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "5000"], "--concurrency"),
        (["--request-rate", "-1"], "--request-rate"),
        (["--concurrency", "4", "--request-rate", "1"], "not both"),
        (["--engine-version", "0.5.23"], "--engine-version needs --concurrency or --request-rate"),
        (["--engine", "sglang", "--range-ratio", "0.5"], "--range-ratio needs --concurrency"),
        (["--concurrency", "4", "--range-ratio", "1"], "--range-ratio"),
        (["--concurrency", "4", "--recheck", "2"], "no --recheck under load"),
        (["--concurrency", "4", "--workers", "2"], "--workers is not priced under load"),
        (["--concurrency", "4", "--engine", "tgi"], "engine"),
        (["--concurrency", "4096", "--output-seq", "8192"], "the replay would generate"),
    ],
)
def test_bad_load_flags_are_input_errors(capsys, extra, words):
    assert main([*SEARCH, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and words in err and "Traceback" not in err


# The search's percentile (steady mean × the pilot replay's percentile / mean ratio) against
# each plan's own replay: Llama-3.1-8B, 2k/256 ±80 %, 32 clients, plans from one TP8 engine to
# eight TP1 replicas (the pilot is the TP8 plan, its ratio from the search's own 128-request
# replay). Each plan's reference replay measures 64 requests per client: a replica of 4 clients
# replayed as ``serve_under_load`` does (64 requests) has its p99 as its second-largest TTFT,
# which moved it by 30 % between runs once a follow-up request misses the step in flight
# (``serving.request_path``). Measured: TTFT within 22 % at p90 and 19 % at p99, TPOT within
# 3 % at p90 and 10 % at p99 (r10ttft, 2026-12-07); 25 % is the bound the test holds.
PERCENTILE_TOLERANCE = 0.25
REFERENCE_REQUESTS_PER_CLIENT = 64


@pytest.mark.parametrize("q", ["p90", "p99"])
def test_the_search_percentile_agrees_with_each_plans_replay(q, monkeypatch):
    from plena_opt import api, serving
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.estimate.disaggregated import sub_noc
    from plena_opt.estimate.plan import Plan
    from plena_opt.search.request import SearchRequest

    req = SearchRequest(concurrency=32, range_ratio=0.8, percentile=q)
    inputs = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                              input_seq=2048, output_seq=256)  # fmt: skip
    ev = loaded_factory(inputs.evaluator, inputs, req)(32)
    plans = (Plan(tp=8), Plan(tp=4, dp=2), Plan(tp=2, dp=4), Plan(dp=8))
    searched = [ev.evaluate(plan).under_load for plan in plans]  # the pilot replays first
    replay = serving.replay_closed_loop

    def long(step, wl, measured=None, seed=0, warmup_waves=4):  # noqa: ANN001, ANN202
        n = REFERENCE_REQUESTS_PER_CLIENT * wl.concurrency
        return replay(step, wl, n, seed, warmup_waves)

    monkeypatch.setattr(serving, "replay_closed_loop", long)
    for plan, u in zip(plans, searched, strict=True):
        one = replace(plan, dp=1)
        own = replace(inputs, noc=sub_noc(inputs.noc, one.world_size))
        r = api.serve_under_load(own, one, concurrency=32 // plan.dp, range_ratio=0.8)
        assert u["ttft_seconds"] == pytest.approx(getattr(r.ttft, q), rel=PERCENTILE_TOLERANCE)
        assert u["tpot_seconds"] == pytest.approx(getattr(r.tpot, q), rel=PERCENTILE_TOLERANCE)


def test_the_recommended_estimate_command_carries_the_load(capsys):
    assert main([*SEARCH, *LOAD]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "estimate it:" in x)
    assert line.endswith("--concurrency 64 --engine vllm --range-ratio 0.8")


def test_plans_not_priced_under_load_are_not_counted_as_breaking_an_sla(capsys):
    """PP/CP plans are refused under load (NaN objectives): they are reported once as not
    priced, with the reason, and neither counted against --max-tpot-ms nor given as its
    nearest miss (that once printed an infinite excess and failed the JSON output)."""
    argv = ["search", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--input-seq", "1024", "--output-seq", "256", "--batch-sizes", "16",
            "--storage", ":memory:", "--concurrency", "16", "--max-tpot-ms", "2.0",
            "--quiet"]  # fmt: skip
    code, doc = _json(capsys, argv)
    assert code in (0, 2)
    refused = [w for w in doc["warnings"] if "not priced" in w and "DP replicas" in w]
    assert len(refused) == 1
    n_refused = int(refused[0].split()[0])
    assert n_refused > 0
    priced = doc["legal_points"] - n_refused
    assert 0 < doc["infeasible"].get("max_tpot", 0) <= priced
    for miss in doc["nearest_miss"].values():
        assert miss["excess"] > 0 and miss["excess"] < float("inf")


def test_under_a_concurrency_the_plan_batch_is_the_concurrency(capsys):
    """A plan's batch is its engine's cap on running requests (``max_num_seqs`` in the launch
    files). Under ``--concurrency 16`` the front once listed b4/b16/b64 of one plan with the same
    figures, and b4's launch file would have queued 12 of the 16 clients the figures admitted."""
    argv = ["search", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--input-seq", "1024", "--output-seq", "256", "--batch-sizes", "4,16,64",
            "--storage", ":memory:", "--concurrency", "16", "--quiet"]  # fmt: skip
    code, doc = _json(capsys, argv)
    assert code == 0 and doc["front"]
    assert {e["key"].rsplit("-", 1)[1] for e in doc["front"]} == {"b16"}
    assert any("batch sizes 4,16,64 not searched" in w for w in doc["warnings"])
    assert main(["export", doc["recommendation"]["key"], "--model", "llama-3.1-8b",
                 "--engine", "vllm"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    plan_dp = doc["recommendation"]["plan"]["dp"] * doc["recommendation"]["plan"]["ep"]
    assert f"--max-num-seqs {-(-16 // plan_dp)}" in out


def test_under_a_request_rate_a_plan_is_priced_with_the_running_cap_it_exports():
    """Under ``--request-rate`` a plan's batch is the running cap its launch files write
    (``max_num_seqs``): at 20 requests/s a TP8 Llama-3.1-8B engine holds ≈ 20 requests decoding,
    so b4's launch file cannot serve the rate (refused, naming it) where b64's can, and b64's
    figures equal the estimate of that plan with that batch, not the engine's default cap."""
    from plena_opt import api
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.estimate.plan import Plan
    from plena_opt.search.request import SearchRequest

    req = SearchRequest(request_rate=20.0)
    inputs = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                              input_seq=1024, output_seq=256)  # fmt: skip
    make = loaded_factory(inputs.evaluator, inputs, req)
    small, large = make(4).evaluate(Plan(tp=8)), make(64).evaluate(Plan(tp=8))
    assert "more than the plan serves" in small.under_load["refused"]
    assert small.ttft_seconds != small.ttft_seconds  # NaN: not priced at the default cap
    problem = replace(inputs, workload=replace(inputs.workload, batch_size=64))
    u = api.serve_under_load(problem, Plan(tp=8), request_rate=20.0, batch=64)
    assert large.under_load["ttft_mean_seconds"] == pytest.approx(u.steady.ttft_seconds)
    assert large.under_load["tpot_mean_seconds"] == pytest.approx(u.steady.tpot_seconds)
    default = api.serve_under_load(problem, Plan(tp=8), request_rate=20.0)  # engine's own cap
    assert default.steady.tpot_seconds == pytest.approx(u.steady.tpot_seconds)


def test_the_recommended_simulate_command_carries_the_engine(capsys):
    """The plan the search priced under ``--engine`` is simulated with that engine's kernels."""
    assert main([*SEARCH, *LOAD]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "simulate it:" in x)
    assert line.endswith("--engine vllm")
