"""``plena-opt calibrate`` and ``--calibration``: fit on a user's rows, hold out whole deployments,
write a typed overlay, apply it only to the (engine, chip) it names."""

from __future__ import annotations

import csv
import json

import pytest

from plena_opt.cli.main import main
from plena_opt.serving.calibration import (
    MAX_OVERLAY_BYTES,
    CalibrationOverlay,
    applied,
    calibrated,
    load_overlay,
)
from plena_opt.validate.calibrate_serving import NOT_DEPLOYMENT, calibrate, csv_measurements, split
from plena_opt.validate.serving_score import score_serving, shipped_serving_csv
from tests.calibration_support import one_constant_overlay

SHIFT_S = 0.002  # the known host time per step the synthetic vLLM rows were priced with
TOLERANCE_S = 2e-5  # recovered within 0.02 ms (1 % of the shift)
PICK = {  # (system, engine, model): shift priced into the synthetic measurements
    ("h100_sxm", "vllm", "meta-llama/Llama-3.1-70B"): SHIFT_S,
    ("h100_sxm", "sglang", "Qwen/Qwen3-32B"): 0.0,
}


def _group(row: dict) -> str:
    return "|".join(v for k, v in sorted(row.items()) if k not in NOT_DEPLOYMENT)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> str:
    """4 deployments × 3 concurrencies of each PICK key, measured = the model's own prediction
    with the key's host shift (vLLM on H100: 2 ms per step; SGLang on H100: none)."""
    with open(shipped_serving_csv(), newline="") as fh:
        rows = list(csv.DictReader(fh))
    fields = list(rows[0])
    chosen = []
    for key in PICK:
        groups: dict[str, list[dict]] = {}
        for r in rows:
            if (r["system"], r["backend"], r["model_path"]) == key and r["mode"] == "agg":
                groups.setdefault(_group(r), []).append(r)
        chosen += [r for g in list(groups.values())[:4] for r in g[:3]]
    path = tmp_path_factory.mktemp("cal") / "mine.csv"

    def write() -> None:
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fields)
            w.writeheader()
            w.writerows(chosen)

    write()
    rep = score_serving(path, {e: s for (_, e, _), s in PICK.items()})
    assert all(r.status == "priced" for r in rep.rows)
    for r, row in zip(rep.rows, chosen, strict=True):
        row["ttft_ms"], row["tpot_ms"] = r.ttft_ms, r.tpot_ms
    write()
    return str(path)


@pytest.fixture(scope="module")
def overlay(synthetic) -> CalibrationOverlay:
    from pathlib import Path

    return calibrate(csv_measurements(Path(synthetic)), fraction=0.25, seed=3)


def test_calibrate_recovers_a_known_host_shift_and_the_holdout_improves(overlay):
    by = {(c.engine, c.chip): c for c in overlay.constants}
    assert set(by) == {("vllm", "h100-sxm"), ("sglang", "h100-sxm")}
    vllm, sglang = by["vllm", "h100-sxm"], by["sglang", "h100-sxm"]
    assert vllm.default == 0.0 and abs(vllm.value - SHIFT_S) <= TOLERANCE_S
    assert sglang.value <= TOLERANCE_S  # no shift priced in: none fitted
    h = overlay.holdout
    assert h.by == "deployment" and h.groups == 2 and h.rows == 6  # 2 of 8 deployments, 3 rows
    assert (
        vllm.fitted_on_rows + vllm.holdout_rows + sglang.fitted_on_rows + sglang.holdout_rows == 24
    )
    assert vllm.holdout_rows >= 3  # seed 3 holds out a vLLM deployment
    assert vllm.holdout_tpot_mape_before > 5 > 0.5 > vllm.holdout_tpot_mape_after
    assert h.tpot_mape_before > h.tpot_mape_after and h.tpot_mape_after < 0.5


def test_the_split_is_seeded_and_keeps_each_deployment_whole():
    groups = [f"d{i // 3}" for i in range(30)]  # 10 deployments of 3 rows
    a, b = split(groups, 0.3, 7), split(groups, 0.3, 7)
    assert a == b and len(a) == 3 and a <= set(groups)
    assert any(split(groups, 0.3, s) != a for s in range(1, 6))
    with pytest.raises(ValueError, match="at least 2"):
        split(["one"] * 5, 0.3, 0)


def test_overlay_round_trip(overlay, tmp_path):
    p = tmp_path / "o.json"
    p.write_text(overlay.to_json())
    assert load_overlay(p) == overlay


