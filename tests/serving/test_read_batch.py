"""SGLang's receive interval hands the scheduler the arrivals of N steps as one prefill batch
(``serving.read_batch``): each request's first token waits for the whole batch's prompts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.serving import EngineModel, ServingWorkload, StepModel, closed_loop
from plena_opt.serving.read_batch import read_batch_seconds
from tests.serving.test_serving import LinearCosts

SGLANG = EngineModel("t", 16384, None, None, mixed_prefill=False, overlap_schedule=True)
SLOPE = 2e-6  # LinearCosts' prefill seconds per prompt token


def _step(n: int, budget: int = 16384) -> StepModel:
    eng = replace(SGLANG, recv_interval_steps=n, budget_tokens=budget)
    return StepModel(LinearCosts(), eng, gpus=1)  # type: ignore[arg-type]


def test_one_read_a_step_or_one_client_adds_nothing():
    wl = ServingWorkload(64, 8192, 1024, 0.8)
    assert read_batch_seconds(_step(1), wl, 64, 0.9) == 0.0
    assert read_batch_seconds(_step(30), replace(wl, concurrency=1), 1, 0.9) == 0.0


def test_the_batch_carries_n_steps_of_arrivals_where_the_step_form_had_one():
    """Under the budget: prefill(isl + N·p) − prefill(isl + p) = (N − 1)·p tokens more."""
    wl = ServingWorkload(16, 1024, 1024, 0.8)
    phi = 0.9
    p = 15 * phi * 1024 / 1023  # prompt tokens arriving per step
    extra = read_batch_seconds(_step(10), wl, 16, phi)
    assert extra == pytest.approx(9 * p * SLOPE, rel=1e-9)


def test_a_batch_over_the_budget_runs_in_full_steps_up_to_the_requests_own_chunk():
    wl = ServingWorkload(64, 8192, 1024, 0.8)
    phi, budget = 0.9, 8192 + 64
    others = 63 * phi
    p, room = others * 8192 / 1023, budget - others
    base = LinearCosts().prefill_seconds(room)  # the step form: one full step (isl < room)
    want = (8192 + 30 * p / 2) / room * LinearCosts().prefill_seconds(room) - base
    assert read_batch_seconds(_step(30, budget), wl, 64, phi) == pytest.approx(want, rel=1e-9)


def test_closed_loop_ttft_gains_the_batch_and_tpot_does_not_move(monkeypatch):
    """Fails without the read batch in ``steady._admitted``."""
    import plena_opt.serving.steady as steady

    wl = ServingWorkload(64, 8192, 1024, 0.8)
    on = closed_loop(_step(30), wl)
    monkeypatch.setattr(steady, "read_batch_seconds", lambda *a: 0.0)
    waits_only = closed_loop(_step(30), wl)
    phi = 1 - on.ttft_seconds / on.e2e_seconds  # the decoding share of a cycle, about
    extra = read_batch_seconds(_step(30), wl, 64, phi)
    # 8k prompts, 30 steps of arrivals of 63 clients: the batch is over the 16k budget, ~7k
    # tokens of earlier arrivals run ahead of its own prompt
    assert extra > 0.01
    assert on.ttft_seconds - waits_only.ttft_seconds == pytest.approx(extra, rel=0.1)
    assert on.tpot_seconds == pytest.approx(waits_only.tpot_seconds, rel=0.02)


def test_deepseek_r1_sglang_8k_prompts_on_the_shipped_rows(tmp_path, monkeypatch):
    """The DeepSeek-R1 SGLang B200 8k/1k rows (InferenceX, receive interval 10 / 30) outside the
    MTP twins and the 2025-11 stall: TTFT 19.4 % / −10.9 % with the read batch, 23.0 % / −15.7 %
    without it (benchmarks/README_serving.md, r11sgl); since r13dsr1 the 15 of them the non-MTP
    config ran (TP 8 at 8k/1k ran only under MTP beyond 4 clients: refused), 10.4 % / −10.2 %
    against 14.1 % / −14.1 %."""
    import csv
    import sys
    from pathlib import Path

    import plena_opt.serving.steady as steady
    from plena_opt.validate.serving_score import score_serving, shipped_serving_csv

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from tpot_set_aside import set_aside

    with shipped_serving_csv().open(newline="") as fh:
        reader = csv.DictReader(fh)
        src, fields = list(reader), reader.fieldnames
    aside = set_aside({r["id"]: r for r in src})
    rows = [r for r in src if r["backend"] == "sglang" and "DeepSeek-R1" in r["model_path"]
            and (r["isl"], r["osl"]) == ("8192", "1024") and r["mode"] == "agg"
            and r["id"] not in aside and r["measured_on"] >= "2026"]  # fmt: skip
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)  # type: ignore[arg-type]
        w.writeheader()
        w.writerows(rows)

    def ttft() -> tuple[float, float]:
        got = [r for r in score_serving(path).rows if r.status == "priced"]
        errs = [r.ttft_ms / r.measured_ttft_ms - 1 for r in got]
        assert len(errs) >= 15
        return sum(map(abs, errs)) / len(errs), sum(errs) / len(errs)

    mape, bias = ttft()
    monkeypatch.setattr(steady, "read_batch_seconds", lambda *a: 0.0)
    old_mape, old_bias = ttft()
    assert mape < old_mape - 0.02 and bias > old_bias + 0.03
