"""``plena-opt simulate``: schedule mode and plan mode (uses the evaluator)."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.simulator import validate_trace
from tests.conftest import load_golden


def test_schedule_mode_json_has_deterministic_makespan(capsys) -> None:
    """--durations are per stage: interleaved (p,m,v)=(4,8,2), F=1, B=2 gives the §1.3 closed
    form m(F+B) + (p−1)(F+B)/v = 28.5 (each chunk op takes F/v, B/v)."""
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
            "F=1,B=2",
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
    assert doc["durations"]["per_stage_ms"] == {"F": 1.0, "B": 2.0}
    assert doc["durations"]["per_op_ms"] == {"F": 0.5, "B": 1.0}


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


# --- input rules of review fixes (one test per rule) ---------------------------------------------

PLAN_ARGS = ["--model", "llama-3.1-8b", "--tp", "8", "--pp", "4"]  # 32 devices, the default NoC


@pytest.mark.parametrize("seed", ["-3", str(2**32)])
@pytest.mark.parametrize("mode", [["--schedule", "1f1b", "--durations", "F=1,B=2"], PLAN_ARGS])
def test_seed_outside_uint32_exits_2_in_both_modes(seed, mode, capsys) -> None:
    """Rule: 0 <= seed < 2**32 (was a numpy ValueError traceback for negative seeds)."""
    assert main(["simulate", *mode, "--seed", seed, "--samples", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --seed must be 0 <= seed < 2**32") and "Traceback" not in err


def test_seed_bounds_are_inclusive_exclusive(capsys) -> None:
    for seed in ("0", str(2**32 - 1)):
        argv = ["simulate", "--schedule", "1f1b", "--durations", "F=1,B=2", "--seed", seed]
        assert main([*argv, "--samples", "5", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["monte_carlo"]["seed"] == int(seed)
    argv = ["simulate", *PLAN_ARGS, "--seed", str(2**32 - 1), "--samples", "5"]
    assert main([*argv, "--max-window-steps", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["window"]["monte_carlo"]["seed"] == 2**32 - 1


@pytest.mark.parametrize(
    ("durations", "needle"),
    [
        ("F=1e308,B=1e308", "durations.F must be <= 1e+15"),
        ("F=1,B=inf", "durations.B must be finite"),
        ("F=nan,B=1", "durations.F must be finite"),
        ("F=-1,B=1", "durations.F must be >= 0"),
        ("F=1,B=2,Z=3", "durations.Z: 'Z' is not an op type of schedule '1f1b' (allowed: F, B)"),
        ("F=1,B=2,F=3", "durations.F is given twice"),
    ],
)
def test_bad_durations_exit_2_naming_field_and_rule(durations, needle, capsys) -> None:
    """Rule: durations are finite, 0 <= ms <= 1e15, unique, and op types of the schedule (was
    ``mean inf [nan, nan]`` with rc 0 for 1e308)."""
    argv = ["simulate", "--schedule", "1f1b", "--durations", durations, "--samples", "10"]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_interleaved_durations_are_per_stage_in_the_summary(capsys) -> None:
    """Rule: --durations are per stage; the table says so and shows the per-op F/v, B/v. The
    §1.3 closed form for (p,m,v)=(4,8,2), F=1, B=2 is 28.5 (57 before the fix)."""
    argv = ["simulate", "--schedule", "interleaved-1f1b", "--pp", "4", "--vpp", "2"]
    argv += ["--microbatches", "8", "--durations", "F=1,B=2", "--samples", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "makespan (deterministic)  28.5 ms" in out
    assert "F=1, B=2 ms per stage; chunk ops take F/v, B/v (v=2)" in out
    assert "per op F=0.5, B=1 ms" in out


@pytest.mark.parametrize("steps", ["0", "-2"])
def test_max_window_steps_below_one_exits_2(steps, capsys) -> None:
    """Rule: --max-window-steps >= 1 (0 or negative silently became 1)."""
    assert main(["simulate", *PLAN_ARGS, "--max-window-steps", steps]) == 2
    assert "--max-window-steps must be between 1 and 1,024" in capsys.readouterr().err
