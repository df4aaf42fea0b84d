"""Units and names agree across CLI text, JSON and gRPC (issue #10): SI in machine formats, ms in
tables, GiB for capacities and footprints, tails named by percentile and marked slow."""

from __future__ import annotations

import json
import re

import pytest

from plena_opt.api.wire import front_entry_to_proto
from plena_opt.cli.main import main
from plena_opt.search.result import FrontEntry

SEARCH = [
    "search",
    "--model",
    "llama-3.1-8b",
    "--noc",
    "illustrative_gpu_node_8",
    "--output-seq",
    "8",
    "--storage",
    ":memory:",
    "--quiet",
    "--recheck",
    "2",
    "--samples",
    "30",
]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_search_json_is_si_and_equals_the_grpc_front(capsys) -> None:
    code, out, err = run(capsys, *SEARCH, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "elapsed_seconds" in doc and "elapsed_s" not in doc
    for entry in doc["front"]:
        assert "ttft_ms" not in entry and "energy_j_per_token" not in entry
        # The gRPC PlanMetrics of the same entry carries the same SI numbers under the same names.
        table = FrontEntry(
            **{
                **entry,
                "ttft_ms": entry["ttft_seconds"] * 1e3,
                "energy_j_per_token": entry["energy_per_token_joules"],
            }
        )
        proto = front_entry_to_proto(table)
        assert proto.ttft_seconds == pytest.approx(entry["ttft_seconds"], rel=1e-12)
        assert proto.energy_per_token_joules == pytest.approx(
            entry["energy_per_token_joules"], rel=1e-12
        )
    for rc, entry in zip(doc["recheck"], doc["front"], strict=False):
        assert rc["analytic_ttft_seconds"] == pytest.approx(entry["ttft_seconds"], rel=1e-9)
        assert rc["ttft_p99_seconds"] >= rc["ttft_p50_seconds"] > 0
        assert rc["tps_p01"] <= rc["tps_p50"]  # the slow tail of throughput


def test_search_table_in_ms_matches_the_json_in_seconds(capsys) -> None:
    code, out, _ = run(capsys, *SEARCH, "--json")
    doc = json.loads(out)
    code, text, _ = run(capsys, *SEARCH)
    assert code == 0
    first = doc["front"][0]
    row = next(line for line in text.splitlines() if line.startswith(first["label"].split(" b")[0]))
    assert f"{first['ttft_seconds'] * 1e3:.2f}" in row
    head = next(line for line in text.splitlines() if line.startswith("plan") and "p50" in line)
    assert "p99 slow" in head and "p1 slow" in head
    assert "slow tail" in text  # the header says which tail each column is


def test_simulate_names_tails_as_search_does(capsys) -> None:
    argv = ["simulate", "--model", "llama-3.1-8b", "--pp", "4", "--dp", "8", "--samples", "50"]
    argv += ["--max-window-steps", "4"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    doc = json.loads(out)
    code, text, _ = run(capsys, *argv)
    tps_line = next(line for line in text.splitlines() if line.startswith("TPS Monte Carlo"))
    assert f"p1 slow {doc['tps_p01']:.4g}" in tps_line
    assert "p99" not in tps_line  # the fast tail of throughput is not shown as a tail
    assert doc["tps_p01"] < doc["tps"]["p50"] < doc["tps"]["p99"]
    ttft_line = next(line for line in text.splitlines() if line.startswith("TTFT Monte Carlo"))
    assert f"p99 slow {doc['ttft']['p99'] * 1e3:.4g}" in ttft_line


def test_simulation_notes_use_the_table_unit(capsys) -> None:
    argv = ["simulate", "--model", "llama-3.1-8b", "--pp", "4", "--dp", "8", "--samples", "0"]
    code, out, _ = run(capsys, *argv, "--max-window-steps", "4", "--json")
    assert code == 0
    causes = json.loads(out)["causes"]
    assert causes
    for note in causes:
        assert re.search(r"\d s\b", note) is None, note  # no seconds beside the ms tables
        assert " ms" in note


def test_estimate_footprint_in_gib_as_its_warning(capsys) -> None:
    argv = ["estimate", "--tp", "4", "--dp", "8", "--output-seq", "8"]
    code, text, _ = run(capsys, *argv)
    assert code == 0
    code, out, _ = run(capsys, *argv, "--json")
    doc = json.loads(out)
    footprint = next(line for line in text.splitlines() if line.startswith("Footprint"))
    assert f"{doc['weight_bytes_per_device'] / 2**30:.3f} GiB weights" in footprint
    assert f"of {doc['memory_capacity_bytes'] / 2**30:.2f} GiB" in footprint
    warning = next(w for w in doc["warnings"] if "beyond its memory capacity" in w)
    assert f"({doc['weight_bytes_per_device'] / 2**30:.2f} GiB)" in warning
    assert " GB " not in footprint


@pytest.mark.parametrize("command", ["search", "simulate", "estimate"])
def test_help_states_the_units_and_tail_names(capsys, command) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for needle in ("ttft_seconds", "energy_per_token_joules", "GiB", "ttft_p99_seconds", "tps_p01"):
        assert needle in text
