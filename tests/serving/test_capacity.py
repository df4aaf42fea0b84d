"""Capacity over a load curve (issue 30 item 2): fleet arithmetic by hand, the load file's
validation, replicas against load, the fixed fleet against scaling, the SLA tail against the
replay, and the ``plena-opt capacity`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plena_opt.api.capacity import CapacityRequest, plan_capacity
from plena_opt.bounds import MAX_LOAD_ROWS
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.serving.fleet import fleet_costs, replicas_needed
from plena_opt.serving.load_curve import example_curve_path, load_curve, parse_load_curve

HEADER = "start_hour,requests_per_second,input_tokens,output_tokens"


def _curve(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    p = tmp_path / "load.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


# -- fleet arithmetic, by hand -------------------------------------------------------------------


def test_replicas_needed_by_hand() -> None:
    # ceil(10/4) = 3, ceil(8/4) = 2 exactly (no rounding up of an exact fit), 0 load -> minimum
    assert replicas_needed([10, 8, 0], [4, 4, 4], 1) == [3, 2, 1]
    assert replicas_needed([0, 1], [4, 4], 0) == [0, 1]
    with pytest.raises(PlenaInputError, match="no replica meets the SLA"):
        replicas_needed([1], [0.0], 1)


def test_two_interval_day_by_hand() -> None:
    # 00-12 h: 10 req/s, 12-24 h: 30 req/s; a replica (2 GPUs at $2/GPU-h) serves 10 req/s.
    args = dict(period=24.0, gpus=2, usd_per_gpu_hour=2.0)
    r = replicas_needed([10, 30], [10, 10], 1)
    assert r == [1, 3]
    now = fleet_costs([0, 12], [10, 30], [10, 10], r, delay_hours=0.0, **args)
    # planned = (1 x 12 + 3 x 12) replica-h x 2 GPUs = 96 GPU-h, x $2 = $192; fixed 3 x 24 x 2
    assert now["planned"].gpu_hours_per_day == pytest.approx(96)
    assert now["planned"].usd_per_day == pytest.approx(192)
    assert now["fixed"].gpu_hours_per_day == pytest.approx(144)
    assert now["fixed"].usd_per_day == pytest.approx(288)
    assert now["reactive"].slo_attainment == pytest.approx(1.0)
    late = fleet_costs([0, 12], [10, 30], [10, 10], r, delay_hours=1.0, **args)
    # the hour before the rise already holds 3 replicas: (11 x 1 + 1 x 3 + 12 x 3) x 2 = 100
    assert late["planned"].gpu_hours_per_day == pytest.approx(100)
    assert late["planned"].usd_per_day == pytest.approx(200)
    assert late["planned"].slo_attainment == 1.0
    # reactive: pays 96 GPU-h but 12-13 h runs on 1 replica: 30 of 480 requests miss
    assert late["reactive"].gpu_hours_per_day == pytest.approx(96)
    assert late["reactive"].slo_attainment == pytest.approx(450 / 480)


def test_a_week_is_divided_into_days() -> None:
    starts, rates = [0.0, 24.0], [10.0, 0.0]  # day one busy, six quiet days
    out = fleet_costs(
        starts, rates, [10, 10], [1, 0], period=168.0, gpus=1, usd_per_gpu_hour=1.0,
        delay_hours=0.0,
    )  # fmt: skip
    assert out["planned"].gpu_hours_per_day == pytest.approx(24 / 7)
    assert out["fixed"].gpu_hours_per_day == pytest.approx(24)


# -- the load file --------------------------------------------------------------------------------


def test_example_curve_is_a_day_of_24_hours() -> None:
    curve = load_curve(example_curve_path())
    assert len(curve.intervals) == 24 and curve.period_hours == 24 and curve.days == 1
    assert sum(iv.hours for iv in curve.intervals) == 24
    rates = [iv.rate_per_s for iv in curve.intervals]
    assert max(rates) / min(rates) == pytest.approx(4, rel=0.01)
    assert curve.intervals[0].input_tokens_p90 == 2048


def test_week_curve_and_durations() -> None:
    curve = parse_load_curve(f"{HEADER}\n0,1,100,10\n30,2,100,10\n100,3,100,10\n")
    assert curve.period_hours == 168
    assert [iv.hours for iv in curve.intervals] == [30, 70, 68]


@pytest.mark.parametrize(
    ("header", "rows", "field", "words"),
    [
        ("start_hour,requests_per_second,input_tokens", ["0,1,100"], "load.output_tokens",
         "missing column"),
        (HEADER, ["0,1,100,10", "1,-2,100,10"], "load.row 2.requests_per_second", "[0,"),
        (HEADER, ["0,1,100,10", "2,1,100,10", "1,1,100,10"], "load.row 3.start_hour",
         "rise strictly"),
        (HEADER, ["1,1,100,10"], "load.row 1.start_hour", "start at hour 0"),
        (HEADER, ["0,1,100,abc"], "load.row 1.output_tokens", "must be a number"),
        (HEADER, ["0,1,100,10", "200,1,100,10"], "load.row 2.start_hour", "[0, 168]"),
        (HEADER + ",colour", ["0,1,100,10,red"], "load.colour", "unknown column"),
        (HEADER + ",input_tokens_p90", ["0,1,100,10,50"], "load.row 1.input_tokens_p90",
         "[100,"),
        (HEADER, ["0,1,100"], "load.row 1.start_hour", "columns"),
    ],
)  # fmt: skip
def test_bad_load_files_name_row_and_column(
    tmp_path: Path, header: str, rows: list[str], field: str, words: str
) -> None:
    with pytest.raises(PlenaInputError) as err:
        load_curve(_curve(tmp_path, rows, header))
    assert err.value.field == field
    assert words in err.value.rule


def test_too_many_rows(tmp_path: Path) -> None:
    rows = [f"{i * 0.05:.2f},1,100,10" for i in range(MAX_LOAD_ROWS + 1)]
    with pytest.raises(PlenaInputError) as err:
        load_curve(_curve(tmp_path, rows))
    assert err.value.field == f"load.row {MAX_LOAD_ROWS + 1}.start_hour"
    assert "too many rows" in err.value.rule


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_bad_file_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _curve(tmp_path, ["0,1,100,10", "1,-2,100,10"])
    code, _, err = _cli(["capacity", "--model", "llama-3.1-8b", "--load", str(path),
                         "--gpus", "b200", "--max-tpot-ms", "50"], capsys)  # fmt: skip
    assert code == 2
    assert err.startswith("error: ") and "row 2" in err and "requests_per_second" in err
    assert "Traceback" not in err


# -- the model against load -----------------------------------------------------------------------


def _plan(path: Path, **kw: object) -> object:
    base = dict(model="llama-3.1-70b", load=path, gpus=("b200",), max_ttft_ms=2000.0,
                max_tpot_ms=50.0, percentile="p90", scale_up_delay_min=0.0)  # fmt: skip
    base.update(kw)
    return plan_capacity(CapacityRequest(**base))  # type: ignore[arg-type]


def test_replicas_rise_with_load_and_fixed_fleet_costs_more(tmp_path: Path) -> None:
    rates = [2, 5, 10, 20, 40, 80, 60, 30]
    rows = [f"{3 * i},{r},1024,256" for i, r in enumerate(rates)]
    plan = _plan(_curve(tmp_path, rows))
    priced = [c for c in plan.candidates if c.priced]
    assert priced and plan.chosen is not None
    for c in priced:
        by_rate = [r for _, r in sorted(zip(rates, c.replicas, strict=True))]
        assert by_rate == sorted(by_rate)  # monotone in load
        assert c.replicas[rates.index(80)] > c.replicas[rates.index(2)]
        assert c.fixed_fleet_usd_per_day >= c.usd_per_day
        # delay 0: GPU-hours are replicas x hours x TP; dollars are GPU-hours x the price
        assert c.gpu_hours_per_day == pytest.approx(3 * c.tp * sum(c.replicas))
        assert c.usd_per_day == pytest.approx(c.gpu_hours_per_day * c.usd_per_gpu_hour)
    assert plan.chosen.usd_per_day == min(c.usd_per_day for c in priced)


def test_scale_up_delay_costs_more_and_min_replicas_floor(tmp_path: Path) -> None:
    rows = ["0,2,1024,256", "12,60,1024,256"]
    path = _curve(tmp_path, rows)
    now, late = _plan(path), _plan(path, scale_up_delay_min=60.0)
    a, b = now.chosen, late.chosen
    assert b.name == a.name or b.usd_per_day >= a.usd_per_day
    same = next(c for c in late.candidates if c.name == a.name)
    assert same.usd_per_day > a.usd_per_day
    assert same.reactive_slo_attainment < 1.0 == same.slo_attainment
    floor = _plan(path, min_replicas=5)
    assert all(r >= 5 for c in floor.candidates if c.priced for r in c.replicas)


def test_candidates_say_why_they_were_skipped(tmp_path: Path) -> None:
    plan = _plan(_curve(tmp_path, ["0,1,1024,256"]), gpus=("h100-sxm", "b300"))
    by_name = {c.name: c for c in plan.candidates}
    assert "leave no KV cache" in by_name["h100-sxm tp1"].skipped  # 140 GB of weights
    assert "no price for chip 'b300'" in by_name["b300 tp8"].skipped
    assert by_name["h100-sxm tp8"].priced


def test_sla_infeasible_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _curve(tmp_path, ["0,1,1024,256"])
    code, out, err = _cli(["capacity", "--model", "llama-3.1-70b", "--load", str(path),
                           "--gpus", "b200", "--max-tpot-ms", "1"], capsys)  # fmt: skip
    assert code == 2
    assert "error: sla: no candidate deployment meets the SLA in every interval" in err
    assert "infeasible: misses the SLA even at a trickle" in out


def test_json_document(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _curve(tmp_path, ["0,5,1024,256", "8,30,1024,256", "16,10,1024,256"])
    code, out, _ = _cli(["capacity", "--model", "llama-3.1-70b", "--load", str(path),
                         "--gpus", "b200", "--max-ttft-ms", "2000", "--max-tpot-ms", "50",
                         "--json"], capsys)  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    for key in ("intervals", "gpu_hours_per_day", "usd_per_day", "slo_attainment",
                "fixed_fleet_usd_per_day", "candidates"):  # fmt: skip
        assert key in doc
    first = doc["intervals"][0]
    assert first["deployment"] == doc["deployment"]
    gpu, tp = doc["deployment"].split(" tp")
    assert first["gpus"] == {gpu: first["replicas"] * int(tp)}
    assert doc["fixed_fleet_usd_per_day"] >= doc["usd_per_day"]


def test_p90_tail_against_the_replay() -> None:
    """The closed-form p90 stays in the bands sla_rate's docstring states against the replay."""
    from deepstack import load_noc_profile
    from deepstack.gpu_nodes import first_devices

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Plan, Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model
    from plena_opt.serving import OpenLoopWorkload, StepModel, engine_model, replay_open_loop
    from plena_opt.serving.sla_rate import tail_figures

    chip = load_chip("h100-sxm")
    noc = first_devices(load_noc_profile("hgx-h100x8"), 8)
    wl = Workload(batch_size=1, input_seq_len=1024, output_seq_len=256, precision="bf16")
    eng = engine_model("vllm", float(chip.hbm.capacity_bytes.value))
    step = StepModel.from_problem(
        load_model("llama-3.1-70b"), noc, gpu_memory(chip), chip, wl, Plan(tp=8), eng
    )
    for rate in (2.0, 4.0, 6.0):
        load = OpenLoopWorkload(rate, 1024, 256)
        fig, rep = tail_figures(step, load, "p90"), replay_open_loop(step, load)
        assert 0.70 <= fig.ttft_seconds / rep.ttft_p90_seconds <= 1.05
        assert 0.98 <= fig.tpot_seconds / rep.tpot_p90_seconds <= 1.25


