"""Training schedules: closed-form makespans (pipeline-simulator §1.3, §7.1) and bad input."""

from __future__ import annotations

import pytest

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.simulator import build_schedule, simulate
from plena_opt.simulator.engine import parse_noise
from plena_opt.simulator.scheduler import SCHEDULE_OP_TYPES, SCHEDULES

# Exact binary fractions except v = 3; 1e-9 relative covers float summation of thirds.
REL = 1e-9


@pytest.mark.parametrize(
    ("name", "p", "m", "expected"),
    [
        ("gpipe", 4, 8, 33),
        ("gpipe", 4, 4, 21),
        ("gpipe", 8, 16, 69),
        ("gpipe", 2, 5, 18),
        ("1f1b", 4, 8, 33),
        ("1f1b", 4, 4, 21),
        ("1f1b", 8, 16, 69),
        ("1f1b", 2, 5, 18),
    ],
)
def test_gpipe_1f1b_golden_makespans(name: str, p: int, m: int, expected: float) -> None:
    res = simulate(build_schedule(name, p, m), {"F": 1.0, "B": 2.0})
    assert res.makespan == pytest.approx(expected, rel=REL)
    assert res.makespan == pytest.approx((m + p - 1) * 3.0, rel=REL)
    # ideal-relative bubble ratio (p−1)/m and share of makespan (p−1)/(m+p−1), spec §1.3
    assert res.deterministic.bubble_ratio == pytest.approx((p - 1) / m, rel=REL)
    assert res.deterministic.bubble_share == pytest.approx((p - 1) / (m + p - 1), rel=REL)


@pytest.mark.parametrize(
    ("p", "m", "v", "expected"),
    [(4, 8, 2, 28.5), (4, 4, 2, 16.5), (4, 16, 2, 52.5), (2, 4, 3, 13.0), (8, 16, 2, 58.5)],
)
def test_interleaved_golden_makespans(p: int, m: int, v: int, expected: float) -> None:
    # per-chunk op durations are F/v and B/v of a rank's whole-model F = 1, B = 2
    res = simulate(build_schedule("interleaved-1f1b", p, m, v), {"F": 1 / v, "B": 2 / v})
    assert res.makespan == pytest.approx(expected, rel=REL)
    assert res.makespan == pytest.approx(m * 3 + (p - 1) * 3 / v, rel=REL)
    assert res.deterministic.bubble_ratio == pytest.approx((p - 1) / (v * m), rel=REL)


@pytest.mark.parametrize(("p", "m", "expected"), [(4, 8, 27), (4, 12, 39), (8, 16, 55), (2, 3, 10)])
def test_zb_h1_golden_makespans(p: int, m: int, expected: float) -> None:
    res = simulate(build_schedule("zb-h1", p, m), {"F": 1.0, "I": 1.0, "W": 1.0})
    assert res.makespan == pytest.approx(expected, rel=REL)
    assert res.makespan == 3 * m + p - 1
    assert res.deterministic.bubble_ratio == pytest.approx((p - 1) / (3 * m), rel=REL)


def test_one_f_one_b_order_matches_megatron_warmup() -> None:
    plan = build_schedule("1f1b", 4, 8)
    labels = [[plan.ops[i].label for i in r] for r in plan.ranks]
    assert labels[0][:4] == ["F0-C0", "F1-C0", "F2-C0", "F3-C0"]  # warm-up p−1−r = 3, then F3
    assert labels[0][4] == "B0-C0"
    assert labels[3][:3] == ["F0-C0", "B0-C0", "F1-C0"]  # last rank: no warm-up


def test_every_schedule_uses_its_declared_op_types() -> None:
    for name in SCHEDULES:
        vpp = 2 if name in ("interleaved-1f1b", "bigmac-vpp") else 1
        plan = build_schedule(name, 4, 8, vpp)
        assert set(plan.op_types()) == set(SCHEDULE_OP_TYPES[name])
        for ranks in plan.ranks:
            assert len(ranks) == len(set(ranks))
        assert sorted(i for r in plan.ranks for i in r) == list(range(plan.n_ops))


