"""``validate --measurements RESULT`` on the result files of ``vllm bench serve --save-result`` and
SGLang ``bench_serving``, given the deployment by flags or by an export bundle's deployment.json.
The sample files in tests/data/bench are hand-written (illustrative numbers, real field names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plena_opt.cli.main import main

DATA = Path(__file__).parents[1] / "data" / "bench"
VLLM = DATA / "vllm_bench_serve_c32.json"
APPENDED = DATA / "vllm_bench_serve_appended.json"
SGLANG = DATA / "sglang_bench_serving.jsonl"
KEY = "tp1-ep1-dp1-pp1-cp1-replace-none-b32"
FLAGS = ["--deployment", KEY, "--model", "llama-3.1-8b", "--gpu", "h100_sxm"]


def _json(capsys, argv: list[str]) -> dict:
    assert main(["validate", "--json", "--measurements", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_vllm_result_is_priced_as_its_run(capsys):
    doc = _json(capsys, [str(VLLM), *FLAGS, "--engine", "vllm"])
    (row,) = doc["rows"]
    assert row["status"] == "priced" and row["id"] == "vllm_bench_serve_c32#1"
    assert (row["system"], row["backend"], row["model"]) == ("h100_sxm", "vllm",
                                                             "meta-llama/Llama-3.1-8B")  # fmt: skip
    # the load and mean lengths come from the file: max_concurrency, total tokens / completed
    assert (row["concurrency"], row["isl"], row["osl"]) == ("32", "1024", "256")
    assert (row["measured_ttft_ms"], row["measured_tpot_ms"]) == (231.4, 10.9)
    assert row["ttft_ms"] > 0 and row["tpot_ms"] > 0
    assert doc["summary"]["priced"] == 1 and doc["summary"]["overall"]["ttft_points"] == 1


def test_the_prediction_is_the_benchmark_run_of_the_deployment():
    from plena_opt.serving import ServingWorkload, benchmark_run
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, score_bench, target_from_flags
    from plena_opt.validate.serving_score import step_model

    target = target_from_flags(KEY, "meta-llama/Llama-3.1-8B", "h100-sxm", "vllm")
    (run,) = read_bench_runs(VLLM)
    d = deployment(target, run)
    assert (d.chip, d.noc, d.gpus, d.model, d.precision, d.tp) == (
        "h100-sxm", "hgx-h100x8", 1, "llama-3.1-8b", "bf16", 1)  # fmt: skip
    # 256 requests over 32 clients: 8 prompts per client, the start burst weighs 1/8
    expect = benchmark_run(step_model(d), ServingWorkload(32, 1024, 256), 8)
    (row,) = score_bench(VLLM, target).rows
    assert row.ttft_ms == pytest.approx(1e3 * expect.ttft_seconds)
    assert row.tpot_ms == pytest.approx(1e3 * expect.tpot_seconds)


def test_sglang_jsonl_lines_are_runs(capsys):
    doc = _json(capsys, [str(SGLANG), *FLAGS, "--engine", "sglang"])
    assert [r["concurrency"] for r in doc["rows"]] == ["8", "32"]
    assert all(r["status"] == "priced" and r["backend"] == "sglang" for r in doc["rows"])
    assert doc["rows"][0]["measured_ttft_ms"] == 98.7


def test_a_poisson_run_is_priced_open_loop_and_a_capped_rate_refused(capsys):
    doc = _json(capsys, [str(APPENDED), *FLAGS, "--engine", "vllm"])
    poisson, capped = doc["rows"]
    assert poisson["status"] == "priced" and poisson["concurrency"] == ""
    assert capped["status"] == "refused"
    assert capped["reason"] == "a request rate with a concurrency cap is not modelled"


@pytest.mark.parametrize(
    "key, reason",
    [
        ("tp1-ep1-dp1-pp2-cp1-replace-none-b32", "pp 2: only one engine instance"),
        ("1P:tp1-ep1-dp1-pp1-cp1-replace-none-b8+1D:tp1-ep2-dp1-pp1-cp1-replace-none-b32",
         "decode pool: ep 2: a pool worker is one TP engine instance"),
        ("tp1-ep1-dp1-pp1-cp1-replace-none-b32-fp4", "h100-sxm has no fp4 tensor cores"),
    ],
)  # fmt: skip
def test_a_deployment_the_product_cannot_express_is_refused_with_the_reason(capsys, key, reason):
    argv = [str(VLLM), "--deployment", key, "--model", "llama-3.1-8b", "--gpu", "h100_sxm",
            "--engine", "vllm"]  # fmt: skip
    (row,) = _json(capsys, argv)["rows"]
    assert row["status"] == "refused" and reason in row["reason"]


DISAGG = "2P:tp1-ep1-dp1-pp1-cp1-replace-none-b8+1D:tp2-ep1-dp1-pp1-cp1-replace-none-b32"


def test_a_disaggregated_bundle_is_priced_as_its_pools(capsys):
    from plena_opt.serving.disaggregated import Pools, disaggregated_under_load
    from plena_opt.serving.pools import pool_steps
    from plena_opt.validate.bench_results import read_bench_runs
    from plena_opt.validate.bench_score import deployment, target_from_flags
    from plena_opt.validate.serving_score import _parts

    argv = [str(VLLM), "--deployment", DISAGG, "--model", "llama-3.1-8b", "--gpu", "h100_sxm",
            "--engine", "vllm"]  # fmt: skip
    (row,) = _json(capsys, argv)["rows"]
    assert row["status"] == "priced" and row["mode"] == "disagg", row["reason"]
    target = target_from_flags(DISAGG, "meta-llama/Llama-3.1-8B", "h100-sxm", "vllm")
    (run,) = read_bench_runs(VLLM)
    d = deployment(target, run)
    assert (d.pools, d.gpus, d.noc) == ((2, 1, 1, 2), 4, "hgx-h100x8")
    model, noc, memory, chip, wl, eng = _parts(d, 0.0)
    pools = Pools(2, 1, 1, 2)
    steps = pool_steps(model, noc, memory, chip, wl, pools, eng)
    m = disaggregated_under_load(*steps, pools, (1024, 256, run.range_ratio), 32)
    assert row["ttft_ms"] == pytest.approx(1e3 * m.ttft_seconds)
    assert row["tpot_ms"] == pytest.approx(1e3 * m.tpot_seconds)
    # the prefill queue is in the TTFT: more prefill workers, a shorter wait
    wide = DISAGG.replace("2P:", "4P:")
    (row4,) = _json(capsys, [str(VLLM), "--deployment", wide, *argv[3:]])["rows"]
    assert row4["ttft_ms"] < row["ttft_ms"]


def test_an_export_bundle_names_the_deployment(capsys, tmp_path):
    out = tmp_path / "bundle"
    argv = ["export", KEY, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-seq", "1024",
            "--output-seq", "256", "--out-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert str(out / "deployment.json") in capsys.readouterr().out.splitlines()
    dep = json.loads((out / "deployment.json").read_text())
    assert (dep["key"], dep["catalog_model"], dep["gpu"]) == (KEY, "llama-3.1-8b", "h100-sxm")
    assert dep["engines"] == ["sglang", "trtllm", "vllm"] and dep["concurrency"] == 32
    assert dep["bench_result_files"]["sglang"].endswith(".jsonl")
    by_bundle = _json(capsys, [str(VLLM), "--bundle", str(out), "--engine", "vllm"])["rows"]
    by_flags = _json(capsys, [str(VLLM), *FLAGS, "--engine", "vllm"])["rows"]
    assert by_bundle == by_flags
    # three engines exported: the bundle cannot say which one ran
    assert main(["validate", "--measurements", str(VLLM), "--bundle", str(out)]) == 2
    assert "--engine" in capsys.readouterr().err


def test_a_one_engine_bundle_implies_its_engine(capsys, tmp_path):
    out = tmp_path / "b"
    argv = ["export", KEY, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--format", "sglang",
            "--out-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    rows = _json(capsys, [str(SGLANG), "--bundle", str(out)])["rows"]
    assert {r["backend"] for r in rows} == {"sglang"}


def _edited(tmp_path: Path, change: dict, drop: str | None = None) -> str:
    doc = json.loads(VLLM.read_text())
    doc.update(change)
    if drop:
        del doc[drop]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    "change, drop, field",
    [
        ({}, "mean_ttft_ms", "'mean_ttft_ms' is missing"),
        ({}, "mean_tpot_ms", "'mean_tpot_ms' is missing"),
        ({}, "completed", "'completed' is missing"),
        ({}, "total_input_tokens", "'total_input_tokens' is missing"),
        ({}, "max_concurrency", "'max_concurrency' is missing"),
        ({}, "request_rate", "'request_rate' is missing"),
        ({"completed": "many"}, None, "'completed' must be a positive integer"),
        ({"max_concurrency": 0}, None, "'max_concurrency' must be a positive integer"),
        ({"mean_ttft_ms": -1}, None, "'mean_ttft_ms' must be a finite number of ms"),
        ({"request_rate": "fast"}, None, "'request_rate' must be a rate above 0 or 'inf'"),
        ({}, "date", "neither a vllm bench serve --save-result result"),
    ],
)  # fmt: skip
def test_wrong_or_missing_fields_are_input_errors_naming_the_field(capsys, tmp_path, change,
                                                                   drop, field):  # fmt: skip
    if drop == "date":
        doc = json.loads(VLLM.read_text())
        for k in ("date", "endpoint_type"):
            del doc[k]
        path = tmp_path / "run.json"
        path.write_text(json.dumps(doc))
        target = str(path)
    else:
        target = _edited(tmp_path, change, drop)
    argv = ["validate", "--measurements", target, *FLAGS, "--engine", "vllm"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and field in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, words",
    [
        ([str(VLLM)], "--deployment KEY --model M --gpu G --engine E, or --bundle DIR"),
        ([str(VLLM), *FLAGS], "needs --engine"),
        ([str(VLLM), "--deployment", KEY, "--model", "gpt-2", "--gpu", "h100_sxm",
          "--engine", "vllm"], "--model 'gpt-2'"),
        ([str(VLLM), "--deployment", KEY, "--model", "llama-3.1-8b", "--gpu", "mi355x",
          "--engine", "vllm"], "--gpu 'mi355x' is not modelled"),
        ([str(VLLM), *FLAGS, "--engine", "tgi"], "--engine 'tgi'"),
        ([str(VLLM), "--bundle", "/nonexistent/folder"], "no deployment.json there"),
        ([str(VLLM), "--deployment", "tp8", "--model", "llama-3.1-8b", "--gpu", "h100_sxm",
          "--engine", "vllm"], "point_key"),
    ],
)  # fmt: skip
def test_a_result_file_without_a_usable_deployment_is_an_input_error(capsys, argv, words):
    assert main(["validate", "--measurements", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and words in err


def test_sglang_drawn_lengths_are_priced_spread_and_fixed_ones_in_lock_step(tmp_path):
    from plena_opt.validate.bench_results import read_bench_runs

    fixed, _ = read_bench_runs(SGLANG)  # random_range_ratio 1: SGLang's fixed lengths
    assert fixed.range_ratio == 0.0
    line = json.loads(SGLANG.read_text().splitlines()[0].replace("Infinity", "1e999"))
    line["random_range_ratio"] = 0.8  # lengths in [0.8·L, L]
    path = tmp_path / "drawn.jsonl"
    path.write_text(json.dumps(line))  # Python writes Infinity back, as SGLang does
    (drawn,) = read_bench_runs(path)
    assert drawn.range_ratio == pytest.approx(0.2 / 1.8) and drawn.request_rate_per_s is None
    line["random_range_ratio"] = 2
    path.write_text(json.dumps(line))
    with pytest.raises(Exception, match="random_range_ratio"):
        read_bench_runs(path)


def _one_row_file(tmp_path, pick, **changes):
    """A results file holding the first shipped row ``pick`` accepts, with ``changes``."""
    import csv

    from plena_opt.validate.serving_score import shipped_serving_csv

    with open(shipped_serving_csv(), newline="") as fh:
        reader = csv.DictReader(fh)
        row = {**next(r for r in reader if pick(r)), **changes}
        fields = list(reader.fieldnames or ()) + [k for k in changes if k not in reader.fieldnames]
    path = tmp_path / "one.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerow(row)
    return path


def _llama8b_c8(r):
    return (r["backend"] == "trtllm" and r["mode"] == "agg" and r["concurrency"] == "8"
            and r["model_path"].endswith("Llama-3.1-8B-Instruct"))  # fmt: skip


def test_dated_rows_are_priced_as_drawn_lengths_undated_as_fixed(tmp_path):
    # InferenceX rows (dated) draw lengths (RANDOM_RANGE_RATIO 0.8): no lock step; the undated
    # gap-analysis rows run fixed lengths (aiperf stddev 0): lock step; a column overrides both
    from dataclasses import replace

    from plena_opt.serving import ServingWorkload, benchmark_run
    from plena_opt.serving.benchmark import fixed_length_run
    from plena_opt.validate.aic_deploy import generated_batch
    from plena_opt.validate.serving_rows import read_rows, resolve
    from plena_opt.validate.serving_score import ROWS_RANGE_RATIO, score_serving, step_model

    undated = _one_row_file(tmp_path, _llama8b_c8)
    row = read_rows(undated)[0]
    d = resolve(row)
    step = step_model(d)
    drawn = benchmark_run(step, ServingWorkload(8, d.input_len, d.output_len, ROWS_RANGE_RATIO))
    fixed = benchmark_run(step, ServingWorkload(8, d.input_len, d.output_len))
    assert fixed.ttft_seconds > 1.1 * drawn.ttft_seconds  # lock step prices it otherwise
    # undated: AIConfigurator's step budget (aic_deploy), the run replayed from its burst
    gen = step_model(replace(d, generated_batch=generated_batch(row)))
    run = fixed_length_run(gen, ServingWorkload(8, d.input_len, d.output_len))
    (priced,) = score_serving(undated).rows
    assert priced.ttft_ms == pytest.approx(1e3 * run.ttft_seconds)
    dated = _one_row_file(tmp_path, _llama8b_c8, measured_on="2026-01-01")
    assert score_serving(dated).rows[0].ttft_ms == pytest.approx(1e3 * drawn.ttft_seconds)
    told = _one_row_file(tmp_path, _llama8b_c8, random_range_ratio="0.8")
    told_drawn = benchmark_run(gen, ServingWorkload(8, d.input_len, d.output_len, 0.8))
    assert score_serving(told).rows[0].ttft_ms == pytest.approx(1e3 * told_drawn.ttft_seconds)
    bad = score_serving(_one_row_file(tmp_path, _llama8b_c8, random_range_ratio="1.5")).rows[0]
    assert bad.status == "refused" and "random_range_ratio" in bad.reason


AIPERF = DATA / "aiperf_profile_export.json"


def test_an_aiperf_export_is_priced_as_its_run(capsys):
    """AIPerf's ``profile_export_aiperf.json``: the load from ``input_config.loadgen``, the mean
    lengths from ``total_isl`` / ``total_osl`` over ``request_count``, TTFT and TPOT from the
    ``avg`` of ``time_to_first_token`` and ``inter_token_latency`` (AIPerf's per-request
    (latency − TTFT) / (output − 1)), priced as the vLLM run of the same load."""
    from plena_opt.validate.bench_results import read_bench_runs

    (run,) = read_bench_runs(AIPERF)
    assert (run.source, run.concurrency, run.request_rate_per_s) == ("aiperf", 32, None)
    assert (run.input_len, run.output_len, run.completed) == (1024, 256, 256)
    assert (run.ttft_ms, run.tpot_ms, run.p99_ttft_ms, run.p99_tpot_ms) == (240.6, 11.2, 388.4,
                                                                             12.3)  # fmt: skip
    (row,) = _json(capsys, [str(AIPERF), *FLAGS, "--engine", "vllm"])["rows"]
    assert row["status"] == "priced" and row["id"] == "aiperf_profile_export#1"
    assert (row["concurrency"], row["isl"], row["osl"]) == ("32", "1024", "256")
    (same,) = _json(capsys, [str(VLLM), *FLAGS, "--engine", "vllm"])["rows"]  # same load, lengths
    assert (row["ttft_ms"], row["tpot_ms"]) == (same["ttft_ms"], same["tpot_ms"])


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d["input_config"]["input"]["prompt"]["input_tokens"].update(stddev=100),
         "input_config.input.prompt.input_tokens.stddev"),
        (lambda d: d["input_config"].update(loadgen={}), "input_config.loadgen.concurrency"),
        (lambda d: d.pop("total_osl"), "total_osl"),
        (lambda d: d["inter_token_latency"].update(unit="s"), "inter_token_latency"),
        (lambda d: d["input_config"]["loadgen"].update(concurrency=-3), "concurrency"),
    ],
)  # fmt: skip
def test_an_aiperf_export_the_model_cannot_read_is_an_input_error(capsys, tmp_path, change, field):
    doc = json.loads(AIPERF.read_text())
    change(doc)
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", "--measurements", str(path), *FLAGS, "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and field in err and "Traceback" not in err
