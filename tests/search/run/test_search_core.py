"""Pure building blocks of the search: Pareto mask, hypervolume, plan space, constraints."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from optuna._hypervolume import compute_hypervolume  # private; used only as an independent check

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan
from plena_opt.search.fronts.hypervolume import REFERENCE, Normaliser, hypervolume
from plena_opt.search.fronts.pareto import pareto_mask
from plena_opt.search.space.objectives import Constraints, parse_objectives
from plena_opt.search.space.space import PlanSpace, divisors, factorisations
from tests.search.run.test_search_fakes import FakeEvaluator, FakeMetrics


def _brute_front(pts: np.ndarray) -> set[int]:
    keep = set()
    for i, p in enumerate(pts):
        if not any(np.all(q <= p) and np.any(q < p) for q in pts):
            keep.add(i)
    return keep


@pytest.mark.parametrize("seed", range(6))
def test_pareto_mask_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pts = rng.integers(0, 6, size=(60, 3)).astype(float)  # many ties and duplicates
    assert set(np.flatnonzero(pareto_mask(pts))) == _brute_front(pts)


def test_pareto_mask_drops_nan_rows_and_handles_empty() -> None:
    pts = np.array([[0.0, math.nan], [1.0, 1.0]])
    assert pareto_mask(pts).tolist() == [False, True]
    assert pareto_mask(np.zeros((0, 2))).tolist() == []


@pytest.mark.parametrize("k,seed", [(2, 0), (2, 1), (3, 2), (3, 3), (4, 4)])
def test_hypervolume_matches_optuna(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pts = rng.random((25, k))
    ref = np.full(k, REFERENCE)
    # Optuna's routine (private module) wants a non-dominated set
    front = pts[pareto_mask(pts)]
    assert hypervolume(pts, ref) == pytest.approx(compute_hypervolume(front, ref), rel=1e-12)


def test_hypervolume_simple_cases() -> None:
    ref = np.array([2.0, 2.0, 2.0])
    assert hypervolume(np.array([[1.0, 1.0, 1.0]]), ref) == pytest.approx(1.0)
    # two boxes 2x1x1 and 1x2x1 overlapping in 1x1x1
    pts = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    assert hypervolume(pts, ref) == pytest.approx(3.0)
    assert hypervolume(np.array([[3.0, 0.0, 0.0]]), ref) == 0.0  # beyond the reference


def test_normaliser_maps_ideal_to_zero_and_nadir_to_one() -> None:
    pts = np.array([[1.0, 10.0], [3.0, 30.0]])
    norm = Normaliser.from_points(pts)
    assert norm(pts).tolist() == [[0.0, 0.0], [1.0, 1.0]]
    # one point at the ideal spans the whole box up to the reference point
    assert norm.hypervolume(pts[:1]) == pytest.approx(REFERENCE**2)


def test_factorisations() -> None:
    facts = factorisations(32)
    assert len(facts) == math.comb(5 + 4, 4)  # 2^5 over 5 ordered factors: stars and bars
    assert len(set(facts)) == len(facts)
    assert all(math.prod(f) == 32 for f in facts)
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert len(factorisations(12, 2)) == 6


def test_plan_space_legality_and_params() -> None:
    ev = FakeEvaluator(devices=8, heads=4, layers=2)
    space = PlanSpace(8, [4, 16], ev.check)
    assert not space.is_moe
    for point in space.points:  # every point legal, right device count, dense → replace
        ev.check(point.plan)
        assert point.plan.world_size == 8 and point.plan.moe_tp_mode == "replace"
    legal_shapes = {f for f in factorisations(8) if 4 % f[0] == 0 and f[1] == 1 and f[3] <= 2}
    assert {(p.plan.tp, p.plan.ep, p.plan.dp, p.plan.pp, p.plan.cp) for p in space.points} == (
        legal_shapes
    )
    assert len(space) == len(legal_shapes) * 2 * 2  # overlaps × batch sizes
    assert set(space.distributions()) == {"tp", "ep", "pp", "cp", "comm_overlap", "batch_size"}
    p0 = space.points[0]
    assert space.point_from_params(space.params(p0)) == (p0, None)
    bad = dict(space.params(p0), tp=8, pp=2)  # 16 > 8 devices
    point, reason = space.point_from_params(bad)
    assert point is None and "does not divide" in reason
    point, reason = space.point_from_params(dict(space.params(p0), tp=1, ep=2, pp=1, cp=1))
    assert point is None and "use dp" in reason  # the evaluator's own reason is kept


def test_plan_space_moe_has_modes_only_where_they_differ() -> None:
    ev = FakeEvaluator(devices=8, heads=8, layers=8, experts=8)
    space = PlanSpace(8, [16], ev.check)
    assert space.is_moe and "moe_tp_mode" in space.distributions()
    keeps = [p.plan for p in space.points if p.plan.moe_tp_mode == "keep"]
    assert keeps and all(p.tp > 1 for p in keeps)
    params = {"tp": 1, "ep": 8, "pp": 1, "cp": 1, "moe_tp_mode": "keep", "comm_overlap": "none"}
    point, _ = space.point_from_params(params)
    assert point is not None and point.plan.moe_tp_mode == "replace"  # canonical plan


def test_parse_objectives() -> None:
    assert [o.name for o in parse_objectives("ttft,tps-per-seq")] == ["ttft_ms", "tps_per_sequence"]
    assert [o.direction for o in parse_objectives(None)] == ["minimize", "maximize", "minimize"]
    with pytest.raises(PlenaInputError, match="unknown objective 'speed'"):
        parse_objectives("ttft,speed")
    with pytest.raises(PlenaInputError, match="twice"):
        parse_objectives("tps,tps")


def _metrics(ttft: float, tps_seq: float, weights: float, kv: float, fits: bool | None):
    return FakeMetrics(Plan(), ttft, 1.0, tps_seq, 0.1, weights, kv, fits)


def test_constraints_signs_follow_fits_and_slas() -> None:
    c = Constraints(capacity_bytes=100.0, max_ttft_ms=50.0, min_tps_per_seq=10.0)
    v = c.values(_metrics(0.025, 20.0, 40.0, 10.0, True))
    assert v == {
        "memory": pytest.approx(-0.5),
        "max_ttft": pytest.approx(-0.5),
        "min_tps_per_seq": pytest.approx(-1.0),
    }
    v = c.values(_metrics(0.1, 5.0, 150.0, 50.0, False))
    assert v["memory"] == pytest.approx(1.0) and v["max_ttft"] == pytest.approx(1.0)
    assert c.violated(v) == ["memory", "max_ttft", "min_tps_per_seq"]
    # the evaluator's verdict wins over the ratio; unknown capacity is not a violation
    assert Constraints(capacity_bytes=100.0).values(_metrics(0.1, 1, 10, 10, False))["memory"] > 0
    assert Constraints().values(_metrics(0.1, 1, 10, 10, None))["memory"] == 0.0
    assert Constraints().values(_metrics(0.1, 1, 10, 10, False))["memory"] == 1.0


def test_factorisation_product_is_exhaustive_for_small_n() -> None:
    n = 12
    brute = {t for t in itertools.product(divisors(n), repeat=5) if math.prod(t) == n}
    assert set(factorisations(n)) == brute
