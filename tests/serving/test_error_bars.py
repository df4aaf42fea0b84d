"""Error bars from measured error (issue 30 item 4): the shipped table is what the shipped
measurements give, its intervals cover held-back rows at their stated rate, and
``estimate --concurrency`` carries them."""

from __future__ import annotations

import json
import zlib

import pytest

from plena_opt.cli.main import main
from plena_opt.serving.error_bars import MIN_ROWS, TABLE, band_of, load_table, lookup
from plena_opt.validate.error_bars import fit_error_table, table_document
from plena_opt.validate.serving_rows import SYSTEMS

GPU = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--devices", "1", "--input-seq", "1024", "--output-seq", "256"]  # fmt: skip


@pytest.fixture(scope="module")
def rows():
    from plena_opt.validate.serving_score import score_serving, shipped_serving_csv

    return [r for r in score_serving(shipped_serving_csv()).rows if r.status == "priced"]


def test_the_shipped_table_is_what_the_shipped_measurements_give(rows) -> None:
    """Same groups, row counts and levels; every bound to a relative 1e-12 (the table is exact on
    the machine that wrote it; another SIMD path of numpy's reductions moves the last bit)."""
    fresh = json.loads(json.dumps(table_document(fit_error_table(rows))))
    shipped = json.loads(TABLE.read_text())  # regenerate: python -m ...error_bars
    assert {k: v for k, v in shipped.items() if k != "groups"} == {
        k: v for k, v in fresh.items() if k != "groups"
    }
    assert [g["group"] for g in shipped["groups"]] == [g["group"] for g in fresh["groups"]]
    for want, got in zip(shipped["groups"], fresh["groups"], strict=True):
        assert want.keys() == got.keys(), want["group"]
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-12, abs=0.0), (want["group"], key)
            else:
                assert got[key] == value, (want["group"], key)


def _covered(table, r, metric: str) -> bool:
    gpu = SYSTEMS[r.system][0]
    band = lookup(table, r.backend, gpu, r.band)
    pred, meas = getattr(r, f"{metric}_ms"), getattr(r, f"measured_{metric}_ms")
    low, high = getattr(band, f"{metric}_low"), getattr(band, f"{metric}_high")
    return pred * low <= meas <= pred * high


@pytest.mark.parametrize("held", [0, 1])
def test_a_90_percent_interval_covers_held_back_rows(rows, held) -> None:
    """Fit on half the rows (split by a hash of the row id), score the other half: the issue's
    rule is a 90 % interval holding >= 85 % of held-back rows."""
    half = {i: [r for r in rows if zlib.crc32(r.id.encode()) % 2 == i] for i in (0, 1)}
    table = fit_error_table(half[1 - held])
    test = [r for r in half[held] if r.measured_ttft_ms and r.measured_tpot_ms]
    assert len(test) > 400
    for metric in ("ttft", "tpot"):
        share = sum(_covered(table, r, metric) for r in test) / len(test)
        assert share >= 0.85, (metric, share)


def test_the_closest_group_with_enough_rows_answers() -> None:
    table = load_table()
    assert all(b.rows >= MIN_ROWS for b in table.values())
    exact = lookup(table, "vllm", "h100-sxm", "9-32")
    assert exact is not None and exact.group == "vllm|h100-sxm|9-32"
    assert lookup(table, "vllm", "h100-sxm", "0").group == "vllm|h100-sxm|*"  # open loop
    assert lookup(table, "vllm", "b300", "9-32").group == "vllm|*|*"  # GPU never measured
    assert lookup(table, "other", "b300", "9-32").group == "*|*|*"
    assert band_of(1) == "1" and band_of(64) == "33-128" and band_of(500) == ">128"


def test_estimate_under_load_prints_and_carries_the_interval(capsys) -> None:
    assert main([*GPU, "--concurrency", "16", "--engine", "vllm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["serving_under_load"]
    bars = doc["error_bars"]
    band = lookup(load_table(), "vllm", "h100-sxm", "9-32")
    assert bars["group"] == band.group and bars["level"] == 0.9
    tpot = doc["replay"]["tpot_seconds"]["mean"]
    ttft = doc["benchmark_run"]["ttft_seconds"]
    assert bars["tpot_mean_seconds_low"] == pytest.approx(tpot * band.tpot_low)
    assert bars["tpot_mean_seconds_high"] == pytest.approx(tpot * band.tpot_high)
    assert bars["ttft_mean_seconds_low"] == pytest.approx(ttft * band.ttft_low)
    assert bars["ttft_mean_seconds_low"] < bars["ttft_mean_seconds_high"]
    assert main([*GPU, "--concurrency", "16", "--engine", "vllm"]) == 0
    assert "90 % interval from measured error (group vllm|h100-sxm|9-32" in capsys.readouterr().out
