"""``validate --measurements RESULT`` prices a benchmark run with the settings its launch files
gave the engine (issue 23, r18qa): the key's batch (``--max-num-seqs`` / ``--max-running-requests``
/ ``--max_batch_size``), the bundle's KV-cache format and memory setting; and a result file whose
``backend`` names another engine than ``--engine`` is refused naming ``engine``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plena_opt.cli.main import main

DATA = Path(__file__).parents[1] / "data" / "bench"
VLLM = DATA / "vllm_bench_serve_c32.json"  # 32 clients, 1024 + 256 tokens, backend vllm
SGLANG = DATA / "sglang_bench_serving.jsonl"  # backend sglang
KEY = "tp1-ep1-dp1-pp1-cp1-replace-none-b{}"
FLAGS = ["--model", "llama-3.1-8b", "--gpu", "h100_sxm"]


def _row(capsys, argv: list[str]) -> dict:
    assert main(["validate", "--json", "--measurements", *argv]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["status"] == "priced", row["reason"]
    return row


def _bundle(capsys, tmp_path: Path, name: str, engine: str, *extra: str) -> Path:
    out = tmp_path / name
    argv = ["export", KEY.format(32), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
            "--format", engine, "--out-dir", str(out), *extra]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    return out


def test_the_key_batch_caps_the_running_requests_as_the_launch_files_do(capsys):
    """b8 at 32 clients: the engine runs 8 at once (--max-num-seqs 8), the rest queue."""
    wide = _row(capsys, [str(VLLM), "--deployment", KEY.format(32), *FLAGS, "--engine", "vllm"])
    capped = _row(capsys, [str(VLLM), "--deployment", KEY.format(8), *FLAGS, "--engine", "vllm"])
    assert capped["ttft_ms"] > 2 * wide["ttft_ms"]  # three quarters of the clients wait
    assert capped["tpot_ms"] < wide["tpot_ms"]  # a decode step of 8, not 32
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, launch_step, target_from_flags

    target = target_from_flags(KEY.format(8), "llama-3.1-8b", "h100-sxm", "vllm")
    (run,) = read_bench_runs(VLLM)
    assert launch_step(deployment(target, run), target, {}, {}).engine.max_running == 8


def test_a_bundle_prices_its_kv_cache_format(capsys, tmp_path):
    bf16 = _bundle(capsys, tmp_path, "bf16", "vllm")
    fp8 = _bundle(capsys, tmp_path, "fp8", "vllm", "--kv-precision", "fp8")
    assert "--kv-cache-dtype fp8" in (fp8 / "vllm-serve.sh").read_text()
    a = _row(capsys, [str(VLLM), "--bundle", str(bf16)])
    b = _row(capsys, [str(VLLM), "--bundle", str(fp8)])
    assert b["tpot_ms"] < a["tpot_ms"]  # half the KV bytes read per decode step


def test_a_bundle_prices_its_memory_setting(capsys, tmp_path):
    """--mem-fraction-static 0.2 of an 80 GB H100 leaves the 16 GB of weights ~1 GB of KV:
    fewer than the 32 clients run at once."""
    full = _bundle(capsys, tmp_path, "full", "sglang")
    tight = _bundle(capsys, tmp_path, "tight", "sglang", "--memory-fraction", "0.2")
    sgl = tmp_path / "one.jsonl"
    sgl.write_text(SGLANG.read_text().splitlines()[1] + "\n")  # the 32-client run
    a = _row(capsys, [str(sgl), "--bundle", str(full)])
    b = _row(capsys, [str(sgl), "--bundle", str(tight)])
    assert b["ttft_ms"] > 1.5 * a["ttft_ms"]


def test_a_result_file_of_another_engine_is_refused_naming_engine(capsys):
    argv = [str(SGLANG), "--deployment", KEY.format(32), *FLAGS, "--engine", "vllm"]
    assert main(["validate", "--measurements", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --engine vllm") and "'sglang'" in err and "Traceback" not in err
    # an OpenAI-compatible client names no engine: the flag decides
    doc = json.loads(VLLM.read_text())
    assert doc["backend"] == "vllm"


def test_an_explicit_moe_split_in_the_key_is_priced_as_written(capsys):
    """``mtp2`` on tp2: experts tensor-parallel over both GPUs (vLLM without
    --enable-expert-parallel), not the ``replace`` shorthand's expert parallelism."""
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, target_from_flags

    moe = ["--model", "qwen3-30b-a3b", "--gpu", "h100_sxm", "--engine", "vllm"]
    rows = {k: _row(capsys, [str(VLLM), "--deployment", f"tp2-ep1-dp1-pp1-cp1-{k}-none-b32", *moe])
            for k in ("replace", "mtp1", "mtp2")}  # fmt: skip
    assert rows["mtp1"]["tpot_ms"] == rows["replace"]["tpot_ms"]  # replace folds TP into EP
    assert rows["mtp2"]["tpot_ms"] != rows["replace"]["tpot_ms"]
    target = target_from_flags("tp2-ep1-dp1-pp1-cp1-mtp2-none-b32", "qwen3-30b-a3b", "h100-sxm",
                               "vllm")  # fmt: skip
    assert deployment(target, read_bench_runs(VLLM)[0]).moe_tp == 2


