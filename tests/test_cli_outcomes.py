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
