"""``validate --measurements``: serving rows priced as deployed, or refused with the reason."""

from __future__ import annotations

import csv
import json

import pytest

from plena_opt.cli.main import main
from plena_opt.validate.serving_rows import Refused, ServingRow, resolve
from plena_opt.validate.serving_score import score_serving, shipped_serving_csv
from tests.conftest import require_shared

COLUMNS = (
    "id,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,"
    "moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    "prefill_num_workers,decode_num_workers,concurrency,ttft_ms,tpot_ms"
).split(",")
LLAMA = {"backend": "vllm", "model_path": "meta-llama/Llama-3.1-8B-Instruct",
         "system": "h100_sxm", "mode": "agg", "isl": "1024", "osl": "256", "tp_size": "1",
         "pp_size": "1",
         "moe_tp_size": "1", "moe_ep_size": "1", "batch_size": "8", "concurrency": "8",
         "ttft_ms": "60.0", "tpot_ms": "7.0"}  # fmt: skip
R1 = {**LLAMA, "backend": "trtllm", "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
      "precision": "fp8", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8_block", "tp_size": "8",
      "moe_tp_size": "1", "moe_ep_size": "8"}  # fmt: skip
ROWS = {
    "priced": LLAMA,
    "predicted_only": {**LLAMA, "ttft_ms": "", "tpot_ms": ""},
    "r1_ep8": R1,
    "unknown_system": {**LLAMA, "system": "mi355x"},
    "unknown_model": {**LLAMA, "model_path": "acme/Llama-3.1-8B-Finetune"},
    "disagg": {**LLAMA, "mode": "disagg", "tp_size": "", "batch_size": ""},
    "fp4_on_hopper": {**LLAMA, "gemm_quant_mode": "nvfp4"},
    # predicted only (no measurement): fp8_block vs per-tensor fp8 GEMMs on a dense model
    "block_fp8_llama": {**LLAMA, "gemm_quant_mode": "fp8_block", "ttft_ms": "", "tpot_ms": ""},
    "fp8_llama": {**LLAMA, "gemm_quant_mode": "fp8", "ttft_ms": "", "tpot_ms": ""},
    "moe_split": {**R1, "moe_tp_size": "2", "moe_ep_size": "4"},  # priced: Plan.moe_tp 2
    "experts_split": {**R1, "tp_size": "6", "moe_tp_size": "2", "moe_ep_size": "3"},
    "sizes_disagree": {**R1, "moe_ep_size": "4"},
    "replicas": {**LLAMA, "concurrency": "32"},
}
REASONS = {
    "unknown_system": "system 'mi355x' is not modelled",
    "unknown_model": "not in the catalog",
    "disagg": "deployment not fully specified",
    "fp4_on_hopper": "on h100-sxm: the chip has no fp4 tensor cores",
    # MoE EP 3 runs with 2 EPLB replicas (serving_rows.eplb_redundant); TP 6 is what fails
    "experts_split": "tp=6 does not divide the 128 attention heads",
    "sizes_disagree": "size fields disagree",
    "replicas": "replicas not recorded",
}


@pytest.fixture
def results_csv(tmp_path):
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        for rid, row in ROWS.items():
            w.writerow({**{c: "" for c in COLUMNS}, **row, "id": rid})
    return path


