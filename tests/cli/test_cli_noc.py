"""``plena-opt describe-noc`` and ``plena-opt collective`` (analytic-model §5, network-model §7)."""

from __future__ import annotations

import json

import deepstack as ds
import pytest

from plena_opt.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_noc_text(capsys) -> None:
    code, out, _ = run(capsys, "describe-noc", "illustrative_ring_switch_32")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "illustrative_ring_switch_32: 32 devices (ranks fill L1 first)"
    assert "L2: ring 1x4, 50 GB/s, 1000 ns/hop" in out
    assert "L1: switch 1x8, 100 GB/s, 200 ns/hop" in out
    assert lines[-1].strip() == "energy: l1 1 / l2 2 / l3 3 pJ/bit"


def test_describe_noc_json_and_path(capsys, tmp_path) -> None:
    path = tmp_path / "n.json"
    path.write_text(json.dumps(ds.switch_noc(8).to_dict()))
    code, out, _ = run(capsys, "describe-noc", str(path), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["num_devices"] == 8 and doc["provenance"]["profile_path"] == str(path)


def test_collective_json_matches_library(capsys) -> None:
    code, out, _ = run(
        capsys,
        "collective",
        "illustrative_gpu_cluster_32",
        "--op",
        "all-reduce",
        "--bytes",
        "1048576",
        "--dim",
        "dp",
        "--tp",
        "8",
        "--dp",
        "4",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    lib = ds.Network("illustrative_gpu_cluster_32").all_reduce(
        ds.ParallelScheme(tp=8, dp=4), "dp", 1048576
    )
    assert doc["algorithm"] == lib.algorithm
    assert doc["seconds"] == lib.seconds and doc["noc_energy_pj"] == lib.noc_energy_pj
    assert set(doc["candidates"]) == set(lib.candidates)
    assert {"hop_seconds", "link_seconds", "seconds", "algorithm", "noc_energy_pj"} <= set(doc)


@pytest.mark.parametrize("op", ["all-gather", "reduce-scatter", "all-to-all", "p2p"])
def test_collective_text_ops(capsys, op: str) -> None:
    code, out, _ = run(
        capsys,
        "collective",
        "illustrative_torus_mesh_switch_64",
        "--op",
        op,
        "--bytes",
        "4096",
        "--tp",
        "4",
        "--dp",
        "4",
        "--pp",
        "4",
        "--dim",
        "pp" if op == "p2p" else "dp",
    )
    assert code == 0
    assert "total" in out and "busiest link" in out and "NoC energy" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--tp", "4", "--pp", "2", "--dim", "dp"], "use --dim pp"),
        (["--tp", "8"], "--pp of at least 2"),
    ],
)
def test_p2p_needs_pipeline_stages(capsys, argv: list[str], needle: str) -> None:
    code, _, err = run(
        capsys, "collective", "illustrative_gpu_node_8", "--op", "p2p", "--bytes", "64", *argv
    )
    assert code == 2 and needle in err


def test_collective_device_mismatch_is_a_clean_error(capsys) -> None:
    code, _, err = run(
        capsys,
        "collective",
        "illustrative_gpu_node_8",
        "--op",
        "all-reduce",
        "--bytes",
        "8",
        "--tp",
        "4",
    )
    assert code == 2
    assert err.startswith("error: the scheme uses 4 devices") and "has 8" in err


def test_bad_profile_is_a_clean_error(capsys, tmp_path) -> None:
    bad = ds.switch_noc(8).to_dict()
    bad["layers"]["L1"]["kind"] = "hypercube"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    code, _, err = run(capsys, "describe-noc", str(path))
    assert code == 2 and "unknown topology kind 'hypercube'" in err
    code, _, err = run(capsys, "describe-noc", "nope")
    assert code == 2 and "illustrative_gpu_node_8" in err


def test_collective_help_documents_the_all_to_all_contract(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["collective", "--help"])
    out = capsys.readouterr().out
    assert "uniform closed-form" in out and "imbalance 1" in out
