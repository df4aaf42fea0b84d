"""Every front plan and deployment carries the key ``plena-opt export`` takes, and a stored
trial exports by study and number (issue 25)."""

from __future__ import annotations

import csv
import json

from plena_opt.cli.main import main
from plena_opt.export import parse_deployment_key, parse_point_key

ARGV = ["search", "--model", "llama-3.2-1b", "--noc", "illustrative_gpu_node_8",
        "--fixed-bandwidth-gbs", "1000", "--batch-sizes", "8", "--input-seq", "256",
        "--output-seq", "8", "--objectives", "ttft,tps-per-device,tps-per-user",
        "--recheck", "0"]  # fmt: skip


def test_front_and_deployments_print_their_export_keys(tmp_path, capsys):
    out_csv = tmp_path / "front.csv"
    argv = [*ARGV, "--serving", "both", "--storage", ":memory:", "--csv", str(out_csv)]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    for e in doc["front"]:
        plan, batch, _ = parse_point_key(e["key"])
        p = e["plan"]
        assert (plan.tp, plan.dp, batch) == (p["tp"], p["dp"], p["batch_size"])
    dis = doc["serving"]["comparison"]["disaggregated"]["front"]
    assert dis and all(parse_deployment_key(e["key"]) for e in dis)
    x, pkey, y, dkey = parse_deployment_key(dis[0]["key"])
    assert (x, y) == (dis[0]["prefill"]["workers"], dis[0]["decode"]["workers"])
    assert parse_point_key(pkey)[1] == dis[0]["prefill"]["batch_size"]
    agg = doc["serving"]["comparison"]["aggregated"]["front"]
    assert all(parse_point_key(e["key"]) for e in agg)
    rows = list(csv.DictReader(out_csv.open()))
    assert [r["key"] for r in rows] == [e["key"] for e in doc["front"]]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert all(e["key"] in text for e in doc["front"])  # the front table
    assert dis[0]["key"] in text  # the comparison table
    # the key printed is one export takes
    assert main(["export", dis[0]["key"], "--model", "llama-3.2-1b", "--format", "vllm"]) == 0
    assert "NixlConnector" in capsys.readouterr().out


def test_export_a_stored_trial_by_study_and_number(tmp_path, capsys):
    store = str(tmp_path / "s.log")
    assert main([*ARGV, "--storage", store, "--study", "st", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    e = doc["front"][0]
    rc = main(["export", "--study", "st", "--trial", str(e["trial_number"]), "--storage", store,
               "--format", "vllm"])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "vllm serve meta-llama/Llama-3.2-1B" in out  # the study's model, its HF id
    assert f"--tensor-parallel-size {e['plan']['tp']}" in out
    assert "--random-input-len 256" in out and "--random-output-len 8" in out  # its workload
    assert main(["export", "--study", "st", "--trial", "9999", "--storage", store]) == 2
    assert "--trial 9999" in capsys.readouterr().err
    assert main(["export", "--study", "nope", "--trial", "0", "--storage", store]) == 2


def test_search_export_dir_needs_a_real_model_id(tmp_path, capsys):
    argv = ["search", "--model", "fictional-24-head", "--noc", "illustrative_gpu_node_8",
            "--storage", ":memory:", "--export-dir", str(tmp_path / "ex")]  # fmt: skip
    assert main(argv) == 2
    assert "Hugging Face id" in capsys.readouterr().err
    assert not (tmp_path / "ex").exists()