def _bad(tmp_path, overlay, mutate) -> str:
    doc = json.loads(overlay.to_json())
    mutate(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    return str(p)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(extra=1), "calibration.extra"),
        (lambda d: d["constants"][0].update(scale=2), "calibration.constants.0.scale"),
        (lambda d: d["constants"][0].update(value=2.0), "calibration.constants.0.value"),
        (lambda d: d["constants"][0].update(value=-1e-3), "calibration.constants.0.value"),
        (lambda d: d["constants"][0].update(engine="tgi"), "calibration.constants.0.engine"),
        (lambda d: d["constants"][0].update(name="ttft_scale"), "calibration.constants.0.name"),
        (lambda d: d["constants"][0].update(chip="h100"), "calibration.constants.0.chip"),
        (lambda d: d.update(version=2), "calibration.version"),
        (lambda d: d["constants"].append(d["constants"][0]), "calibration.constants.2"),
        # mistyped, not coerced (r18qa): a quoted number, a boolean count, a non-finite figure
        (lambda d: d["constants"][0].update(value="0.001"), "calibration.constants.0.value"),
        (lambda d: d["constants"][0].update(value=True), "calibration.constants.0.value"),
        (
            lambda d: d["constants"][0].update(fitted_on_rows=True),
            "calibration.constants.0.fitted_on_rows",
        ),
        (
            lambda d: d["holdout"].update(ttft_mape_before=float("inf")),
            "calibration.holdout.ttft_mape_before",
        ),
        (lambda d: d["holdout"].update(seed="0"), "calibration.holdout.seed"),
    ],
)
def test_bad_overlays_are_refused_naming_the_field(overlay, tmp_path, mutate, field):
    with pytest.raises(ValueError) as exc:
        load_overlay(_bad(tmp_path, overlay, mutate))
    assert exc.value.field == field  # type: ignore[attr-defined]


def test_unreadable_or_huge_overlays_are_refused(tmp_path):
    p = tmp_path / "o.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_overlay(p)
    p.write_text(" " * (MAX_OVERLAY_BYTES + 1))
    with pytest.raises(ValueError, match="larger than"):
        load_overlay(p)


ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--tp", "8", "--concurrency", "4", "--input-seq", "256", "--output-seq", "32",
            "--json"]  # fmt: skip


