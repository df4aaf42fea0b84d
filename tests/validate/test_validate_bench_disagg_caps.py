"""``validate --measurements RESULT --bundle DIR`` of a disaggregated bundle prices each pool
with the running cap its launch file writes (issue 23, r18dbund, r18pfexp): the decode pool's
``--max-num-seqs`` bounds the requests one decode worker runs (the rest wait for a slot), as
``estimate`` prices the same pools under that cap; the prefill server writes none (the engine's
default: a step takes the prompts the token budget holds), whatever its key's batch; a bundle
whose decode cap does not bind is priced as ``estimate`` prices its pools."""

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


def _command(script: Path) -> str:
    """The launch command of ``script``, without its comment lines (notes)."""
    return "\n".join(x for x in script.read_text().splitlines() if not x.startswith("#"))


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


def _capped_pools(result: Path, prefill_cap: int | None, decode_cap: int,
                  clients: int = 16) -> tuple[float, float]:  # fmt: skip
    """(TTFT ms, TPOT ms) of estimate's pools (``pool_steps`` at the exported memory setting,
    the engine's defaults) with each pool's engine capped at ``prefill_cap`` / ``decode_cap``
    (None: the engine's default)."""
    from plena_opt.api.running_cap import EXPORTED_MEMORY_FRACTION
    from plena_opt.serving import StepModel
    from plena_opt.serving.disaggregated import Pools, disaggregated_under_load
    from plena_opt.serving.pools import pool_steps
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, target_from_flags
    from plena_opt.validate.serving_score import _parts

    key = f"1P:{POOL.format(prefill_cap or 1)}+1D:{POOL.format(decode_cap)}"
    t = target_from_flags(key, "llama-3.1-8b", "h100-sxm", "vllm")
    d = deployment(t, read_bench_runs(result)[0])
    parts = _parts(d, 0.0)
    pools = Pools(1, 1, 1, 1)
    pre, dec, x = pool_steps(*parts[:5], pools, parts[5], EXPORTED_MEMORY_FRACTION)

    def cap(step: StepModel, n: int | None) -> StepModel:
        eng = step.engine
        if n is not None and (eng.max_running is None or n < eng.max_running):
            eng = replace(eng, max_running=n)
        return StepModel(step.costs, eng, step.gpus, step.attention_dp)

    m = disaggregated_under_load(cap(pre, prefill_cap), cap(dec, decode_cap), x, pools,
                                 (1024, 256, 0.0), clients)  # fmt: skip
    return 1e3 * m.ttft_seconds, 1e3 * m.tpot_seconds


@pytest.fixture
def result(tmp_path):
    return _result(tmp_path)


def test_pool_caps_the_launch_files_write_are_priced(capsys, tmp_path, result):
    """A prefill key at batch 1 writes no ``--max-num-seqs`` (the engine's default: 8192 // 1024
    = 8 prompts a step, not one) and ``--max-num-seqs 4`` on the decode server (12 of 16 clients
    wait for a decode slot)."""
    bundle = _bundle(capsys, tmp_path, 1, 4)
    assert "--max-num-seqs" not in _command(bundle / "vllm-prefill.sh")
    assert "--max-num-seqs 4 " in _command(bundle / "vllm-decode.sh")
    row = _row(capsys, result, bundle)
    ttft, tpot = _capped_pools(result, None, 4)
    assert row["ttft_ms"] == pytest.approx(ttft, rel=1e-9)
    assert row["tpot_ms"] == pytest.approx(tpot, rel=1e-9)
    one = _capped_pools(result, 1, 4)[0]  # what a prefill cap of 1 would price
    assert abs(row["ttft_ms"] - one) > 1e-6 * one
    free = _estimate(capsys)  # the pools without the caps, as estimate prices them
    assert row["ttft_ms"] > 2 * 1e3 * free["ttft_seconds"]["mean"]  # clients wait for a slot
    assert row["tpot_ms"] < 1e3 * free["tpot_seconds"]  # a decode batch of 4, not 16


@pytest.mark.parametrize("prefill", [1, 512])
def test_pool_caps_that_do_not_bind_price_as_estimate(capsys, tmp_path, result, prefill):
    """The decode cap does not bind and the prefill key's batch writes no cap: ``estimate``."""
    bundle = _bundle(capsys, tmp_path, prefill, 512)
    row = _row(capsys, result, bundle)
    free = _estimate(capsys)
    assert row["ttft_ms"] == pytest.approx(1e3 * free["ttft_seconds"]["mean"], rel=1e-9)
    assert row["tpot_ms"] == pytest.approx(1e3 * free["tpot_seconds"], rel=1e-9)


def test_a_search_exported_deployment_prices_as_estimate(capsys, tmp_path, result):
    """Price = launch: ``search --serving disaggregated`` keys its prefill pool at batch 1; the
    bundle ``export`` writes of its best deployment (prefill server at the engine's default
    cap) is priced by ``validate --bundle`` as ``estimate`` prices the same pools (r18pfexp;
    a prefill cap of 1 priced 28.8 ms TTFT here, estimate 30.9 ms)."""
    argv = ["search", *MODEL, "--chip", "h100-sxm", "--noc", "hgx-h100x8", "--input-seq",
            "1024", "--output-seq", "256", "--engine", "vllm", "--serving", "disaggregated",
            "--concurrency", "16", "--recheck", "0", "--quiet", "--json", "--storage",
            ":memory:"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    key = doc["serving"]["comparison"]["disaggregated"]["front"][0]["key"]
    from plena_opt.export import parse_deployment_key, parse_point_key

    x, pkey, y, dkey = parse_deployment_key(key)  # type: ignore[misc]
    (pplan, pbatch, _), (dplan, dbatch, _) = parse_point_key(pkey), parse_point_key(dkey)
    assert pbatch == 1 and dbatch == 16  # the search's keys: prefill b1, decode ⌈16 / y⌉
    out = tmp_path / "bundle"
    assert main(["export", key, *MODEL, "--gpu", "h100-sxm", "--format", "vllm", "--out-dir",
                 str(out), "--input-seq", "1024", "--output-seq", "256"]) == 0  # fmt: skip
    capsys.readouterr()
    assert "--max-num-seqs" not in _command(out / "vllm-prefill.sh")
    row = _row(capsys, result, out)
    argv = ["estimate", "--json", *MODEL, "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--concurrency", "16", "--input-seq", "1024", "--output-seq", "256",
            "--prefill-workers", str(x), "--prefill-tp", str(pplan.tp), "--decode-workers",
            str(y), "--decode-tp", str(dplan.tp), "--engine", "vllm"]  # fmt: skip
    assert main(argv) == 0
    est = json.loads(capsys.readouterr().out)["serving_under_load"]["steady_state"]
    assert row["ttft_ms"] == pytest.approx(1e3 * est["ttft_seconds"]["mean"], rel=1e-9)
    assert row["tpot_ms"] == pytest.approx(1e3 * est["tpot_seconds"], rel=1e-9)