def test_mixed_is_never_dearer_than_one_deployment_and_serves_each_interval(
    tmp_path: Path,
) -> None:
    rows = [f"{2 * i},{r},1024,256" for i, r in enumerate([3, 9, 17, 26, 41, 33, 12, 5])]
    plan = _plan(_curve(tmp_path, rows), gpus=("h200-sxm", "b200"), mixed=True)
    mix, singles = plan.mix, [c for c in plan.candidates if c.priced]
    assert mix is not None and mix.priced and "exact" in mix.method
    assert mix.usd_per_day <= min(c.usd_per_day for c in singles) + 1e-9  # delay 0
    by_name = {c.name: c for c in singles}
    for i, iv in enumerate(plan.intervals):
        counts = mix.replicas_at(i)
        served = sum(n * by_name[k].max_rate_per_replica[i] for k, n in counts.items())
        assert served >= iv["requests_per_second"]
        gpus = mix.gpus_at(i)
        assert sum(gpus.values()) == sum(n * by_name[k].tp for k, n in counts.items())
    assert plan.chosen is mix or plan.chosen.usd_per_day <= mix.usd_per_day
    doc = plan.to_dict()
    assert doc["mixed"]["usd_per_day"] == mix.usd_per_day


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--gpus", "a100", "--max-tpot-ms", "50"], "gpus: no one-node profile for GPU 'a100'"),
        (["--gpus", "b200"], "sla: give --max-ttft-ms, --max-tpot-ms or both"),
        (["--gpus", "b200", "--max-tpot-ms", "50", "--precision", "fp5"], "--precision"),
        (["--gpus", "b200", "--max-tpot-ms", "nan"], "max_tpot_ms"),
        (["--gpus", "b200", "--max-tpot-ms", "50", "--min-replicas", "-1"], "min_replicas"),
        (["--gpus", "b200", "--max-tpot-ms", "50", "--scale-up-delay-min", "1000"],
         "scale_up_delay_min"),
    ],
)  # fmt: skip
def test_bad_flags_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    path = _curve(tmp_path, ["0,1,1024,256"])
    code, _, err = _cli(["capacity", "--model", "llama-3.1-70b", "--load", str(path), *extra],
                        capsys)  # fmt: skip
    assert code == 2 and err.startswith("error: ") and words in err