def test_rows_are_priced_or_refused_with_their_reason(results_csv):
    report = score_serving(results_csv)
    by_id = {r.id: r for r in report.rows}
    assert {r for r, v in by_id.items() if v.status == "priced"} == {
        "priced", "predicted_only", "r1_ep8", "moe_split", "block_fp8_llama",
        "fp8_llama"}  # fmt: skip
    # fp8_block GEMMs on a dense Llama: the H100's fitted gemm.fp8_block curves (more fixed
    # time and lower efficiency than per-tensor fp8), so the prefill is slower than fp8's
    assert by_id["block_fp8_llama"].ttft_ms > by_id["fp8_llama"].ttft_ms
    for rid, reason in REASONS.items():
        assert by_id[rid].status == "refused" and reason in by_id[rid].reason, rid
        assert by_id[rid].ttft_ms is None
    p = by_id["priced"]
    assert p.measured_ttft_ms == 60.0 and 0 < p.ttft_ms < 1e3 and 0 < p.tpot_ms < 100
    q = by_id["predicted_only"]
    assert q.measured_ttft_ms is None and q.ttft_ms == pytest.approx(p.ttft_ms)
    s = report.summary()
    assert s["priced"] == 6 and s["refused"] == len(REASONS)
    assert s["overall"]["ttft_points"] == 3  # the predicted-only row has nothing to score
    scored = (p, by_id["r1_ep8"], by_id["moe_split"])
    mape = 100 * sum(abs(r.ttft_ms / 60 - 1) for r in scored) / 3
    assert s["overall"]["ttft_mape"] == pytest.approx(mape)
    assert set(s["by_system"]) == {"h100_sxm", "b200_sxm"}


def test_parallel_sizes_map_to_the_plan():
    d = resolve(ServingRow("x", R1))
    assert (d.tp, d.ep, d.moe_tp_mode, d.gpus, d.precision) == (8, 1, "replace", 8, "fp8")
    keep = resolve(ServingRow("x", {**R1, "moe_tp_size": "8", "moe_ep_size": "1"}))
    assert (keep.tp, keep.ep, keep.moe_tp_mode) == (8, 1, "keep")
    dp = resolve(ServingRow("x", {**R1, "tp_size": "1", "attention_dp_size": "8",
                                  "batch_size": "1"}))  # fmt: skip
    assert (dp.tp, dp.ep, dp.gpus) == (1, 8, 8)
    wide = resolve(ServingRow("x", {**R1, "tp_size": "16", "moe_ep_size": "16"}))
    assert (wide.gpus, wide.noc) == (16, "hgx-b200x8@2")
    with pytest.raises(Refused, match="concurrency is empty"):
        resolve(ServingRow("x", {**LLAMA, "concurrency": ""}))


def test_a_row_whose_id_names_other_sizes_is_refused():
    # an InferenceX id names the worker's GPUs (tp8) and EP; fields saying 64 GPUs are refused
    ok = resolve(ServingRow("r1_b200_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_929", R1))
    assert ok.gpus == 8
    dump = resolve(ServingRow("r1_agg_1024x1024_c8_tp8_0_ep8_0_12", R1))  # "_0" suffixes
    assert dump.gpus == 8
    bad = {**R1, "tp_size": "64", "moe_tp_size": "8", "moe_ep_size": "8"}
    with pytest.raises(Refused, match=r"disagree with the row id: id tp8 .* = 64 GPUs"):
        resolve(ServingRow("r1_b200_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_929", bad))
    assert resolve(ServingRow("no_sizes_in_this_id", bad)).gpus == 64  # no id sizes: fields