def test_unknown_schedule_names_the_field() -> None:
    with pytest.raises(PlenaNotFoundError) as exc:
        build_schedule("dualpipe", 4, 8)
    assert exc.value.field == "schedule" and "1f1b" in str(exc.value)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("interleaved-1f1b", 4, 2, 2), "microbatches"),  # fewer micro-batches than pp
        (("interleaved-1f1b", 4, 6, 2), "microbatches"),  # not a multiple of pp
        (("bigmac-vpp", 4, 3, 2), "microbatches"),
        (("1f1b", 4, 8, 2), "vpp"),  # vpp on a one-chunk schedule
        (("gpipe", 0, 8, 1), "pp"),
        (("gpipe", 4, 0, 1), "microbatches"),
        (("interleaved-1f1b", 4, 8, 0), "vpp"),
    ],
)
def test_impossible_shapes(args: tuple, field: str) -> None:
    name, p, m, v = args
    with pytest.raises(PlenaInputError) as exc:
        build_schedule(name, p, m, v)
    assert exc.value.field == field


def test_bad_durations_name_the_field() -> None:
    plan = build_schedule("1f1b", 2, 2)
    with pytest.raises(PlenaInputError) as exc:
        simulate(plan, {"F": -1.0, "B": 2.0})
    assert exc.value.field == "durations.F"
    with pytest.raises(PlenaInputError) as exc:
        simulate(plan, {"F": 1.0})
    assert exc.value.field == "durations.B"
    with pytest.raises(PlenaInputError) as exc:
        simulate(plan, {"F": 1.0, "B": float("nan")})
    assert exc.value.field == "durations.B"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"jitter_sigma": -0.1}, "noise.jitter_sigma"),
        ({"version": 2}, "noise.version"),
        ({"bogus": 1}, "noise.bogus"),
        ({"straggler": {"probability": 1.5}}, "noise.straggler.probability"),
        ({"straggler": {"factor_low": 2.0, "factor_high": 1.5}}, "noise.straggler"),
        ({"moe": {"experts": 8, "tokens": 16, "ep": 3}}, "noise.moe"),
        ("sigma", "noise"),
        ("rank=abc", "noise.rank_sigma"),
    ],
)
def test_bad_noise_spec_names_the_field(spec: object, field: str) -> None:
    with pytest.raises(PlenaInputError) as exc:
        parse_noise(spec)
    assert exc.value.field == field


def test_noise_text_aliases() -> None:
    spec = parse_noise("sigma=0.05,rank=0.03,straggler_p=0.01,moe_experts=8,moe_tokens=64")
    assert spec.jitter_sigma == 0.05 and spec.rank_sigma == 0.03
    assert spec.straggler.probability == 0.01 and spec.moe.experts == 8


@pytest.mark.parametrize(
    ("p", "m", "v", "expected"),
    [(4, 8, 2, 28.5), (4, 4, 2, 16.5), (4, 16, 2, 52.5), (2, 4, 3, 13.0), (8, 16, 2, 58.5)],
)
def test_per_stage_durations_give_the_interleaved_closed_form(p, m, v, expected) -> None:
    """Rule (review fix 3): the CLI/server take per-stage F, B (the §1.3 closed form's) and
    per_op_durations gives each of the v chunk ops F/v, B/v."""
    from plena_opt.simulator.engine import per_op_durations

    plan = build_schedule("interleaved-1f1b", p, m, v)
    per_op = per_op_durations(plan, {"F": 1.0, "B": 2.0})
    assert per_op == pytest.approx({"F": 1 / v, "B": 2 / v}, rel=1e-15)
    assert simulate(plan, per_op).makespan == pytest.approx(expected, rel=REL)


def test_per_stage_durations_chunk_only_llm_ops() -> None:
    """bigmac-vpp: LLM F, B are chunked (÷ v); vision-encoder and generator ops are whole ops
    (pipeline-simulator §5: VE/GEN ops have no chunk), and vpp=1 schedules are unchanged."""
    from plena_opt.simulator.engine import chunked_op_types, duration_note, per_op_durations

    stage = {"F": 3.0, "B": 6.0, "VF": 1.0, "VB": 2.0, "GF": 0.5, "GB": 1.5}
    plan = build_schedule("bigmac-vpp", 4, 8, 3)
    assert chunked_op_types(plan) == ("F", "B")
    assert per_op_durations(plan, stage) == {**stage, "F": 1.0, "B": 2.0}
    assert "chunk ops take F/v, B/v (v=3)" in duration_note(plan)
    zb = build_schedule("zb-h1", 4, 8)
    assert per_op_durations(zb, {"F": 1.0, "I": 1.0, "W": 1.0}) == {"F": 1.0, "I": 1.0, "W": 1.0}
    assert chunked_op_types(build_schedule("interleaved-1f1b", 4, 8, 1)) == ()