def test_a_higher_percentile_serves_fewer_requests_per_replica(tmp_path: Path) -> None:
    path = _curve(tmp_path, ["0,10,1024,256"])
    rates = [
        next(
            c for c in _plan(path, percentile=p).candidates if c.name == "b200 tp2"
        ).max_rate_per_replica[0]
        for p in ("p50", "p90", "p99")
    ]
    assert rates[0] > rates[1] > rates[2] > 0


def test_length_profiles_are_bounded_and_a_bom_is_read(tmp_path: Path) -> None:
    from plena_opt.bounds import MAX_LOAD_LENGTH_PROFILES

    rows = [f"{i * 0.25:g},1,{100 + i},10" for i in range(MAX_LOAD_LENGTH_PROFILES + 1)]
    with pytest.raises(PlenaInputError) as err:
        load_curve(_curve(tmp_path, rows))
    assert err.value.field == f"load.row {MAX_LOAD_LENGTH_PROFILES + 1}.input_tokens"
    assert "distinct length profiles" in err.value.rule
    same = [f"{i * 0.25:g},1,100.2,10" for i in range(MAX_LOAD_LENGTH_PROFILES + 1)]
    assert len(load_curve(_curve(tmp_path, same)).intervals) == MAX_LOAD_LENGTH_PROFILES + 1
    bom = tmp_path / "bom.csv"
    bom.write_text("\ufeff" + HEADER + "\n0,1,100,10\n")
    assert load_curve(bom).intervals[0].rate_per_s == 1


def test_window_max_and_min_wrap_around_the_period() -> None:
    """``_Steps.over`` against sampling the step function at every start inside the window."""
    import math
    import random

    from plena_opt.serving.fleet import _Steps

    rng = random.Random(7)
    for _ in range(200):
        period = rng.choice([24, 168])
        starts = sorted({0, *rng.sample(range(1, period), rng.randint(0, 10))})
        steps = _Steps([float(s) for s in starts], [rng.randint(0, 9) for _ in starts], period)
        a = rng.uniform(-48, 200)
        b = a + rng.choice([0.0, 0.5, 1.0, 5.5, 23.9])
        points = [a, *range(math.floor(a) + 1, math.floor(b) + 1)]
        for pick in (max, min):
            assert steps.over(a, b, pick) == pick(steps.at(t) for t in points)
