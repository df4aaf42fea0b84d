"""``plena-opt simulate``: schedule mode and plan mode (uses the evaluator)."""

from __future__ import annotations

import json

import pytest
from conftest import load_golden

from plena_opt.cli.main import main
from plena_opt.pipeline import validate_trace


def test_schedule_mode_json_has_deterministic_makespan(capsys) -> None:
    rc = main(
        [
            "simulate",
            "--schedule",
            "interleaved-1f1b",
            "--pp",
            "4",
            "--vpp",
            "2",
            "--microbatches",
            "8",
            "--durations",
            "F=0.5,B=1",
            "--samples",
            "200",
            "--json",
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["makespan"] == pytest.approx(28.5, rel=1e-12)
    assert doc["monte_carlo"]["n_samples"] == 200
    assert doc["monte_carlo"]["makespan"]["mean"] >= 28.5


def test_schedule_mode_table_and_traces(capsys, tmp_path) -> None:
    trace = tmp_path / "zb.json"
    rc = main(
        [
            "simulate",
            "--schedule",
            "zb-h1",
            "--pp",
            "4",
            "--microbatches",
            "8",
            "--durations",
            "F=1,I=1,W=1",
            "--samples",
            "100",
            "--trace",
            str(trace),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "makespan (deterministic)  27 ms" in out and "bubble ratio" in out
    for p in (trace, tmp_path / "zb.p50.json", tmp_path / "zb.p99.json"):
        assert validate_trace(json.loads(p.read_text())) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--schedule", "1f1b", "--pp", "2"], "--durations is required"),
        (["--schedule", "1f1b", "--durations", "F=1"], "durations.B"),
        (["--schedule", "1f1b", "--durations", "F=x,B=1"], "durations.F"),
        (
            ["--schedule", "1f1b", "--durations", "F=1,B=2", "--noise", "sigma=5"],
            "noise.jitter_sigma",
        ),
        (["--schedule", "1f1b", "--durations", "F=1,B=2", "--noise", "{bad"], "JSON"),
        (
            [
                "--schedule",
                "interleaved-1f1b",
                "--pp",
                "4",
                "--vpp",
                "2",
                "--microbatches",
                "2",
                "--durations",
                "F=1,B=2",
            ],
            "multiple of pp",
        ),
        (["--schedule", "1f1b", "--durations", "F=1,B=2", "--samples", "-3"], "--samples"),
    ],
)
def test_bad_input_exits_2_naming_the_field(argv, needle, capsys) -> None:
    assert main(["simulate", *argv]) == 2
    assert needle in capsys.readouterr().err


def test_plan_mode_matches_the_evaluator(capsys) -> None:
    """Golden case 45 (pp=2): the isolated TTFT equals the evaluator's ``ttft_seconds``."""
    case = next(c for c in load_golden("distributed")["cases"] if c["id"] == 45)
    inp = case["inputs"]
    assert inp["memory"] == "fixed_1000GBps"  # → --fixed-bandwidth-gbs 1000
    noc = inp["noc"]
    plan = inp["plan"]
    argv = [
        "simulate",
        "--model",
        inp["model"],
        "--noc",
        noc,
        "--fixed-bandwidth-gbs",
        "1000",
        "--batch-size",
        str(inp["batch_size"]),
        "--input-seq",
        str(inp["input_seq_len"]),
        "--output-seq",
        str(inp["output_seq_len"]),
        "--samples",
        "50",
        "--json",
    ]
    for k in ("tp", "ep", "dp", "pp", "cp"):
        argv += [f"--{k}", str(plan[k])]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    ttft = case["output"]["ttft_seconds"]
    assert doc["analytic"]["ttft_seconds"] == pytest.approx(ttft, rel=1e-9)
    assert doc["simulated"]["isolated_ttft_seconds"] == pytest.approx(ttft, rel=1e-9)
    assert doc["makespan"] > ttft
