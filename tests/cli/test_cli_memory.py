"""``plena-opt memory list|describe`` end to end (analytic-model §3.5)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from plena_opt.cli.main import main
from plena_opt.memory import list_memory_profiles, load_memory


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list(capsys) -> None:
    code, out, _ = run(capsys, "memory", "list")
    assert code == 0
    for name in list_memory_profiles():
        assert name in out
    code, out, _ = run(capsys, "memory", "list", "--json")
    assert [row["name"] for row in json.loads(out)] == list_memory_profiles()


def test_describe_table_fully_connected_heights(capsys) -> None:
    code, out, _ = run(
        capsys, "memory", "describe", "fictional-stacked-dram", "--total-layers", "4,8,12"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "fictional-stacked-dram [stacked_dram]"
    assert lines[1].split() == [
        "layers", "connected", "peak", "GB/s", "efficiency", "usable", "GB/s",
        "capacity", "GiB", "clock", "scale",
    ]  # fmt: skip
    rows = [line.split() for line in lines[2:]]
    assert rows == [
        ["4", "4", "66.543", "0.8010", "53.299", "4.599", "0.9929"],
        ["8", "8", "133.086", "0.8010", "106.598", "9.198", "0.9661"],
        ["12", "12", "199.630", "0.8010", "159.897", "13.797", "0.9413"],
    ]


def test_describe_default_is_the_profile_itself(capsys) -> None:
    code, out, _ = run(capsys, "memory", "describe", "fictional-stacked-dram")
    assert code == 0
    assert out.splitlines()[2].split() == [
        "10",
        "3",
        "49.907",
        "1.0000",
        "49.907",
        "11.498",
        "0.9535",
    ]


def test_describe_connected_counts_above_a_height_are_skipped(capsys) -> None:
    code, out, _ = run(
        capsys, "memory", "describe", "fictional-stacked-dram", "--total-layers", "4,8",
        "--connected-layers", "2,4,8", "--json",
    )  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert [(r["total_layers"], r["connected_layers"]) for r in rows] == [
        (4, 2), (4, 4), (8, 2), (8, 4), (8, 8),
    ]  # fmt: skip
    expected = load_memory("fictional-stacked-dram").with_layers(8, 4).describe()
    assert rows[3] == json.loads(json.dumps(expected))


def test_describe_only_connected_uses_the_profile_height(capsys) -> None:
    code, out, _ = run(
        capsys, "memory", "describe", "fictional-stacked-dram", "--connected-layers", "7", "--json"
    )
    assert code == 0
    row = json.loads(out)
    assert (row["total_layers"], row["connected_layers"]) == (10, 7)


def test_describe_json_single_row_is_the_describe_dict(capsys, tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    path.write_bytes(
        resources.files("plena_opt.memory.profiles")
        .joinpath("fictional_stacked_dram.json")
        .read_bytes()
    )
    code, out, _ = run(capsys, "memory", "describe", str(path), "--json")
    assert code == 0
    assert json.loads(out) == json.loads(json.dumps(load_memory(path).describe()))


def test_describe_fixed_bandwidth(capsys) -> None:
    code, out, _ = run(capsys, "memory", "describe", "fictional-fixed-bandwidth")
    assert code == 0
    assert out.splitlines() == [
        "fictional-fixed-bandwidth [fixed_bandwidth]",
        "usable bandwidth 98.765 GB/s, capacity 11.498 GiB",
    ]
    code, out, _ = run(capsys, "memory", "describe", "unbounded")
    assert "capacity not modeled" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["fictional-fixed-bandwidth", "--total-layers", "4"],
            "apply to stacked_dram profiles only",
        ),
        (
            ["fictional-stacked-dram", "--total-layers", "2", "--connected-layers", "4"],
            "no --connected-layers",
        ),
        (["no-such-memory"], "built-in profiles: fictional-fixed-bandwidth"),
        (["missing/profile.json"], "not found"),
        (["fictional-stacked-dram", "--total-layers", "0"], "dram.total_layers must be > 0"),
        (["fictional-stacked-dram", "--total-layers", "four"], "comma-separated integers"),
        (["fictional-stacked-dram", "--total-layers", "10000"], "no dynamic-power budget"),
    ],
)
def test_describe_errors_exit_2_without_traceback(capsys, argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "memory", "describe", *argv)
    assert code == 2
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err and out == ""


def test_invalid_profile_file_names_the_field(capsys, tmp_path: Path) -> None:
    data = json.loads(
        resources.files("plena_opt.memory.profiles")
        .joinpath("fictional_stacked_dram.json")
        .read_bytes()
    )
    data["dram"]["connected_layers"] = 11
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, _, err = run(capsys, "memory", "describe", str(path))
    assert code == 2
    assert "dram.connected_layers must be ≤ dram.total_layers" in err
