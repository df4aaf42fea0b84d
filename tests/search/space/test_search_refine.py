"""Local refinement of the sampled front (``plena_opt.search.space.refine``,
``sampled.SampledRun``)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from plena_opt.search.request import SearchRequest
from plena_opt.search.run import sampled
from plena_opt.search.run.runner import run_search
from plena_opt.search.space.refine import (
    MoveCredit,
    moves,
    neighbour_order,
    neighbours,
    prime_factors,
)
from plena_opt.search.space.space import PlanSpace
from tests.search.run.test_search_fakes import FakeEvaluator, fake_factory

DIMS = ("tp", "ep", "dp", "pp", "cp")


def _one_step(a, b, batches: list[int]) -> bool:
    """Independent definition: ``b`` is one step from ``a`` (refine's module docstring)."""
    pa, pb = a.plan, b.plan
    changed = [d for d in DIMS if getattr(pa, d) != getattr(pb, d)]
    same_rest = a.batch_size == b.batch_size and pa.comm_overlap == pb.comm_overlap
    if len(changed) == 2 and same_rest:
        x, y = changed
        ratio = Fraction(getattr(pb, x), getattr(pa, x))
        step = ratio if ratio > 1 else 1 / ratio
        is_prime = step.denominator == 1 and all(
            step.numerator % k for k in range(2, step.numerator)
        )
        factor_ok = Fraction(getattr(pa, y), getattr(pb, y)) == ratio and is_prime
        return factor_ok and _split_kept(pa, pb)
    if changed:
        return False
    diffs = [
        (pa.moe_tp_mode, pa.moe_tp) != (pb.moe_tp_mode, pb.moe_tp),  # any other MoE split
        pa.comm_overlap != pb.comm_overlap,
        a.batch_size != b.batch_size,
    ]
    if sum(diffs) != 1:
        return False
    if a.batch_size != b.batch_size:
        return abs(batches.index(a.batch_size) - batches.index(b.batch_size)) == 1
    return True


def _split_kept(pa, pb) -> bool:
    """``pb`` keeps ``pa``'s MoE split across a factor move: the same shorthand (``replace``
    once tp is 1), or the same explicit moe_tp (written as the shorthand it equals)."""
    if not pa.moe_tp:
        same = pa.moe_tp_mode == pb.moe_tp_mode or (pb.tp == 1 and pb.moe_tp_mode == "replace")
        return same and not pb.moe_tp
    if pb.moe_tp:
        return pb.moe_tp == pa.moe_tp
    return pa.moe_tp in (1, pb.tp) and pb.moe_tp_mode == ("keep" if pa.moe_tp > 1 else "replace")


@pytest.mark.parametrize(("devices", "experts"), [(16, 0), (64, 8), (24, 0)])
def test_neighbours_are_exactly_the_legal_one_step_points(devices: int, experts: int) -> None:
    batches = [4, 16, 64]
    space = PlanSpace(devices, batches, FakeEvaluator(devices=devices, experts=experts).check)
    for p in space.points[:: max(1, len(space) // 60)]:
        got = neighbours(p, space)
        assert len(got) == len(set(got)) and p not in got
        assert set(got) == {q for q in space.points if q != p and _one_step(p, q, batches)}


def test_prime_factors() -> None:
    assert prime_factors(1) == [] and prime_factors(1024) == [2]
    assert prime_factors(24) == [2, 3] and prime_factors(4096 * 3 * 7) == [2, 3, 7]


def test_neighbour_order_is_round_robin_and_skips_scored() -> None:
    space = PlanSpace(16, [4, 16], FakeEvaluator(devices=16).check)
    a, b = space.points[0], space.points[-1]
    na, nb = neighbours(a, space), neighbours(b, space)
    scored = {na[0].key}
    order = [m.point for m in neighbour_order([a, b], space, scored)]
    assert na[0] not in order and order[:2] == [na[1], nb[0]]
    assert len(order) == len({q.key for q in order}) == len(set(na[1:]) | set(nb))


def test_neighbour_order_tries_the_step_kinds_that_reached_the_front_first() -> None:
    space = PlanSpace(16, [4, 16], FakeEvaluator(devices=16).check)
    a = space.points[0]
    kinds = [m.kind for m in moves(a, space)]
    credit = MoveCredit()
    for _ in range(3):
        credit.add(kinds[-1], True)  # the last kind always reached the front
        credit.add(kinds[0], False)  # the first never did
    rates = credit.rates()
    assert rates[kinds[-1]] == pytest.approx(4 / 5) and rates[kinds[0]] == pytest.approx(1 / 5)
    order = [m.kind for m in neighbour_order([a], space, set(), rates)]
    assert order[0] == kinds[-1] and order[-1] == kinds[0]
    assert sorted(order) == sorted(kinds)


def _missed(
    monkeypatch, share: float, seed: int, trials: int = 120
) -> tuple[set[str], set[str], object]:
    monkeypatch.setattr(sampled, "SAMPLER_SHARE", share)
    factory, calls = fake_factory(devices=256)
    req = SearchRequest(storage=":memory:", batch_sizes=[4, 16, 64], sampler="tpe", trials=trials,
                        seed=seed)  # fmt: skip
    res = run_search(req, evaluator_factory=factory)
    exact = run_search(
        SearchRequest(storage=":memory:", batch_sizes=[4, 16, 64], sampler="exhaustive"),
        evaluator_factory=fake_factory(devices=256)[0],
    )
    exact_keys = {e.label for e in exact.front}
    return exact_keys - {e.label for e in res.front}, exact_keys, res


def test_refinement_recovers_front_plans_the_sampler_alone_misses(monkeypatch) -> None:
    # 576 legal points, exact front of 15, budget 120 (21 %), seed 1: TPE alone (the whole budget
    # to the sampler, as before the refinement) misses front plans on Optuna 4 and 5; sampler +
    # refinement finds them. (At 30 % TPE alone now finds the whole front: a repeat is replaced
    # by the unscored plan nearest it, issue 26.)
    missed_alone, exact, alone = _missed(monkeypatch, 1.0, seed=1)
    assert missed_alone, "the sampler alone finds the whole front here: the test proves nothing"
    missed, _, refined = _missed(monkeypatch, 0.5, seed=1)
    assert not missed & missed_alone  # every plan the sampler missed is recovered
    assert refined.front_recall > alone.front_recall
    assert refined.front_recall == len(exact - missed) / len(exact)
    assert alone.evaluated == refined.evaluated == 120


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
@pytest.mark.parametrize("trials", [1, 5, 33, 150])
def test_budget_is_never_exceeded_and_each_plan_scored_once(sampler: str, trials: int) -> None:
    factory, calls = fake_factory(devices=64, experts=8)
    req = SearchRequest(storage=":memory:", batch_sizes=[4, 16, 64], sampler=sampler,
                        trials=trials, seed=3, compare_exact=False)  # fmt: skip
    res = run_search(req, evaluator_factory=factory)
    assert len(calls) == len(set(calls)) == res.evaluated == trials
    assert res.trials == res.trials_completed == trials  # every scored plan stored once


def test_refinement_stops_at_the_space_size() -> None:
    factory, calls = fake_factory(devices=16)
    req = SearchRequest(storage=":memory:", batch_sizes=[4], sampler="tpe", trials=10_000,
                        seed=0, compare_exact=False)  # fmt: skip
    res = run_search(req, evaluator_factory=factory)
    assert len(calls) == len(set(calls)) == res.evaluated == res.legal_points
    assert any("every one of the" in w for w in res.warnings)
