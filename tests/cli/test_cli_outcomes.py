"""What ``plena-opt`` says about its outcome (issue 25): a plan that does not fit, labelled
figures, one recommendation per search, and a reason for every empty result."""

from __future__ import annotations

import json
import re

from plena_opt.cli.main import main

TOO_SMALL = ["estimate", "--model", "llama-3.1-8b", "--fixed-bandwidth-gbs", "1000",
             "--fixed-capacity-gib", "4", "--output-seq", "4"]  # fmt: skip


def test_estimate_of_a_plan_that_does_not_fit_says_so_first(capsys):
    assert main(TOO_SMALL) == 0  # the estimate is still printed: exit 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("DOES NOT FIT") and "of 4.0 GiB" in first
    footprint = next(line for line in out.splitlines() if line.startswith("Footprint"))
    assert "DOES NOT FIT" in footprint
    assert main([*TOO_SMALL, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fits"] is False and "does not fit" in doc["does_not_fit"]
    assert list(doc)[:2] == ["fits", "does_not_fit"]


def test_estimate_of_a_plan_that_fits_is_quiet(capsys):
    argv = [*TOO_SMALL[:-4], "--fixed-capacity-gib", "64", "--output-seq", "4"]
    assert main(argv) == 0
    assert "DOES NOT FIT" not in capsys.readouterr().out
    assert main([*argv, "--noc", "illustrative_gpu_node_8", "--tp", "8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fits"] is True and doc["does_not_fit"] is None


SEARCH = ["search", "--noc", "illustrative_gpu_node_8", "--fixed-bandwidth-gbs", "1000",
          "--storage", ":memory:", "--quiet"]  # fmt: skip
SERVING = ["--objectives", "ttft,tps-per-device,tps-per-user", "--recheck", "0"]
# Prefill-heavy: the disaggregated deployment wins (x1.01) over the aggregated one.
DISAGG = [*SEARCH, *SERVING, "--model", "llama-3.2-1b", "--batch-sizes", "8,32",
          "--input-seq", "2048", "--output-seq", "64", "--serving", "both"]  # fmt: skip
# 1.6 GiB per device: the 8-device plans fit, no pool of 4 or fewer does.
TIGHT = [*SEARCH, "--model", "llama-3.1-8b", "--fixed-capacity-gib", "1.6", "--batch-sizes", "8",
         "--input-seq", "256", "--output-seq", "8"]  # fmt: skip


def _json(capsys, argv):
    rc = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def test_the_recommendation_follows_the_serving_verdict(capsys):
    rc, doc, err = _json(capsys, DISAGG)
    assert rc == 0
    cmp = doc["serving"]["comparison"]
    assert cmp["verdict"].startswith("disaggregated wins")
    best = cmp["disaggregated"]["front"][0]
    rec = doc["recommendation"]
    assert rec["kind"] == "disaggregated" and rec["label"] == best["label"]
    assert rec["key"].startswith(f"tp{best['prefill']['tp']}-")
    assert rec["decode_key"].startswith(f"tp{best['decode']['tp']}-")
    assert rec["figures"]["tps_per_device"] == cmp["disaggregated"]["goodput_tps_per_device"]
    assert rec["figures"]["basis"] == "model, under load" and cmp["verdict"] in rec["reason"]
    assert "recommendation (disaggregated)" in err and "chosen plan" not in err
    # the export line it prints runs as written
    import shlex

    argv = shlex.split(rec["export_command"])
    # the deployment key with its pools' worker counts, and the searched model (its real id)
    assert argv[:2] == ["plena-opt", "export"] and re.fullmatch(r"\d+P:\S+\+\d+D:\S+", argv[2])
    assert argv[3:5] == ["--model", "llama-3.2-1b"]
    assert main(argv[1:]) == 0
    launches = json.loads(capsys.readouterr().out)
    assert {"prefill", "decode"} <= {c["role"] for c in launches}  # plus router and benchmark


def test_without_a_comparison_the_recommendation_follows_the_sla(capsys):
    argv = [*TIGHT, *SERVING, "--fixed-capacity-gib", "4", "--batch-sizes", "8,32",
            "--max-tpot-ms", "10"]  # fmt: skip
    rc, doc, err = _json(capsys, argv)
    assert rc == 0 and doc["serving"]["goodput_basis"] == "model, static batch"
    best = max(doc["front"], key=lambda e: e["tps_per_device"])
    rec = doc["recommendation"]
    assert rec["kind"] == "aggregated" and rec["decode_key"] is None
    assert rec["label"] == best["label"] and rec["plan"] == best["plan"]
    assert rec["figures"]["tps_per_device"] == best["tps_per_device"]
    assert (
        rec["figures"]["basis"] == "model, static batch" and "SLA (TPOT <= 10 ms)" in rec["reason"]
    )
    assert err.count("recommendation (") == 1 and "export it:    plena-opt export" in err


def test_without_an_sla_the_recommendation_follows_the_first_throughput_objective(capsys):
    rc, doc, _ = _json(
        capsys,
        [
            *TIGHT,
            "--fixed-capacity-gib",
            "4",
            "--batch-sizes",
            "8,32",
            "--objectives",
            "ttft,tps-per-seq,tps",
        ],
    )
    assert rc == 0
    rec = doc["recommendation"]
    best = max(doc["front"], key=lambda e: e["tps_per_sequence"])
    assert rec["label"] == best["label"] and "highest tps-per-seq" in rec["reason"]
    assert rec["label"] != doc["front"][0]["label"]  # not simply the highest TPS


def test_figures_are_labelled_by_what_they_mean(capsys):
    argv = [*TIGHT, "--fixed-capacity-gib", "4", "--batch-sizes", "8,32", "--objectives",
            "ttft,tps-per-device,tps-per-user", "--max-tpot-ms", "10", "--serving", "both",
            "--recheck", "1", "--samples", "20"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "by TPS; figures: model, static batch)" in out
    assert "serving fronts (model, under load" in out
    assert "MC p50" in out and "(TTFT ms and TPS: model, static batch" in out
    assert "goodput (SLA TPOT <= 10 ms):" in out and "(model, static batch;" in out
    assert "goodput at p50 of the Monte Carlo re-check" in out
    assert "Monte Carlo TTFT p50" in out
    assert out.count("recommendation (") == 1 and "chosen plan" not in out
    rc, doc, _ = _json(capsys, argv)
    assert doc["figures_basis"] == "model, static batch"
    assert doc["serving"]["comparison"]["figures_basis"] == "model, under load"
    assert doc["recheck_basis"] == "Monte Carlo re-check"
    assert doc["serving"]["goodput_at_percentile_basis"].startswith("Monte Carlo re-check")


def test_an_empty_disaggregated_front_says_why_and_the_fix(capsys):
    argv = [*TIGHT, *SERVING, "--serving", "disaggregated"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "warning: no disaggregated deployment: the model does not fit any disaggregated" in out
    rc, doc, _ = _json(capsys, argv)
    why = doc["serving"]["comparison"]["disaggregated"]["empty_reason"]
    assert "largest pool (4 devices)" in why and "of 1.6 GiB" in why and "--precision" in why
    rec = doc["recommendation"]  # the aggregated plan, saying why it is not disaggregated
    assert rec["kind"] == "aggregated" and rec["reason"].startswith("no disaggregated deployment")
    # the fix it names works: at that format a pool holds the model
    fmt = why.rsplit("--precision ", 1)[1].split()[0]
    rc, doc, _ = _json(capsys, [*argv, "--precision", fmt])
    assert doc["serving"]["comparison"]["disaggregated"]["front"]


def test_nearest_miss_per_constraint(capsys, tmp_path):
    import csv

    path = tmp_path / "all.csv"
    rc, doc, _ = _json(capsys, [*TIGHT, "--max-ttft-ms", "14", "--csv-all", str(path)])
    assert rc == 0 and set(doc["nearest_miss"]) == {"memory", "max_ttft"}
    miss = doc["nearest_miss"]["max_ttft"]
    rows = list(csv.DictReader(path.open()))
    slow = [float(r["ttft_seconds"]) for r in rows if float(r["ttft_seconds"]) > 0.014]
    assert miss["unit"] == "s" and miss["limit"] == 0.014 and miss["value"] == min(slow)
    mem = doc["nearest_miss"]["memory"]
    assert mem["unit"] == "bytes" and abs(mem["limit"] - 1.6 * 2**30) < 1
    over = [float(r["memory_bytes_per_device"]) for r in rows if r["fits_in_memory"] == "False"]
    assert mem["value"] == min(over) > mem["limit"]
    assert main([*TIGHT, "--max-ttft-ms", "14"]) == 0
    out = capsys.readouterr().out
    assert f"nearest miss on max_ttft: {miss['label']} ({miss['key']}):" in out


def test_an_empty_front_says_why_in_text_and_json(capsys):
    argv = [*TIGHT, "--max-ttft-ms", "1"]
    rc, doc, err = _json(capsys, argv)
    assert rc == 2 and doc["front"] == [] and doc["recommendation"] is None
    assert doc["empty_reason"].startswith("no plan meets the constraints")
    assert "no recommendation: no plan meets" in err
    assert main(argv) == 2
    out = capsys.readouterr().out
    assert "warning: empty front: no plan meets the constraints" in out
    assert "nearest miss on max_ttft" in out


def test_an_empty_disaggregated_front_on_a_gpu_names_a_format_the_chip_runs(capsys):
    """A 405B model in bf16 fills 8 H200s; no pool of 4 holds it: fp8 (which Hopper runs, unlike
    mxfp8) is the fix named, and it works."""
    argv = ["search", "--model", "llama-3.1-405b", "--chip", "h200-sxm", "--noc", "hgx-h200x8",
            "--batch-sizes", "8", "--input-seq", "256", "--output-seq", "8", *SERVING,
            "--serving", "disaggregated", "--storage", ":memory:", "--quiet"]  # fmt: skip
    rc, doc, _ = _json(capsys, argv)
    why = doc["serving"]["comparison"]["disaggregated"]["empty_reason"]
    assert (
        "at bf16" in why
        and why.endswith("try --precision fp8 (a re-quantised checkpoint)")
        and "mxfp8" not in why
    )
    assert doc["serving"]["comparison"]["disaggregated"]["front"] == []
    rc, doc, _ = _json(capsys, [*argv, "--precision", "fp8"])
    assert doc["serving"]["comparison"]["disaggregated"]["front"]


def test_every_objective_has_a_front_figure_the_recommendation_can_pick_on() -> None:
    """A new objective must be named in the recommendation's figure table too (else a search on it
    cannot end with a recommendation)."""
    from plena_opt.api.recommendation import _ENTRY_FIGURE
    from plena_opt.search.result import FrontEntry
    from plena_opt.search.space.objectives import OBJECTIVES

    assert set(_ENTRY_FIGURE) == set(OBJECTIVES)
    fields = FrontEntry.model_fields
    assert all(attr in fields for attr, _ in _ENTRY_FIGURE.values())
