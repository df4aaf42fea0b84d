"""``evaluate_batch``'s prefill latencies from the plan bases' pieces (``estimate.batch_rows``)
and the per-process base decode grids (``decode.grid.shared_decode_grid``) give the scalar
path's figures to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from plena_opt.api import load_problem
from plena_opt.estimate.batch_rows import prefill_latency
from plena_opt.estimate.decode import StairSpec, decode_grid, shared_decode_grid
from plena_opt.estimate.decode import grid as grid_module
from plena_opt.estimate.distributed import PlanCost
from tests.estimate.test_evaluator_fixture import CASES

REFERENCE = dict(  # the reference case of ``benchmarks/bench_reference_ratio.py``, output 16
    model="llama-3.1-70b",
    noc="illustrative_gpu_cluster_32",
    memory="fictional_stacked_dram",
    batch_size=16,
    input_seq=2048,
    output_seq=16,
)
ALL = {**CASES, "reference-16": REFERENCE}


def _exact(x: object) -> object:
    """``x`` with every float as its ``repr`` (equal only when equal to the bit)."""
    if isinstance(x, dict):
        return {k: _exact(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_exact(v) for v in x]
    return repr(x) if isinstance(x, float) else x


@pytest.mark.parametrize("name", list(ALL))
def test_batch_equals_the_scalar_path_to_the_bit(name: str) -> None:
    """Every plan: ``evaluate_batch`` on a fresh evaluator and ``evaluate`` (the ``PassResult``
    path) plan by plan, last first, on another, give the same ``repr`` of every figure."""
    plans = load_problem(**ALL[name]).evaluator().legal_plans()
    assert len(plans) > 10
    batch = load_problem(**ALL[name]).evaluator().evaluate_batch(plans)
    single = load_problem(**ALL[name]).evaluator()
    scalar = [single.evaluate(p) for p in reversed(plans)][::-1]
    for b, s in zip(batch, scalar, strict=True):
        assert _exact(b.to_dict()) == _exact(s.to_dict()), b.plan


@pytest.mark.parametrize("name", ["moe-qwen235b-cluster32", "reference-16"])
def test_prefill_latency_is_the_prefill_pass_latency(name: str) -> None:
    """Without a prefill pass built, from the base's pieces; then from the built pass."""
    ev = load_problem(**ALL[name]).evaluator()
    for plan in ev.legal_plans():
        fast = prefill_latency(PlanCost(ev.ctx, plan))
        cost = PlanCost(ev.ctx, plan)
        want = cost.prefill.latency_at(0)
        assert repr(fast) == repr(want), plan
        assert prefill_latency(cost) == want


def test_shared_grids_are_fresh_copies_of_one_build() -> None:
    spec = StairSpec(64, None, None, None)
    a = shared_decode_grid(2048, 1024, 2, spec)
    b = shared_decode_grid(2048, 1024, 2, spec)
    built = decode_grid(2048, 1024, 2, spec)
    assert a is not b and a.key == b.key == built.key
    assert np.array_equal(a.kv, built.kv) and np.array_equal(
        a.weights.weights, built.weights.weights
    )
    assert not a.kv.flags.writeable and not a.weights.weights.flags.writeable  # shared arrays
    a.layer_facts[1] = ("layer", None)
    assert b.layer_facts == {}  # a context's checks never reach another's grid


def test_the_shared_grid_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grid_module, "MAX_SHARED_GRIDS", 3)
    monkeypatch.setattr(grid_module, "_SHARED", {})
    spec = StairSpec(64, None, None, None)
    for out in range(10, 16):
        shared_decode_grid(512, out, 1, spec)
    assert list(grid_module._SHARED) == [(512, out, 1, spec) for out in (13, 14, 15)]
