"""``plena-opt estimate``: single-chip and distributed text/JSON output, routing traces, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from plena_opt.cli.main import main
from tests.conftest import load_golden


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_single_chip_json_reproduces_the_reference_figures(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--fixed-bandwidth-gbs",
        "1000",
        "--batch-size",
        "4",
        "--input-seq",
        "2048",
        "--output-seq",
        "16",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    # analytic-model §3.3 golden table: llama-3.1-8b, fixed 1000 GB/s, 4/2048/16.
    assert doc["ttft_seconds"] * 1e3 == pytest.approx(378.1482, abs=5e-5)
    assert doc["tps"] == pytest.approx(446.3598, abs=5e-5)
    assert set(doc) >= {"prefill", "first_token_decode", "decode", "warnings"}


def test_single_chip_text_has_the_phase_table(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--memory",
        "fictional_stacked_dram",
        "--output-seq",
        "8",
    )
    assert code == 0
    for needle in ("prefill", "first decode", "decode x8", "TTFT", "TPS", "Footprint"):
        assert needle in out
    assert "warning: thermal policy scales the compute clock by 0.9535" in out


def test_distributed_text_matches_spec_layout(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-70b",
        "--noc",
        "illustrative_gpu_cluster_32",
        "--memory",
        "fictional_stacked_dram",
        "--tp",
        "8",
        "--pp",
        "4",
        "--output-seq",
        "16",
    )
    assert code == 0
    assert "tp=8 ep=1 dp=1 pp=4 cp=1 on 32 devices" in out
    assert "TTFT            711.0937 ms" in out  # ../shared/golden/timing.json ttft 0.71109366 s
    assert "NoC energy" in out and "J per generated token" in out


def test_distributed_json_carries_energy_and_attribution(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--noc",
        "illustrative_gpu_node_8",
        "--fixed-bandwidth-gbs",
        "1000",
        "--tp",
        "8",
        "--output-seq",
        "4",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["plan"]["tp"] == 8 and doc["tps"] > 0
    parts = doc["decode_attribution_seconds"]
    assert sum(parts.values()) == pytest.approx(doc["decode_seconds"] / 4, rel=1e-9)
    assert doc["energy_per_token_joules"] > 0


def test_moe_estimate_prints_the_moe_plan(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "gpt-oss-20b",
        "--noc",
        "illustrative_gpu_node_8",
        "--fixed-bandwidth-gbs",
        "1000",
        "--fixed-capacity-gib",
        "64",
        "--tp",
        "2",
        "--ep",
        "4",
        "--routing",
        "random",
        "--comm-overlap",
        "full",
        "--output-seq",
        "4",
    )
    assert code == 0
    assert "MoE             tp=1 ep=8 dp=1" in out
    assert "routing random" in out


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_routing_trace_file_is_used_and_validated(tmp_path, capsys, suffix):
    rng = np.random.default_rng(3)
    rows = np.argsort(rng.random((512, 32)), axis=1)[:, :4]
    path = tmp_path / f"trace{suffix}"
    if suffix == ".npy":
        np.save(path, rows)
    else:
        np.savetxt(path, rows, fmt="%d", delimiter=",")
    args = [
        "estimate",
        "--model",
        "gpt-oss-20b",
        "--noc",
        "illustrative_gpu_node_8",
        "--fixed-bandwidth-gbs",
        "1000",
        "--ep",
        "8",
        "--batch-size",
        "8",
        "--input-seq",
        "64",
        "--output-seq",
        "2",
        "--json",
        "--routing",
        str(path),
    ]
    code, out, _ = run(capsys, *args)
    assert code == 0
    doc = json.loads(out)
    assert doc["moe"]["decode"]["source"] == str(path)
    assert doc["moe"]["decode"]["imbalance"] >= 1.0
    # Expert ids beyond the model's 32 experts are rejected, naming the rule.
    bad = tmp_path / "bad.csv"
    np.savetxt(bad, rows + 32, fmt="%d", delimiter=",")
    code, _, err = run(capsys, *args[:-1], str(bad))
    assert code == 2 and "expert ids outside [0, 32)" in err
    narrow = tmp_path / "narrow.csv"
    np.savetxt(narrow, rows[:, :2], fmt="%d", delimiter=",")
    code, _, err = run(capsys, *args[:-1], str(narrow))
    assert code == 2 and "top-2" in err


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--model", "nope"], "nope"),
        (["--tp", "2"], "--dp 16 would fill it"),  # the default NoC: 32 devices
        (["--noc", "illustrative_gpu_node_8", "--tp", "2"], "uses 2 devices"),
        (["--noc", "illustrative_gpu_node_8", "--tp", "3", "--dp", "1"], "uses 3 devices"),
        (["--noc", "no-such-noc"], "no-such-noc"),
        (["--fixed-capacity-gib", "4"], "requires --fixed-bandwidth-gbs"),
        (
            [
                "--model",
                "gpt-oss-20b",
                "--noc",
                "illustrative_gpu_node_8",
                "--ep",
                "8",
                "--routing",
                "uniform",
            ],
            "unknown routing mode 'uniform'",
        ),
        (
            [
                "--model",
                "gpt-oss-20b",
                "--noc",
                "illustrative_gpu_node_8",
                "--ep",
                "8",
                "--routing",
                "qwen3_235b",
            ],
            "not available",
        ),
        (["--model", "gpt-oss-20b"], "mixture-of-experts"),
        (["--overlap", "magic"], "invalid choice"),
        (["--batch-size", "0"], "batch"),
    ],
)
def test_bad_input_exits_2_with_an_error_line(capsys, argv, needle):
    code = None
    try:
        code = main(["estimate", *argv])
    except SystemExit as exc:  # argparse choice errors exit from the parser
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and needle in err
    assert "Traceback" not in err


def test_console_script_runs_without_traceback():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "plena_opt.cli.main",
            "estimate",
            "--tp",
            "5",
            "--noc",
            "illustrative_gpu_node_8",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


def _code(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--output-seq", "100000000000000000000"], "output_seq_len must be at most"),
        (["--batch-size", str(2**40)], "batch_size must be at most"),
        (["--frequency-hz", "inf"], "finite clock"),
        (["--frequency-hz", "1e-300"], "finite clock"),
        (["--fixed-bandwidth-gbs", "100", "--fixed-capacity-gib", "1e300"], "at most"),
        (["--routing", "uniform"], "unknown routing mode"),  # dense models check it too
        (["--routing", "/no/such/trace.npy"], "does not exist"),
    ],
)
def test_out_of_range_workloads_are_input_errors(capsys, argv, needle):
    code, err = _code(["estimate", *argv], capsys)
    assert code == 2 and err.startswith("error: ") and needle in err


def test_bad_routing_traces_name_the_rule(tmp_path, capsys):
    base = [
        "estimate",
        "--model",
        "gpt-oss-20b",
        "--noc",
        "illustrative_gpu_node_8",
        "--ep",
        "8",
        "--output-seq",
        "2",
        "--routing",
    ]
    dup = tmp_path / "dup.npy"
    np.save(dup, np.zeros((64, 4), dtype=np.int64))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    text = tmp_path / "words.csv"
    text.write_text("hello,world\n")
    for path, needle in (
        (dup, "names an expert twice"),
        (empty, "holds no rows"),
        (text, "comma-separated integers"),
        (tmp_path, "is a folder"),
    ):
        code, err = _code([*base, str(path)], capsys)
        assert code == 2 and needle in err, err


def test_chip_expressions_that_overflow_or_explode_are_rejected(tmp_path, capsys):
    for expr in ("1e308*10", "(((((9**64)**64)**64)**64)**64)"):
        chip = tmp_path / "chip.json"
        chip.write_text(json.dumps({"instructions": {"M_MM": expr}}))
        code, err = _code(["estimate", "--chip", str(chip), "--output-seq", "2"], capsys)
        assert code == 2 and "instructions.M_MM" in err and "exceeds" in err


def test_stack_height_flags_reprice_the_stacked_memory(capsys):
    base = ["estimate", "--model", "llama-3.1-8b", "--output-seq", "4", "--json"]
    assert main(base) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*base, "--total-layers", "8", "--connected-layers", "4"]) == 0
    taller = json.loads(capsys.readouterr().out)
    # analytic-model §3.2: 4 of 8 connected layers → 66.54 GB/s peak (efficiency 1 up to half).
    assert taller["memory"]["usable_bandwidth_bytes_per_s"] == pytest.approx(66.54e9, rel=1e-3)
    assert default["memory"]["usable_bandwidth_bytes_per_s"] == pytest.approx(49.907e9, rel=1e-4)
    assert taller["tps"] > default["tps"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--connected-layers", "4"], "connected_layers requires total_layers"),
        (["--fixed-bandwidth-gbs", "10", "--total-layers", "4"], "stacked_dram"),
        (["--memory", "fictional_fixed_bandwidth", "--total-layers", "4"], "stacked_dram"),
        (["--total-layers", "4", "--connected-layers", "9"], "dram.connected_layers"),
    ],
)
def test_stack_height_flags_are_checked(capsys, argv, needle):
    code, err = _code(["estimate", *argv], capsys)
    assert code == 2 and needle in err


def test_moe_model_on_one_device_and_honest_energy_label(capsys):
    argv = [
        "estimate",
        "--model",
        "gpt-oss-20b",
        "--noc",
        "single_device",
        "--fixed-bandwidth-gbs",
        "1000",
        "--batch-size",
        "2",
        "--input-seq",
        "1000",
        "--output-seq",
        "3",
        "--include-lm-head",
    ]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # ../shared/golden/distributed.json case 11 is this run on switch_noc(1,1): TTFT 0.0338 s.
    golden = load_golden("distributed")["cases"]
    case = next(c for c in golden if c["id"] == 11)
    assert doc["ttft_seconds"] == pytest.approx(case["output"]["ttft_seconds"], rel=1e-9)
    assert main(argv) == 0
    out = capsys.readouterr().out
    # fixed bandwidth memory has no energy figure: priced at the cited HBM2 default (issue 30)
    assert "(DRAM at the default 3.97 pJ/bit (HBM2, O'Connor 2017) + NoC;" in out
    assert "compute not modelled" in out


def test_profile_errors_name_the_level(tmp_path, capsys):
    layers = {
        "L3": {
            "kind": "switch",
            "shape": [1, 1],
            "hop_latency_ns": 0,
            "link_bandwidth_gbytes_per_s": 50,
        },
        "L2": {
            "kind": "ring",
            "shape": [1, 3],
            "hop_latency_ns": 0,
            "link_bandwidth_gbytes_per_s": 50,
        },
        "L1": {
            "kind": "switch",
            "shape": [1, 8],
            "hop_latency_ns": 0,
            "link_bandwidth_gbytes_per_s": 50,
        },
    }
    path = tmp_path / "noc.json"
    path.write_text(
        json.dumps({"schema_version": 1, "kind": "noc_hierarchy", "name": "x", "layers": layers})
    )
    code, err = _code(["estimate", "--noc", str(path), "--tp", "8"], capsys)
    assert code == 2 and err.strip() == "error: layers.L2.shape: ring size must be even"


@pytest.mark.parametrize("flag", ["--model-path", "--noc", "--memory", "--chip", "--routing"])
def test_empty_names_are_errors_not_defaults(capsys, flag):
    code, err = _code(["estimate", flag, ""], capsys)
    assert code == 2 and err.strip() == f"error: {flag} must not be empty"
