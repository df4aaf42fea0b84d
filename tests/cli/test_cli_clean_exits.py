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
from plena_opt.errors import PlenaStoreError
from plena_opt.search.storage import storage as st

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


# --- files: deep nesting, binary, empty chip ---------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", *PLAN, "--memory", "{}"],
        ["estimate", *PLAN, "--chip", "{}"],
        ["search", *SMALL, "--storage", ":memory:", "--design-space", "{}"],
        ["memory", "describe", "{}"],
    ],
)
def test_json_nested_100000_deep_is_an_input_error(capsys, deep_json, argv) -> None:
    argv = [str(deep_json) if a == "{}" else a for a in argv]
    assert "nested deeper than 64 levels" in refused(capsys, *argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["search", *SMALL, "--storage", ":memory:", "--design-space", "{}"],
        ["describe-noc", "{}"],
        ["estimate", *PLAN, "--chip", "{}"],
        ["estimate", *PLAN, "--memory", "{}"],
    ],
)
def test_a_binary_file_is_an_input_error(capsys, binary, argv) -> None:
    argv = [str(binary) if a == "{}" else a for a in argv]
    assert "is not UTF-8 text" in refused(capsys, *argv)


def test_an_empty_chip_profile_is_refused_not_priced_as_the_default(capsys, tmp_path) -> None:
    empty = tmp_path / "chip.json"
    empty.write_text("{}")
    err = refused(capsys, "estimate", *PLAN, "--chip", str(empty))
    assert "chip profile names no base and overrides nothing" in err
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"base": "plena-default"}))  # an explicit base still prices
    assert run(capsys, "estimate", *PLAN, "--chip", str(named), "--json")[0] == 0


# --- server and store --------------------------------------------------------------------


def test_an_unreachable_server_is_exit_2(capsys) -> None:
    for argv in (["studies"], ["estimate", *PLAN]):
        err = refused(capsys, *argv, "--server", "127.0.0.1:1")
        assert "cannot reach a plena-opt server" in err and "UNAVAILABLE" in err


def test_a_damaged_store_is_failed_precondition_over_grpc(tmp_path) -> None:
    import grpc
    from plena_server.errors import status_for

    path = tmp_path / "s.log"
    _write_study(path, 2)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"not a record\n" + b"".join(lines[1:]))
    st._OPEN.clear()
    with pytest.raises(PlenaStoreError) as info:
        st.open_storage(str(path))
    status = status_for(info.value)
    assert status is not None and status.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "is damaged" in status.details and "plena-opt studies repair" in status.details


def _write_study(path: Path, n: int) -> None:
    study = optuna.create_study(
        study_name="s", storage=st.open_storage(str(path)), sampler=optuna.samplers.RandomSampler(0)
    )
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=n)


def test_studies_listing_leaves_a_torn_journal_byte_identical(capsys, tmp_path) -> None:
    path = tmp_path / "s.log"
    _write_study(path, 3)
    torn = path.read_bytes()[:-7]  # a writer killed mid-append: the last record lost its end
    path.write_bytes(torn)
    st._OPEN.clear()  # a new process lists it
    code, out, err = run(capsys, "studies", "--storage", str(path))
    assert code == 0 and out.startswith("s: ")
    assert path.read_bytes() == torn  # a listing changes nothing
    assert "ends in an incomplete record" in err and "left as it is" in err
    assert f"plena-opt studies repair --storage {path}" in err
    st._OPEN.clear()
    st.open_storage(str(path))  # a writer's open repairs it
    assert path.read_bytes() == torn[: torn.rfind(b"\n") + 1]
