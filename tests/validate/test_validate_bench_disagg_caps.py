"""``validate --measurements RESULT --bundle DIR`` of a disaggregated bundle prices each pool
with the running cap its launch file writes (issue 23, r18dbund): the prefill pool's
``--max-num-seqs`` bounds the prompts of one prefill step, the decode pool's the requests one
decode worker runs (the rest wait for a slot), as ``estimate`` prices the same pools under
those caps; a bundle whose caps do not bind is priced as ``estimate`` prices its pools."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from plena_opt.cli.main import main

POOL = "tp1-ep1-dp1-pp1-cp1-replace-none-b{}"
MODEL = ["--model", "llama-3.1-8b"]


def _result(tmp_path: Path, clients: int = 16) -> Path:
    """A ``vllm bench serve --save-result`` file written by hand: a closed loop of ``clients``,
    1024 prompt + 256 output tokens."""
    doc = {"date": "20261207-200000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
           "num_prompts": 8 * clients, "request_rate": "inf", "burstiness": 1.0,
           "max_concurrency": clients,
           "completed": 8 * clients, "failed": 0, "total_input_tokens": 8 * clients * 1024,
           "total_output_tokens": 8 * clients * 256, "mean_ttft_ms": 300.0,
           "mean_tpot_ms": 12.0, "duration": 20.0}  # fmt: skip
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    return path


def _bundle(capsys, tmp_path: Path, prefill: int, decode: int) -> Path:
    out = tmp_path / f"p{prefill}d{decode}"
    key = f"1P:{POOL.format(prefill)}+1D:{POOL.format(decode)}"
    argv = ["export", key, *MODEL, "--gpu", "h100-sxm", "--format", "vllm", "--out-dir",
            str(out), "--input-seq", "1024", "--output-seq", "256"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    return out


def _row(capsys, result: Path, bundle: Path) -> dict:
    assert main(["validate", "--json", "--measurements", str(result), "--bundle", str(bundle)]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["status"] == "priced", row["reason"]
    assert row["mode"] == "disagg"
    return row


def _estimate(capsys, clients: int = 16) -> dict:
    argv = ["estimate", "--json", *MODEL, "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--concurrency", str(clients), "--input-seq", "1024", "--output-seq", "256",
            "--prefill-workers", "1", "--prefill-tp", "1", "--decode-workers", "1",
            "--decode-tp", "1", "--engine", "vllm"]  # fmt: skip
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["serving_under_load"]["steady_state"]


def _capped_pools(result: Path, prefill_cap: int, decode_cap: int,
                  clients: int = 16) -> tuple[float, float]:  # fmt: skip
    """(TTFT ms, TPOT ms) of estimate's pools (``pool_steps`` at the exported memory setting,
    the engine's defaults) with each pool's engine capped at the launch file's cap."""
    from plena_opt.api.running_cap import EXPORTED_MEMORY_FRACTION
    from plena_opt.serving import StepModel
    from plena_opt.serving.disaggregated import Pools, disaggregated_under_load
    from plena_opt.serving.pools import pool_steps
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, target_from_flags
    from plena_opt.validate.serving_score import _parts

    key = f"1P:{POOL.format(prefill_cap)}+1D:{POOL.format(decode_cap)}"
    t = target_from_flags(key, "llama-3.1-8b", "h100-sxm", "vllm")
    d = deployment(t, read_bench_runs(result)[0])
    parts = _parts(d, 0.0)
    pools = Pools(1, 1, 1, 1)
    pre, dec, x = pool_steps(*parts[:5], pools, parts[5], EXPORTED_MEMORY_FRACTION)

    def cap(step: StepModel, n: int) -> StepModel:
        eng = step.engine
        if eng.max_running is None or n < eng.max_running:
            eng = replace(eng, max_running=n)
        return StepModel(step.costs, eng, step.gpus, step.attention_dp)

    m = disaggregated_under_load(cap(pre, prefill_cap), cap(dec, decode_cap), x, pools,
                                 (1024, 256, 0.0), clients)  # fmt: skip
    return 1e3 * m.ttft_seconds, 1e3 * m.tpot_seconds


@pytest.fixture
def result(tmp_path):
    return _result(tmp_path)


def test_pool_caps_the_launch_files_write_are_priced(capsys, tmp_path, result):
    """``--max-num-seqs 1`` on the prefill server (one prompt a step, not 8192 // 1024 = 8) and
    ``--max-num-seqs 4`` on the decode server (12 of 16 clients wait for a decode slot)."""
    bundle = _bundle(capsys, tmp_path, 1, 4)
    assert "--max-num-seqs 1 " in (bundle / "vllm-prefill.sh").read_text()
    assert "--max-num-seqs 4 " in (bundle / "vllm-decode.sh").read_text()
    row = _row(capsys, result, bundle)
    ttft, tpot = _capped_pools(result, 1, 4)
    assert row["ttft_ms"] == pytest.approx(ttft, rel=1e-9)
    assert row["tpot_ms"] == pytest.approx(tpot, rel=1e-9)
    free = _estimate(capsys)  # the pools without the caps, as estimate prices them
    assert row["ttft_ms"] > 2 * 1e3 * free["ttft_seconds"]["mean"]  # clients wait for a slot
    assert row["tpot_ms"] < 1e3 * free["tpot_seconds"]  # a decode batch of 4, not 16


def test_pool_caps_that_do_not_bind_price_as_estimate(capsys, tmp_path, result):
    bundle = _bundle(capsys, tmp_path, 512, 512)
    row = _row(capsys, result, bundle)
    free = _estimate(capsys)
    assert row["ttft_ms"] == pytest.approx(1e3 * free["ttft_seconds"]["mean"], rel=1e-9)
    assert row["tpot_ms"] == pytest.approx(1e3 * free["tpot_seconds"], rel=1e-9)