def test_cli_json_and_text(results_csv, capsys):
    assert main(["validate", "--measurements", str(results_csv), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = next(r for r in doc["rows"] if r["id"] == "priced")
    assert row["status"] == "priced" and row["measured_tpot_ms"] == 7.0 and row["tpot_ms"] > 0
    assert doc["summary"]["priced"] == 6
    assert main(["validate", "--measurements", str(results_csv)]) == 0
    out = capsys.readouterr().out
    assert "6 of 13 rows priced" in out and "not in the catalog" in out


def test_cli_refuses_a_missing_file(tmp_path, capsys):
    assert main(["validate", "--measurements", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "measurements" in err


def test_cli_refuses_a_file_without_the_columns(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("id,ttft_ms\nx,1\n")
    assert main(["validate", "--measurements", str(path)]) == 2
    assert "missing columns" in capsys.readouterr().err


def test_shipped_file_is_the_shared_copy():
    shared = require_shared() / "data" / "validation" / "serving" / "measured_serving_h100_b200.csv"
    assert shipped_serving_csv().read_bytes() == shared.read_bytes()


# Rows of the shipped file priced (1,257 of 1,877, one of them disaggregated; the rest refused:
# 70 DeepSeek-R1 TensorRT-LLM rows of the MTP-only 1.2.0rc6.post3 image (18 more of it keep an
# earlier reason) and 26 SGLang fp8 rows at points only the MTP config ran (r13dsr1:
# speculative decoding the file does not record; 1,353 were priced before), 393 disagg rows
# without worker counts, 107 B200
# rows whose size fields name 4 to 64 GPUs where
# the id names 2 to 8 (106 of them were priced as 16/64-GPU plans until r6), 13 with unrecorded
# replicas, 8 without a concurrency, 4 fp8_block Qwen3 disagg rows). The 69 H100 gpt-oss-120b
# rows labelled nvfp4 price as the checkpoint's MXFP4 run weight-only (W4A16; issue 24). Before
# MoE splits were a plan field (issue 24) 113 rows were refused as not expressible: 108 of them
# were priced since, 5 are refused for unrecorded replicas.
SHIPPED_PRICED = 1257


def test_shipped_file_priced_fraction_and_reasons():
    report = score_serving(shipped_serving_csv())
    s = report.summary()
    assert s["rows"] == 1877 and s["priced"] == SHIPPED_PRICED
    assert all(r.reason for r in report.rows if r.status == "refused")
    assert all(r.ttft_ms and r.tpot_ms for r in report.rows if r.status == "priced")
    # the fixed-length (undated) SGLang grid runs as prefill-first waves (serving.steady.wave):
    # priced as spread clients it was TTFT 84 % / TPOT 56 % MAPE, 0.2x / 1.6x the measurements
    grid = [r for r in report.rows if r.status == "priced" and r.backend == "sglang"
            and r.system == "h100_sxm" and r.mode == "agg"]  # fmt: skip
    assert len(grid) == 84

    def mape(name: str) -> float:
        pairs = [(getattr(r, f"{name}_ms"), getattr(r, f"measured_{name}_ms")) for r in grid]
        return sum(abs(p / m - 1) for p, m in pairs) / len(pairs)

    assert mape("ttft") < 0.20 and mape("tpot") < 0.08
    # the fixed-length (undated) vLLM and TensorRT-LLM grids run AIConfigurator's step budget
    # (bs + isl + 1500, ``aic_deploy``) and are replayed from their start burst
    # (``fixed_length_run``): at the engines' default budget in the steady lock-step form they
    # were TTFT 53 % (vLLM, +65 % at 1k prompts) and 39.5 % (TensorRT-LLM Qwen3-32B 34 %)
    grid = [r for r in report.rows if r.status == "priced" and r.backend == "vllm"
            and r.model == "Qwen/Qwen3-32B" and r.isl in ("1024", "4096")]  # fmt: skip
    assert len(grid) == 90 and mape("ttft") < 0.22
    grid = [r for r in report.rows if r.status == "priced" and r.backend == "trtllm"
            and r.model == "Qwen/Qwen3-32B" and r.system == "h100_sxm"]  # fmt: skip
    assert len(grid) == 176 and mape("ttft") < 0.22


def _row(rid: str, system: str, ttft: float, mttft: float, tpot: float = 10.0,
         mtpot: float = 10.0, backend: str = "vllm"):  # fmt: skip
    from plena_opt.validate.serving_score import RowResult

    return RowResult(rid, "priced", "", system, backend, "m", "agg", "8", ttft_ms=ttft,
                     tpot_ms=tpot, measured_ttft_ms=mttft, measured_tpot_ms=mtpot)  # fmt: skip


def test_fitted_overhead_is_the_mape_minimising_shift_and_never_negative():
    from plena_opt.validate.serving_fit import apply, fit

    rows = [_row("a", "h100_sxm", 50, 100), _row("b", "h100_sxm", 80, 130),
            _row("c", "h100_sxm", 20, 300, tpot=12.0)]  # fmt: skip
    c = fit(rows, "test")
    assert c.ttft_overhead_seconds["vllm"] == pytest.approx(0.050)  # weighted median of m − p
    assert c.host_step_seconds["vllm"] == 0.0  # TPOT over-predicted: no negative host time
    shifted = apply(rows, c)
    assert [r.ttft_ms for r in shifted] == [100, 130, 70]
    assert fit([_row("d", "h100_sxm", 200, 100)], "t").ttft_overhead_seconds["vllm"] == 0.0


def test_leave_one_gpu_out_scores_only_the_held_out_rows():
    from plena_opt.validate.serving_fit import held_out
    from plena_opt.validate.serving_score import ServingReport

    rows = [_row("a", "h100_sxm", 50, 100), _row("b", "h100_sxm", 50, 100),
            _row("c", "b200_sxm", 10, 20)]  # fmt: skip
    by = {h.test: h for h in held_out(ServingReport(rows), lambda r: r.system)}
    b200 = by["b200_sxm"]
    assert b200.rows == 1 and b200.constants.ttft_overhead_seconds["vllm"] == pytest.approx(0.05)
    assert b200.ttft_before == pytest.approx(50) and b200.ttft_after == pytest.approx(200)
    assert by["h100_sxm"].constants.ttft_overhead_seconds["vllm"] == pytest.approx(0.01)


def test_cli_cross_validation_json(results_csv, capsys):
    argv = ["validate", "--measurements", str(results_csv), "--json", "--cross-validate"]
    assert main(argv) == 0
    cv = json.loads(capsys.readouterr().out)["cross_validation"]
    assert {h["test"] for h in cv["gpu"]} == {"h100_sxm", "b200_sxm"}
    assert all(h["constants_ms"] for h in cv["gpu"])


def test_spearman_and_tpot_ranking_within_groups():
    from plena_opt.validate.serving_score import spearman, tpot_ranking

    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)  # ties: mean ranks
    assert spearman([1, 1], [1, 2]) is None
    rows = [_row(f"r{i}", "h100_sxm", 1, 1, tpot=p, mtpot=m)
            for i, (p, m) in enumerate([(1, 5), (2, 6), (3, 7), (3, 1)])]  # fmt: skip
    rows += [_row("b", "b200_sxm", 1, 1, tpot=1, mtpot=1)]  # a group of one: not ranked
    rk = tpot_ranking(rows)
    assert rk["groups"] == 1 and rk["groups_rho_at_least_0_9"] == 0
    assert rk["mean_rho"] == pytest.approx(spearman([1, 2, 3, 3], [5, 6, 7, 1]))


def test_cli_cross_validate_needs_measurements(capsys):
    assert main(["validate", "--cross-validate"]) == 2
    assert "--measurements" in capsys.readouterr().err


def test_kv_cache_format_of_a_row():
    # an InferenceX row (id starts with its dump date) runs its recipe's fp8 KV cache
    ix = "2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp1_ep1_1"
    assert resolve(ServingRow(ix, LLAMA)).kv_precision == "fp8"
    # ... and, on vLLM, async scheduling by its recipe or version (test_vllm_async_rows.py)
    assert resolve(ServingRow(ix, LLAMA)).async_scheduling
    assert (
        resolve(ServingRow("grid_row", {**LLAMA, "backend_version": "0.12.0"})).async_scheduling
        is False
    )
    assert resolve(ServingRow("grid_row", LLAMA)).kv_precision is None  # NVIDIA grid: bf16
    oss = {**LLAMA, "model_path": "openai/gpt-oss-120b", "tp_size": "1", "moe_tp_size": "1",
           "moe_ep_size": "1", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}  # fmt: skip
    assert resolve(ServingRow(ix.replace("llama", "oss"), oss)).kv_precision is None  # H100 recipe
    assert resolve(ServingRow("x", {**LLAMA, "kv_cache_dtype": "fp8_e4m3"})).kv_precision == "fp8"
    assert resolve(ServingRow(ix, {**LLAMA, "kv_cache_dtype": "auto"})).kv_precision is None
    with pytest.raises(Refused, match="kv_cache_dtype 'int4' is not modelled"):
        resolve(ServingRow("x", {**LLAMA, "kv_cache_dtype": "int4"}))
    # an fp8 KV cache reads half the KV bytes: a long-context decode is faster (32 requests:
    # both KV pools hold them all; at 64 the bf16 pool holds fewer, serving.kv_admission)
    from plena_opt.serving import ServingWorkload, benchmark_run
    from plena_opt.validate.serving_score import step_model

    long = {**LLAMA, "isl": "8192", "concurrency": "32", "batch_size": "32"}
    bf16, fp8 = (benchmark_run(step_model(resolve(ServingRow(i, long))),
                               ServingWorkload(32, 8192, 256)).tpot_seconds
                 for i in ("grid_row", ix))  # fmt: skip
    assert fp8 < 0.95 * bf16


def test_inferencex_mtp_only_image_is_refused_as_unrecorded_speculation():
    """InferenceX ran TensorRT-LLM 1.2.0rc6.post3 only for its DeepSeek-R1 MTP configs
    (``serving_mtp.SPECULATIVE_IMAGES``): such a row is refused naming the speculation; the
    same row on the non-MTP image (post2), from another source, or of another model or GPU
    (not what the configs named ran) is priced."""
    row = {"backend": "trtllm", "backend_version": "1.2.0rc6.post3",
           "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "mode": "agg",
           "isl": "1024", "osl": "1024", "tp_size": "8", "moe_tp_size": "8", "moe_ep_size": "1",
           "concurrency": "8", "batch_size": "8", "precision": "fp8", "gemm_quant_mode": "fp8",
           "moe_quant_mode": "fp8"}  # fmt: skip
    ix = "2026_02_06_deepseek_r1_b200_x"
    with pytest.raises(Refused, match="speculative-decoding configs.*acceptance"):
        resolve(ServingRow(ix, row))
    assert resolve(ServingRow(ix, {**row, "backend_version": "1.2.0rc6.post2"})).tp == 8
    assert resolve(ServingRow("aic_x", row)).tp == 8
    # the evidence names DeepSeek-R1 on B200 only: another model or GPU on post3 is priced
    llama = {**row, "model_path": "meta-llama/Llama-3.1-70B", "precision": "bf16",
             "gemm_quant_mode": "bf16", "moe_quant_mode": "bf16"}  # fmt: skip
    assert resolve(ServingRow(ix, llama)).tp == 8
    assert resolve(ServingRow(ix, {**row, "system": "h200_sxm"})).tp == 8


def test_sglang_points_only_the_mtp_config_ran_are_refused():
    """InferenceX's non-MTP DeepSeek-R1 fp8 B200 SGLang config ran TP 8 at 4-64 clients (1k/1k,
    1k/8k) and 8k/1k only at TP 8 x 4 clients or TP 4 x 4-32; its MTP twin on the same v0.5.9
    image ran TP 8 at 4-512 (``serving_mtp.SGLANG_DSR1_FP8_POINTS``)."""
    row = {"backend": "sglang", "backend_version": "0.5.9",
           "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "mode": "agg",
           "isl": "1024", "osl": "1024", "tp_size": "8", "moe_tp_size": "8", "moe_ep_size": "1",
           "concurrency": "64", "precision": "fp8", "gemm_quant_mode": "fp8_block",
           "moe_quant_mode": "fp8_block"}  # fmt: skip
    ix = "2026_03_25_deepseek_r1_b200_x"
    assert resolve(ServingRow(ix, row)).concurrency == 64
    with pytest.raises(Refused, match="speculative-decoding config.*128 clients"):
        resolve(ServingRow(ix, {**row, "concurrency": "128"}))
    long = {**row, "isl": "8192", "osl": "1024", "concurrency": "8"}
    with pytest.raises(Refused, match="dsr1-fp8-b200-sglang-mtp"):
        resolve(ServingRow(ix, long))
    tp4 = {**long, "tp_size": "4", "moe_tp_size": "4", "concurrency": "32"}
    assert resolve(ServingRow(ix, tp4)).gpus == 4
    # an older image (no MTP config yet) or another source: priced as recorded
    assert resolve(ServingRow(ix, {**long, "backend_version": "0.5.6"})).gpus == 8
    assert resolve(ServingRow("aic_x", {**row, "concurrency": "128"})).gpus == 8