def _estimate(capsys, *extra: str) -> dict:
    assert main([*ESTIMATE, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_calibration_changes_the_estimate_only_where_it_should(overlay, tmp_path, capsys):
    p = tmp_path / "o.json"
    p.write_text(overlay.to_json())
    base = _estimate(capsys, "--engine", "vllm")
    cal = _estimate(capsys, "--engine", "vllm", "--calibration", str(p))
    ul0, ul1 = base["serving_under_load"], cal["serving_under_load"]
    fitted = overlay.host_step_seconds("vllm", "h100-sxm")
    assert ul1["engine"]["host_step_seconds"] == pytest.approx(fitted)
    assert ul0["engine"]["host_step_seconds"] == 0.0
    tpot0, tpot1 = ul0["replay"]["tpot_seconds"]["mean"], ul1["replay"]["tpot_seconds"]["mean"]
    assert tpot1 > tpot0 + 0.9 * SHIFT_S
    assert ul1["steady_state"]["tpot_seconds"] > ul0["steady_state"]["tpot_seconds"] + 0.9 * SHIFT_S
    static = {k: v for k, v in base.items() if k != "serving_under_load"}
    assert static == {k: v for k, v in cal.items() if k != "serving_under_load"}  # exact
    # an engine the overlay fits ~0 for, or a chip it does not name: the same numbers
    other = overlay.model_copy(update={"constants": [
        c.model_copy(update={"chip": "b200"}) for c in overlay.constants]})  # fmt: skip
    p.write_text(other.to_json())
    assert _estimate(capsys, "--engine", "vllm", "--calibration", str(p)) == base


def test_no_overlay_leaves_the_engine_untouched(overlay):
    from plena_opt.serving import engine_model

    eng = engine_model("vllm", 80e9)
    assert calibrated(eng, "h100-sxm") is eng
    with applied(overlay):
        fitted = overlay.host_step_seconds("vllm", "h100-sxm")
        assert calibrated(eng, "h100-sxm").host_step_seconds == fitted > 0
        assert calibrated(eng, "b200") is eng
    assert calibrated(eng, "h100-sxm") is eng


def test_cli_calibrate_writes_the_overlay_and_prints_json(synthetic, tmp_path, capsys):
    out = tmp_path / "cal.json"
    args = ["calibrate", "--measurements", synthetic, "--out", str(out), "--seed", "3"]
    assert main([*args, "--json"]) == 0
    printed = CalibrationOverlay.model_validate(json.loads(capsys.readouterr().out))
    assert load_overlay(out) == printed and printed.holdout.seed == 3
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "host_step_seconds  vllm" in text and "hold-out TTFT MAPE" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["calibrate", "--measurements", "{csv}", "--holdout", "0.9"], "holdout"),
        (["calibrate", "--measurements", "{tmp}/none.csv"], "measurements"),
        ([*ESTIMATE, "--engine", "vllm", "--calibration", "{tmp}/none.json"], "calibration"),
        ([*ESTIMATE, "--calibration", "{csv}", "--server", "localhost"], "calibration"),
    ],
)
def test_cli_errors_name_the_flag(synthetic, tmp_path, capsys, argv, needle):
    argv = [a.format(csv=synthetic, tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and "Traceback" not in err


def test_validate_prices_the_rows_with_the_overlay(synthetic, overlay, tmp_path, capsys):
    p = tmp_path / "o.json"
    p.write_text(overlay.to_json())
    by = {}
    for extra in ([], ["--calibration", str(p)]):
        assert main(["validate", "--json", "--measurements", synthetic, *extra]) == 0
        by[bool(extra)] = json.loads(capsys.readouterr().out)["summary"]["by_backend"]["vllm"]
    assert by[False]["tpot_mape"] > 5 > 0.1 > by[True]["tpot_mape"]


def test_a_benchmark_result_file_is_split_by_run(capsys):
    from pathlib import Path

    data = Path(__file__).parents[1] / "data" / "bench"
    argv = ["calibrate", "--json", "--measurements", str(data / "sglang_bench_serving.jsonl"),
            "--deployment", "tp1-ep1-dp1-pp1-cp1-replace-none-b32", "--model", "llama-3.1-8b",
            "--gpu", "h100_sxm", "--engine", "sglang", "--holdout", "0.5"]  # fmt: skip
    assert main(argv) == 0
    ov = CalibrationOverlay.model_validate(json.loads(capsys.readouterr().out))
    assert (ov.holdout.by, ov.holdout.groups, ov.holdout.rows) == ("run", 1, 1)
    (c,) = ov.constants
    assert (c.engine, c.chip, c.fitted_on_rows, c.holdout_rows) == ("sglang", "h100-sxm", 1, 1)


def _only(engine: str, chip: str, value: float) -> CalibrationOverlay:
    """A one-constant overlay (hand-made: what applies, not how it was fitted)."""
    return CalibrationOverlay.model_validate(one_constant_overlay(engine, chip, value))


def test_search_under_load_prices_with_the_overlay():
    from plena_opt import api
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.estimate.plan import Plan
    from plena_opt.search import SearchRequest

    req = SearchRequest(concurrency=16, range_ratio=0.8)
    inputs = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                              input_seq=1024, output_seq=256)  # fmt: skip

    def tpot(overlay: CalibrationOverlay | None) -> tuple[float, float]:
        with applied(overlay):
            m = loaded_factory(inputs.evaluator, inputs, req)(16).evaluate(Plan(tp=8))
        return m.under_load["tpot_mean_seconds"], m.static_figures["static_tps"]

    base, shifted = tpot(None), tpot(_only("vllm", "h100-sxm", SHIFT_S))
    assert shifted[0] == pytest.approx(base[0] + SHIFT_S, rel=0.05)
    assert shifted[1] == base[1]  # the static figures are not the overlay's
    assert tpot(_only("sglang", "h100-sxm", SHIFT_S)) == base  # another engine's constant


def test_capacity_prices_with_the_overlay(tmp_path):
    from plena_opt.api.capacity import CapacityRequest, plan_capacity

    load = tmp_path / "load.csv"
    load.write_text("start_hour,requests_per_second,input_tokens,output_tokens\n0,20,1024,256\n")

    def replicas(overlay: CalibrationOverlay | None) -> list[int]:
        req = CapacityRequest(model="llama-3.1-8b", load=load, gpus=("h100-sxm",),  # type: ignore[arg-type]
                              max_ttft_ms=2000.0, max_tpot_ms=60.0, percentile="p90",
                              scale_up_delay_min=0.0)  # fmt: skip
        with applied(overlay):
            plan = plan_capacity(req)
        return [r for c in plan.candidates if c.priced for r in c.replicas]

    base = replicas(None)
    assert base and replicas(_only("vllm", "b200", 0.03)) == base  # a chip it does not name
    slow = replicas(_only("vllm", "h100-sxm", 0.03))  # 30 ms host per step: fewer per replica
    assert sum(slow) > sum(base) or len(slow) < len(base)


def test_calibrate_refuses_to_fit_under_an_overlay(synthetic, overlay):
    from pathlib import Path

    with applied(overlay), pytest.raises(ValueError, match="no overlay"):
        calibrate(csv_measurements(Path(synthetic)))


def test_the_step_shift_is_the_signed_mape_minimiser():
    from plena_opt.validate.calibrate_serving import _signed_shift

    assert _signed_shift([]) == 0.0  # every row refused at that value: no move
    # measured 10, 10, 40 ms; predicted 12, 12, 30: weights 1/m favour the two 10 ms rows
    assert _signed_shift([(12.0, 10.0), (12.0, 10.0), (30.0, 40.0)]) == -2.0
