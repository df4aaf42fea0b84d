"""The cold path's memos and shortcuts give exactly what the plain formulas give (issue 26).

Interned ``LayerKind`` (identity equality and hash), ``LayerShape.unchecked``, the kept
``StepWeights.points``, a priced layer's memoised ``with_comm`` / ``exposed_share``, plan bases
keyed by shard values, and ``Evaluator.check`` building only the plan base.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import FrozenInstanceError, asdict, replace

import numpy as np
import pytest
from deepstack import load_noc_profile

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.layer import LayerKind, LayerShape
from plena_opt.estimate.plan_passes import plan_base
from plena_opt.estimate.pricing import StepWeights
from plena_opt.memory import load_memory
from plena_opt.models import load_model


def _evaluator(output: int = 40) -> Evaluator:
    return Evaluator(
        load_model("llama-3.1-70b"),
        load_noc_profile("illustrative_gpu_cluster_32"),
        load_memory("fictional_stacked_dram"),
        Workload(batch_size=16, input_seq_len=2048, output_seq_len=output),
    )


def test_a_layer_kind_is_one_object_per_fields() -> None:
    kind = LayerKind("full_attention", False)
    assert LayerKind(attention="full_attention", moe=False) is kind
    assert pickle.loads(pickle.dumps(kind)) is kind and copy.deepcopy(kind) is kind
    assert replace(kind, moe=True) is LayerKind("full_attention", True) != kind
    assert asdict(kind) == {"attention": "full_attention", "moe": False}
    assert {kind: 1}[LayerKind("full_attention", False)] == 1
    assert repr(kind) == "LayerKind(attention='full_attention', moe=False)"
    with pytest.raises(FrozenInstanceError):
        kind.moe = True  # type: ignore[misc]


def test_unchecked_layer_shape_equals_the_dataclass() -> None:
    base = plan_base(_evaluator().ctx, Plan(tp=4, dp=2, pp=4))
    s = base.shape
    assert type(s) is LayerShape
    assert s == LayerShape(s.model, s.shard, s.perf, s.precision, s.tp)


def test_step_weights_keep_their_point_count() -> None:
    steps = StepWeights(np.array([1.0, 3.0, 4.0]), 8)
    assert steps.points == 3 and steps.total(np.ones(3)) == 8.0 and steps.mean(np.ones(3)) == 1.0
    with pytest.raises(FrozenInstanceError):
        steps.points = 4  # type: ignore[misc]


def test_layer_seconds_with_comm_equal_the_formulas() -> None:
    ev = _evaluator()
    ev.evaluate_batch(ev.legal_plans())
    priced = [la for la in ev.ctx.layer_cache.values() if la.steps.points > 1]
    assert priced
    for la in priced:
        s, w, n = la.seconds, la.steps.weights, la.steps.steps
        for comm in (0.0, float(np.median(s)), 2.0 * float(s.max())):
            full = la.with_comm(comm, True)
            assert np.array_equal(full, np.maximum(s, comm)) and not full.flags.writeable
            assert np.array_equal(la.with_comm(comm, False), s + comm)
            assert la.with_comm(comm, True) is full  # memoised
            if comm > 0:
                share = float(w @ np.maximum(comm - s, 0.0)) / n / comm
                assert la.exposed_share(comm) == share


def test_plan_bases_share_a_shard_id_exactly_when_their_shards_are_equal() -> None:
    ev = _evaluator()
    bases = [plan_base(ev.ctx, p) for p in ev.legal_plans()]
    assert len({b.shard_id for b in bases}) < len(bases)  # some are shared
    for a in bases:
        for b in bases:
            same = (a.priced_shard, a.shape.tp, a.dense.cp) == (
                b.priced_shard,
                b.shape.tp,
                b.dense.cp,
            )
            assert (a.shard_id == b.shard_id) == same


def test_check_builds_the_base_the_plan_is_then_priced_from() -> None:
    ev = _evaluator()
    plan = Plan(tp=8, dp=1, pp=4)
    ev.check(plan)
    assert PlanCost(ev.ctx, plan).base is plan_base(ev.ctx, plan)
    fresh = _evaluator()
    assert ev.evaluate(plan) == fresh.evaluate(plan)
    with pytest.raises(PlenaInputError, match="ep > 1 needs a model with MoE layers"):
        ev.check(Plan(tp=1, ep=2, dp=16, pp=1))
