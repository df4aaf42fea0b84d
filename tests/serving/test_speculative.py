"""Speculative decoding under load (``estimate --speculative K``): E, the verify + draft step
priced from the evaluator, the verdict at small and large batch, and the CLI's refusals."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.serving import EngineModel, StepModel
from plena_opt.serving.speculative import (
    EAGLE_ACCEPTANCE,
    VerifyStepModel,
    expected_tokens,
    speculation,
)

GPU = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--devices", "1", "--input-seq", "1024", "--output-seq", "256"]  # fmt: skip


def test_expected_tokens_by_hand():
    # 1 + 0.9 + 0.9·0.8 + 0.9·0.8·0.7
    assert expected_tokens((0.9, 0.8, 0.7)) == pytest.approx(3.124)
    assert expected_tokens((1.0, 1.0)) == 3.0
    # the cited EAGLE-3 default reproduces its source's mean acceptance length (2.359, K = 5)
    assert speculation("eagle", 5).expected_tokens_per_step == pytest.approx(2.359, abs=2e-3)
    assert speculation("eagle", 2).acceptance == EAGLE_ACCEPTANCE[:2]
    assert speculation("mtp", 1).expected_tokens_per_step == pytest.approx(1.85)


class PlainCosts:
    """A made-up engine's step costs: decode 4 ms + 0.1 ms per sequence (seconds)."""

    host_seconds = 0.003

    def prefill_seconds(self, tokens: float) -> float:
        return 0.01

    def decode_mean_seconds(self, n: int) -> float:
        return 0.004 + 1e-4 * n


class VerifyCosts:
    """Its verify costs: decode of ``tokens`` sequences at the scaled KV, 4 ms + 0.05 ms each."""

    def decode_mean_seconds(self, tokens: int) -> float:
        return 0.004 + 5e-5 * tokens


def test_tpot_by_hand():
    engine = EngineModel("x", 8192, None, 16, host_step_seconds=0.001)
    plain = StepModel(PlainCosts(), engine, 1)  # type: ignore[arg-type]
    spec = speculation("mtp", 2, (0.5, 0.5))  # E = 1.75
    model = VerifyStepModel(spec, VerifyCosts(), plain, num_layers=10)
    # 4 requests: decode 4.4 ms; verify of 12 tokens 4.6 ms; drafts 2 × 4.4 / 10 = 0.88 ms
    assert model.verify_seconds(4) == pytest.approx(0.0046)
    assert model.draft_seconds(4) == pytest.approx(0.00088)
    # plain TPOT 9.4 ms = decode 4.4 + host 1 + others' prompts 4 ms per token
    want = (0.0046 + 0.00088 + 0.001) / 1.75 + 0.004
    assert model.tpot(0.0094, 4) == pytest.approx(want)
    # 8 requests: 24 verify tokens pass the 16-token CUDA-graph limit and pay the eager host
    assert model.verify_seconds(8) == pytest.approx(0.004 + 5e-5 * 24 + 0.003)
    ngram = VerifyStepModel(speculation("ngram", 2, (0.5, 0.5)), VerifyCosts(), plain, 10)
    assert ngram.draft_seconds(4) == 0.0


def _verdict(concurrency: int, acceptance: tuple[float, ...] = (0.6, 0.6, 0.6)):
    from plena_opt import api
    from plena_opt.api.speculative import speculate

    problem = api.load_problem(model="llama-3.1-8b", chip="h100-sxm", noc="hgx-h100x8",
                               devices=1, input_seq=1024, output_seq=256)  # fmt: skip
    load = api.serve_under_load(problem, api.Plan(), "vllm", concurrency=concurrency,
                                range_ratio=0.8)  # fmt: skip
    return speculate(problem, api.Plan(), load, speculation("eagle", 3, acceptance))


def test_pays_at_small_batch_memory_bound():
    v = _verdict(1)
    # one request: the verify step reads the same weights and KV as a decode step, so it costs
    # about the same (memory-bound), and E = 1.98 tokens per step nearly halve TPOT
    assert v.verify_step_seconds == pytest.approx(v.decode_step_seconds, rel=0.05)
    assert v.pays
    assert v.tpot_with < 0.6 * v.tpot_without


def test_loses_at_large_batch_compute_bound():
    v = _verdict(512)
    # ~360 requests × 4 tokens (one H100's KV pool admits 399 of the 512 clients at 1024 + 256/2
    # tokens, api.running_cap; the rest queue): the verify step's GEMMs are compute-bound (and
    # past vLLM's CUDA-graph capture), so it costs more than twice a decode step and E = 1.98
    # does not cover it
    assert 300 < v.decode_batch <= 399
    assert v.verify_step_seconds > 2 * v.decode_step_seconds
    assert not v.pays
    assert v.tpot_with > v.tpot_without
    # perfect drafts (E = 4) still pay there: the verdict follows the acceptance
    assert _verdict(512, (1.0, 1.0, 1.0)).pays


def test_cli_json_and_text(capsys):
    assert main([*GPU, "--concurrency", "2", "--speculative", "2", "--speculative-method",
                 "mtp", "--acceptance", "0.9,0.8", "--json"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)["speculative"]
    assert doc["method"] == "mtp" and doc["k"] == 2 and doc["acceptance"] == [0.9, 0.8]
    assert doc["expected_tokens_per_step"] == pytest.approx(1 + 0.9 + 0.72)
    assert doc["pays"] is True and doc["tpot_with"] < doc["tpot_without"]
    assert main([*GPU, "--concurrency", "2", "--speculative", "1", "--speculative-method",
                 "mtp"]) == 0  # fmt: skip
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("Speculative decoding mtp K=1") and "arXiv 2412.19437" in line
    assert "ms without" in line and "ms with: pays" in line


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--concurrency", "2", "--speculative", "9"], "--speculative (draft tokens per step)"),
        (["--concurrency", "2", "--speculative", "0"], "must be 1..8"),
        (["--speculative", "2"], "--speculative is priced under load"),
        (["--concurrency", "2", "--acceptance", "0.5"], "--acceptance needs --speculative"),
        (["--concurrency", "2", "--speculative", "2", "--acceptance", "0.5"], "one rate per"),
        (["--concurrency", "2", "--speculative", "1", "--acceptance", "1.5"], "in (0, 1]"),
        (["--concurrency", "2", "--speculative", "1", "--acceptance", "0"], "in (0, 1]"),
        (["--concurrency", "2", "--speculative", "1", "--acceptance", "x"], "--acceptance takes"),
        (["--concurrency", "2", "--speculative", "2", "--speculative-method", "ngram"],
         "give --acceptance"),
        (["--concurrency", "2", "--speculative", "2", "--speculative-method", "mtp"],
         "covers K <= 1"),
        (["--concurrency", "2", "--speculative", "2", "--speculative-method", "medusa"],
         "--speculative-method must be one of"),
        (["--concurrency", "2", "--speculative", "2", "--speculative-method", "ngram",
          "--server", "localhost:1"], "give --acceptance"),  # checked before any connection
    ],
)  # fmt: skip
def test_cli_errors_name_the_flag(capsys, extra, words):
    assert main([*GPU, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "Traceback" not in err


def test_pipeline_parallel_is_refused_by_name(capsys):
    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--devices", "2", "--pp", "2", "--concurrency", "2", "--speculative", "1",
            "--speculative-method", "mtp"]  # fmt: skip
    assert main(argv) == 2
    assert "--pp 2" in capsys.readouterr().err
