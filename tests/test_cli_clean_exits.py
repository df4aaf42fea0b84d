"""Clean exits of the CLI (issue 29): every bad input is ``error: …`` with exit 2 and no
traceback, every size is bounded as the server bounds it, a listing never changes the store,
and a study that surviving workers completed prints its front although a worker died."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from plena_opt import bounds
from plena_opt.cli.main import main
from plena_opt.search import storage as st

SMALL = ["--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8"]
PLAN = [*SMALL, "--tp", "8"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(capsys, *argv: str) -> str:
    """Run ``argv``; assert the CLI's bad-input exit (2, ``error: …``, no traceback); stderr."""
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


@pytest.fixture
def deep_json(tmp_path) -> Path:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


@pytest.fixture
def binary(tmp_path) -> Path:
    path = tmp_path / "blob.json"
    path.write_bytes(bytes(range(128, 256)) * 8)  # not UTF-8 (nor UTF-16/32 JSON)
    return path


# --- numeric bounds shared with the server and the web app -------------------------------


@pytest.mark.parametrize("samples", ["99999999999999999999999", "2000000000", "100001", "-1"])
def test_simulate_samples_are_capped_like_the_server(capsys, samples) -> None:
    err = refused(capsys, "simulate", *PLAN, "--samples", samples)
    assert f"--samples must be between 0 and {bounds.MAX_SAMPLES:,}" in err


def test_the_server_and_the_web_app_use_the_same_bounds() -> None:
    from plena_server.limits import ServerLimits
    from plena_server.simulate_job import MAX_TRAINING_OPS, MAX_WINDOW_STEPS

    from plena_opt.web import limits as web

    assert ServerLimits().max_samples == web.MAX_SAMPLES == bounds.MAX_SAMPLES == 100_000
    assert MAX_TRAINING_OPS == bounds.MAX_SCHEDULE_OPS == 200_000
    assert MAX_WINDOW_STEPS == web.MAX_WINDOW_STEPS == bounds.MAX_WINDOW_STEPS


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["search", "--trials", "100000000000000000000000"], "between 1 and 1,000,000"),
        (["search", "--timeout", "1e400"], "at most 2,592,000, got inf"),
        (["search", "--timeout", "nan"], "at most 2,592,000, got nan"),
        (["search", "--timeout", "1e23"], "at most 2,592,000"),
        (["search", "--max-ttft-ms", "inf"], "--max-ttft-ms"),
        (["search", "--recheck", "99999999999999999999999"], "--recheck must be between 0"),
        (["search", "--samples", "100001"], "--samples must be between 0 and 100,000"),
        (["simulate", *PLAN, "--max-window-steps", "100000000000000000000000"], "1 and 1,024"),
        (["simulate", *PLAN, "--max-window-steps", "1e23"], "--max-window-steps"),
    ],
)
def test_sizes_are_bounded_with_the_range_in_the_message(capsys, argv, needle) -> None:
    if argv[0] == "search":
        argv = [*argv, "--storage", ":memory:"]
    assert needle in refused(capsys, *argv)


@pytest.mark.parametrize("pp", ["100000", "1000000"])
def test_a_huge_schedule_is_refused_before_it_is_built(capsys, monkeypatch, pp) -> None:
    from plena_opt.simulator import scheduler

    def never(*a, **k):  # building would take seconds and gigabytes
        raise AssertionError("the schedule was built")

    monkeypatch.setattr(scheduler, "one_f_one_b", never)
    for extra in ([], ["--durations", "F=1,B=2"]):  # with or without the durations
        err = refused(capsys, "simulate", "--schedule", "1f1b", "--pp", pp, *extra)
        assert f"pp={pp}" in err and "above the limit of 200,000 ops" in err
