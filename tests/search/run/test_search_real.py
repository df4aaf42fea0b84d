"""Search on the real evaluator: the exhaustive front equals an independent brute-force front."""

from __future__ import annotations

import itertools
import math

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import run_search

SMALL = dict(input_seq=256, output_seq=8)  # short sequences keep the evaluator fast


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _brute_front(problem: ProblemSpec, batches: list[int]) -> dict[tuple, tuple]:
    """Every (tp, ep, dp, pp, cp, mode, overlap, batch) with the right product, checked by the
    evaluator and scored; front by a direct O(n²) dominance test. ``keep`` with tp = 1, or on a
    dense model, is the same plan as ``replace`` (analytic-model §4.2: the mode only shapes MoE
    layers, and with tp = 1 both give tp'=1, ep'=ep); it is folded in, after checking that its
    metrics are identical."""
    inputs = problem.load()
    rows: dict[tuple, tuple] = {}
    for b in batches:
        ev = inputs.evaluator(b)
        n = ev.num_devices
        for tp, ep, dp, pp, cp in itertools.product(_divisors(n), repeat=5):
            if tp * ep * dp * pp * cp != n:
                continue
            splits = [(m, 0) for m in ("replace", "keep")]  # + explicit MoE splits:
            splits += [("replace", mt) for mt in _divisors(tp * ep) if mt not in (1, tp)]
            for (mode, mt), ov in itertools.product(splits, ("none", "full")):
                if mt and not inputs.model.num_experts:
                    continue
                plan = Plan(tp, ep, dp, pp, cp, mode, ov, mt)
                try:
                    ev.check(plan)
                except PlenaInputError:
                    continue
                m = ev.evaluate_batch([plan])[0]
                canon = "replace" if tp == 1 or not inputs.model.num_experts else mode
                key = (tp, ep, dp, pp, cp, canon, ov, mt, b)
                vals = (m.ttft_seconds * 1e3, m.tps, m.energy_per_token_joules)
                if key in rows:
                    assert rows[key] == vals  # the folded keep plan really is the same plan
                if m.fits_in_memory is not False:
                    rows[key] = vals
    front = {}
    for k, (t, s, e) in rows.items():
        if not any(
            t2 <= t and s2 >= s and e2 <= e and (t2 < t or s2 > s or e2 < e)
            for t2, s2, e2 in rows.values()
        ):
            front[k] = (t, s, e)
    return front


def _front(result) -> dict[tuple, tuple]:
    out = {}
    for e in result.front:
        p = e.plan
        key = tuple(p[k] for k in ("tp", "ep", "dp", "pp", "cp", "moe_tp_mode", "comm_overlap"))
        out[(*key, p.get("moe_tp", 0), p["batch_size"])] = (e.ttft_ms, e.tps, e.energy_j_per_token)
    return out


@pytest.mark.parametrize(
    "model,noc,batches",
    [
        ("llama-3.1-8b", "illustrative_gpu_node_8", [4, 16]),
        ("gpt-oss-20b", "illustrative_gpu_node_8", [8]),
    ],
)
def test_exhaustive_front_equals_brute_force(model: str, noc: str, batches: list[int]) -> None:
    problem = ProblemSpec(model=model, noc=noc, **SMALL)
    res = run_search(
        SearchRequest(
            problem=problem, batch_sizes=batches, sampler="exhaustive", storage=":memory:"
        )
    )
    expected = _brute_front(problem, batches)
    assert _front(res).keys() == expected.keys()
    for k, vals in _front(res).items():
        assert vals == pytest.approx(expected[k], rel=1e-12)  # same evaluator, same numbers
    # the batch API agrees with the full estimate path on every front plan (TTFT, TPS, TPS/seq)
    inputs = problem.load()
    for e in res.front:
        p = e.plan
        plan = Plan.from_dict(p)
        full = inputs.evaluator(p["batch_size"]).estimate(plan)
        assert e.ttft_ms == pytest.approx(full.ttft_seconds * 1e3, rel=1e-9)
        assert e.tps == pytest.approx(full.tps, rel=1e-9)
        assert e.tps_per_sequence == pytest.approx(full.tps_per_sequence, rel=1e-9)
        assert e.memory_bytes_per_device == pytest.approx(
            full.weight_bytes_per_device + full.kv_cache_bytes_per_device, rel=1e-9
        )


def test_sampled_real_search_is_consistent_with_exact_front() -> None:
    problem = ProblemSpec(model="gpt-oss-20b", noc="illustrative_gpu_node_8", **SMALL)
    req = SearchRequest(
        problem=problem, batch_sizes=[4, 16], sampler="tpe", trials=30, seed=0, storage=":memory:"
    )
    res = run_search(req)
    assert res.evaluated <= 30 and res.legal_points > 30
    assert res.exact_front_size and 0 < res.hv_ratio <= 1 + 1e-12
    exact = _brute_front(problem, [4, 16])
    for k, (t, s, e) in _front(res).items():  # each sampled front plan is on or behind the exact
        assert k in exact or any(t2 <= t and s2 >= s and e2 <= e for t2, s2, e2 in exact.values())


def test_memory_constraint_uses_real_capacity() -> None:
    problem = ProblemSpec(model="llama-3.1-70b", noc="illustrative_gpu_node_8", **SMALL)
    res = run_search(SearchRequest(problem=problem, sampler="exhaustive", storage=":memory:"))
    cap = problem.load().memory.capacity_bytes
    assert res.front and all(e.memory_bytes_per_device <= cap for e in res.front)
    assert all(e.fits_in_memory for e in res.front)
    assert not math.isnan(res.hypervolume)
