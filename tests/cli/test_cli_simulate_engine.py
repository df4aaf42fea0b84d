"""``simulate --engine``: the engine whose kernels price the plan's steps, as ``estimate --engine``
without a load; refused on PLENA chips (no engine targets them), like ``estimate --engine``."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main

# gpt-oss-120b's MXFP4 experts run another kernel under each engine, and TensorRT-LLM fuses the
# input quantisation: the engine changes the static step times
OSS = ["--model", "gpt-oss-120b", "--chip", "b200", "--noc", "hgx-b200x8", "--tp", "8", "--pp",
       "1", "--batch-size", "4", "--input-seq", "1024", "--output-seq", "16"]  # fmt: skip
PLENA = ["--dp", "32", "--tp", "1", "--pp", "1"]


def _makespan(capsys: pytest.CaptureFixture[str], extra: list[str]) -> float:
    assert main(["simulate", *OSS, "--samples", "0", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["makespan"]


def test_simulate_prices_the_plan_with_the_engines_kernels(capsys):
    default = _makespan(capsys, [])
    assert _makespan(capsys, ["--engine", "vllm"]) == default  # vLLM is what no engine prices
    trt = _makespan(capsys, ["--engine", "trtllm"])
    assert trt != default


@pytest.mark.parametrize("command", ["simulate", "estimate"])
def test_an_engine_on_a_plena_chip_is_refused_naming_it(capsys, command):
    assert main([command, *PLENA, "--engine", "trtllm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: engine ") and "PLENA" in err and "Traceback" not in err


def test_an_unknown_engine_is_refused(capsys):
    assert main(["simulate", *OSS, "--engine", "tgi"]) == 2
    assert "engine must be one of vllm, sglang, trtllm" in capsys.readouterr().err


def test_vllm_named_on_a_plena_chip_is_what_no_engine_prices(capsys):
    """``--engine vllm`` is the default's name (``ProblemSpec.fingerprint`` drops it): accepted."""
    assert main(["estimate", *PLENA, "--engine", "vllm", "--json"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert main(["estimate", *PLENA, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == named
