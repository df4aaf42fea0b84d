"""The exported step token budget is the one the plan was priced with (issue 23, r18qa).

``estimate``/``search`` price each engine at its default budget on the GPU (``serving.engines``:
vLLM max_num_batched_tokens, SGLang chunked_prefill_size, TensorRT-LLM max_num_tokens). The
engines' own defaults move with their versions (vLLM 0.34.0 vllm/engine/arg_utils.py
get_batch_defaults: 16384 on GPUs of 160 GiB or more, 8192 priced): the launch files therefore
write the priced budget whenever they know the GPU, not the engine's default."""

from __future__ import annotations

import json

import pytest

from plena_opt.api.exports import export_moe
from plena_opt.cli.main import main
from plena_opt.export import ExportSpec, plan_bundle

KEY = "tp8-ep1-dp1-pp1-cp1-replace-none-b32"
FLAG = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size",
        "trtllm": "--max_num_tokens"}  # fmt: skip
GPUS = ("h100-sxm", "h200-sxm", "b200", "gb200", "mi325x")


def _priced(engine: str, chip: str) -> int:
    from plena_opt.chip import load_chip
    from plena_opt.serving import engine_model

    return engine_model(engine, float(load_chip(chip).hbm.capacity_bytes.value)).budget_tokens


@pytest.mark.parametrize("chip", GPUS)
@pytest.mark.parametrize("engine", ("vllm", "sglang", "trtllm"))
def test_the_budget_written_is_the_priced_one(engine, chip):
    spec = ExportSpec(model="meta-llama/Llama-3.1-70B", input_len=2048, output_len=512,
                      **export_moe(chip, "llama-3.1-70b"))  # fmt: skip
    for c in plan_bundle(engine, KEY, spec):
        if c.role != "serve" or c.refused:
            continue
        argv = c.argv
        assert argv[argv.index(FLAG[engine]) + 1] == str(_priced(engine, chip))


def test_without_the_gpu_no_budget_is_written():
    spec = ExportSpec(model="meta-llama/Llama-3.1-70B", input_len=2048, output_len=512)
    for engine in FLAG:
        (c,) = [c for c in plan_bundle(engine, KEY, spec) if c.role == "serve"]
        assert FLAG[engine] not in c.argv


def test_the_cli_bundle_matches_the_estimate_it_exports(capsys):
    """B200, vLLM: estimate's engine budget is the --max-num-batched-tokens export writes."""
    est = ["estimate", "--model", "llama-3.1-70b", "--chip", "b200", "--noc", "hgx-b200x8",
           "--tp", "8", "--concurrency", "8", "--json"]  # fmt: skip
    assert main(est) == 0
    priced = json.loads(capsys.readouterr().out)["serving_under_load"]["engine"]
    assert main(["export", KEY, "--model", "llama-3.1-70b", "--gpu", "b200"]) == 0
    (serve,) = [d for d in json.loads(capsys.readouterr().out)
                if d["engine"] == "vllm" and d["role"] == "serve"]  # fmt: skip
    argv = serve["argv"]
    assert int(argv[argv.index(FLAG["vllm"]) + 1]) == priced["max_num_batched_tokens"]


@pytest.mark.parametrize(("chip", "noc", "want"), [("b200", "hgx-b200x8", 16384),
                                                   ("h100-sxm", "hgx-h100x8", 8192)])  # fmt: skip
def test_vllm_is_priced_and_exported_at_its_releases_default(capsys, chip, noc, want):
    """vLLM 0.34.0 on a >= 160 GiB GPU: 16384 tokens per step (from 0.28.0, serving.vllm_budget),
    in estimate's engine, its --burst-ttft replay and the exported --max-num-batched-tokens."""
    est = ["estimate", "--model", "llama-3.1-70b", "--chip", chip, "--noc", noc, "--tp", "8",
           "--concurrency", "8", "--json"]  # fmt: skip
    assert main(est) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["serving_under_load"]["engine"]["max_num_batched_tokens"] == want
    burst = ["estimate", "--model", "llama-3.1-70b", "--chip", chip, "--noc", noc, "--tp", "8",
             "--batch-size", "4", "--burst-ttft", "--json"]  # fmt: skip
    assert main(burst) == 0
    assert json.loads(capsys.readouterr().out)["burst_ttft"]["max_num_batched_tokens"] == want
    assert main(["export", KEY, "--model", "llama-3.1-70b", "--gpu", chip]) == 0
    (serve,) = [d for d in json.loads(capsys.readouterr().out)
                if d["engine"] == "vllm" and d["role"] == "serve"]  # fmt: skip
    assert serve["argv"][serve["argv"].index(FLAG["vllm"]) + 1] == str(want)
