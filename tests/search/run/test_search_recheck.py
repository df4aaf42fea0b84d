"""``plena-opt search`` re-checks the top front plans by Monte Carlo simulation."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.simulator import validate_trace

BASE = [
    "search",
    "--model",
    "llama-3.1-8b",
    "--noc",
    "illustrative_gpu_node_8",
    "--fixed-bandwidth-gbs",
    "1000",
    "--batch-size",
    "8",
    "--input-seq",
    "256",
    "--output-seq",
    "8",
    "--storage",
    ":memory:",
    "--seed",
    "1",
    "--quiet",
    "--json",
]


def test_recheck_reports_distributions_and_valid_traces(tmp_path, capsys):
    code = main([*BASE, "--recheck", "2", "--samples", "200", "--trace-dir", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    checks = doc["recheck"]
    assert len(checks) == min(2, len(doc["front"]))
    for rc, entry in zip(checks, doc["front"], strict=False):
        assert rc["analytic_ttft_seconds"] == pytest.approx(entry["ttft_seconds"], rel=1e-9)
        # Mean-1 noise: the median TTFT stays near the analytic one, the tail is slower.
        assert rc["ttft_p50_seconds"] == pytest.approx(rc["analytic_ttft_seconds"], rel=0.05)
        assert rc["ttft_p99_seconds"] >= rc["ttft_p50_seconds"]
        assert rc["tps_p01"] <= rc["tps_p50"]  # slow tail of throughput
        assert len(rc["trace_paths"]) == 3
        for path in rc["trace_paths"]:
            assert validate_trace(json.loads(open(path).read())) == []


def test_zero_noise_recheck_equals_the_analytic_ttft(capsys):
    code = main([*BASE, "--recheck", "1", "--samples", "20", "--noise", "sigma=0"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    rc = doc["recheck"][0]
    # Monte Carlo samples are accumulated in float32 (pipeline benchmark memory budget): a
    # relative 1e-6 covers float32 rounding over a few hundred ops.
    assert rc["ttft_p50_seconds"] == pytest.approx(rc["analytic_ttft_seconds"], rel=1e-6)
    assert rc["ttft_p99_seconds"] == pytest.approx(rc["analytic_ttft_seconds"], rel=1e-6)
    assert rc["rank_changed"] is False


def test_recheck_can_be_turned_off_and_bad_noise_is_an_input_error(capsys):
    assert main([*BASE, "--recheck", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["recheck"] == []
    assert main([*BASE, "--noise", "sigma=-1"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