def test_a_quantised_checkpoint_id_is_priced_in_its_own_formats():
    """--model nvidia/Qwen3-32B-NVFP4: NVFP4 weights and the FP8 KV cache its
    hf_quant_config.json declares (the engine's default inherits it), not the base model's bf16."""
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, target_from_flags

    (run,) = read_bench_runs(VLLM)
    key = KEY.format(32)
    d = deployment(target_from_flags(key, "nvidia/Qwen3-32B-NVFP4", "b200", "vllm"), run)
    assert (d.model, d.precision, d.kv_precision) == ("qwen3-32b", "fp4", "fp8")
    base = deployment(target_from_flags(key, "Qwen/Qwen3-32B", "b200", "vllm"), run)
    assert (base.precision, base.kv_precision) == ("bf16", None)
    given = target_from_flags(key, "nvidia/Qwen3-32B-NVFP4", "b200", "vllm", None, "bf16")
    assert deployment(given, run).kv_precision == "bf16"  # a bundle's explicit format wins
    pools = "1P:tp1-ep1-dp1-pp1-cp1-replace-none-b8+1D:tp2-ep1-dp1-pp1-cp1-replace-none-b32"
    d = deployment(target_from_flags(pools, "nvidia/Qwen3-32B-NVFP4", "b200", "vllm"), run)
    assert (d.pools, d.precision, d.kv_precision) == ((1, 1, 1, 2), "fp4", "fp8")


def test_an_empty_measurements_file_says_it_is_empty(capsys, tmp_path):
    empty = tmp_path / "results.json"
    empty.write_text("")
    for extra in ([], ["--deployment", KEY.format(32), *FLAGS, "--engine", "vllm"]):
        assert main(["validate", "--measurements", str(empty), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: measurements") and "empty" in err, err
        assert "missing columns" not in err


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"key": "tp1"}, "'key'"),
        ({"gpu": "b900"}, "'gpu'"),
        ({"engines": "vllm"}, "'engines'"),
        ({"catalog_model": "no-such-model", "model": None}, "'catalog_model'"),
    ],
)
def test_a_damaged_bundle_names_its_field_not_a_flag_never_given(capsys, tmp_path, change, field):
    out = _bundle(capsys, tmp_path, "b", "vllm")
    doc = json.loads((out / "deployment.json").read_text())
    (out / "deployment.json").write_text(json.dumps({**doc, **change}))
    assert main(["validate", "--measurements", str(VLLM), "--bundle", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --bundle") and "deployment.json field" in err and field in err
    assert "--deployment" not in err and "--gpu" not in err and "needs --engine" not in err


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"burstiness": 0.5}, "burstiness 0.5"),
        ({"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 20},
         "ramp_up_strategy"),
    ],
)  # fmt: skip
def test_arrivals_other_than_poisson_are_refused_with_the_reason(capsys, tmp_path, change, reason):
    """vllm bench serve --burstiness (gamma arrivals) and --ramp-up-strategy (a rate that moves)
    are saved in the result; the open loop prices Poisson arrivals at one rate only."""
    doc = json.loads(VLLM.read_text())
    poisson = {**doc, "request_rate": 10.0, "max_concurrency": None}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(poisson) + "\n" + json.dumps({**poisson, **change}) + "\n")
    argv = ["validate", "--json", "--measurements", str(path), "--deployment", KEY.format(32),
            *FLAGS, "--engine", "vllm"]  # fmt: skip
    assert main(argv) == 0
    plain, other = json.loads(capsys.readouterr().out)["rows"]
    assert plain["status"] == "priced"
    assert other["status"] == "refused" and reason in other["reason"]
    closed = tmp_path / "closed.json"  # a closed loop sends on completions: burstiness unused
    closed.write_text(json.dumps({**doc, "burstiness": 0.5}))
    assert _row(capsys, [str(closed), "--deployment", KEY.format(32), *FLAGS, "--engine", "vllm"])


def test_calibrate_refuses_an_unwritable_out_before_fitting(capsys, tmp_path):
    """--out in a folder that does not exist: said at once, naming --out (not after the fit)."""
    out = tmp_path / "no-such-dir" / "overlay.json"
    argv = ["calibrate", "--measurements", str(VLLM), "--deployment", KEY.format(32), *FLAGS,
            "--engine", "vllm", "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "no-such-dir" in err and "Traceback" not in err
    assert not out.parent.exists()
