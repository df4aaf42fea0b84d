"""What ``plena-opt`` says about its outcome (issue 25): a plan that does not fit, labelled
figures, one recommendation per search, and a reason for every empty result."""

from __future__ import annotations

import json

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
    assert argv[:2] == ["plena-opt", "export"] and "--decode-plan" in argv
    assert main(argv[1:]) == 0
    launches = json.loads(capsys.readouterr().out)
    assert {c["role"] for c in launches} == {"prefill", "decode"}
