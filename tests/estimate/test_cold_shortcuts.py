"""The r9cold shortcuts on a fresh evaluator's path give exactly what they replace (issue 26).

``Cost.of`` and ``PassFigures.with_comm_totals`` skip the generated dataclass ``__init__``;
``LayerKind`` keeps its attention flags as attributes; ``factorisations`` is a per-process
table; ``StageArrays`` tests for arrays without ``np.ndim`` and keeps its first value as a float;
a dense layer's collective options are one object. Each must equal what the plain code gives
(the metrics themselves are pinned by ``tests/estimate/test_evaluator_fixture.py``).
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from plena_opt.estimate.comm import Cost
from plena_opt.estimate.layer import LayerKind
from plena_opt.estimate.passes import PassFigures
from plena_opt.estimate.plan import factorisations
from plena_opt.estimate.pricer import CollectiveOptions
from plena_opt.estimate.pricing import StageArrays, StepWeights, _is_array
from plena_opt.memory import load_memory


def test_a_fast_cost_is_the_checked_cost() -> None:
    fast, checked = Cost.of(1.5e-6, 3.0), Cost(1.5e-6, 3.0)
    assert fast == checked and hash(fast) == hash(checked) and repr(fast) == repr(checked)
    assert Cost.of(2.0, None) == Cost(2.0, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.seconds = 0.0  # type: ignore[misc]


def test_fast_pass_figures_are_the_dataclass_defaults() -> None:
    totals = {LayerKind("full_attention", False): 2.5e-5}
    a, b = PassFigures.with_comm_totals(totals), PassFigures.with_comm_totals({})
    assert a == PassFigures(comm_totals=totals) and b == PassFigures(comm_totals={})
    assert set(vars(a)) == {f.name for f in dataclasses.fields(PassFigures)}
    a.totals["x"] = 1.0  # each has its own memo dicts, as the default factories give
    a.attribution["p"] = ()
    assert b.totals == {} and b.attribution == {}


@pytest.mark.parametrize(
    "attention", ["full_attention", "sliding_attention", "chunked_attention", "linear_attention"]
)
@pytest.mark.parametrize("moe", [False, True])
def test_layer_kind_flags_follow_the_attention_type(attention: str, moe: bool) -> None:
    kind = LayerKind(attention, moe)
    assert (kind.sliding, kind.chunked, kind.linear) == (
        attention == "sliding_attention",
        attention == "chunked_attention",
        attention == "linear_attention",
    )
    assert [f.name for f in dataclasses.fields(LayerKind)] == ["attention", "moe"]
    assert repr(kind) == f"LayerKind(attention={attention!r}, moe={moe})"
    assert pickle.loads(pickle.dumps(kind)) is kind and LayerKind(attention, moe) is kind


def test_factorisations_are_a_new_list_each_call() -> None:
    first = factorisations(32)
    first.clear()
    again = factorisations(32)
    assert len(again) == 126 and again is not first and (2, 1, 4, 2, 2) in again


@pytest.mark.parametrize(
    "value",
    [0.5, 3, np.float64(2.0), np.array(4.0), np.array([1.0, 2.0]), np.array([True, False])],
)
def test_is_array_is_np_ndim_not_zero(value: object) -> None:
    assert _is_array(value) == (np.ndim(value) != 0)


def test_a_stage_keeps_its_first_value_and_fills_scalars() -> None:
    memory = load_memory("fictional_stacked_dram")
    steps = StepWeights(np.array([3.0, 5.0]), 8)
    st = StageArrays(2.0, np.array([1.0, 4.0]), 10.0, 0.0, steps, "stage-roofline", memory)
    assert st.first_seconds == float(st.seconds[0]) == 2.0
    assert type(st.first_seconds) is float
    assert st.compute_seconds.tolist() == [2.0, 2.0] and st.memory_bound.tolist() == [False, True]
    assert st.field_sum("compute_seconds") == 16.0  # a scalar field times the steps


def test_dense_layers_share_one_options_object() -> None:
    from deepstack import load_noc_profile

    from plena_opt.estimate import Evaluator
    from plena_opt.models import load_model

    noc = load_noc_profile("illustrative_gpu_cluster_32")
    ev = Evaluator(load_model("llama-3.1-8b"), noc, load_memory("fictional_stacked_dram"))
    opts = ev.ctx.pricer.collective_options(None)
    assert opts == CollectiveOptions(None, False, None)
    assert ev.ctx.pricer.collective_options(None) is opts


def test_stage_tables_are_per_layer_structure_and_change_no_figure() -> None:
    from deepstack import load_noc_profile

    from plena_opt.estimate import Evaluator, memo
    from plena_opt.models import load_model

    noc = load_noc_profile("illustrative_gpu_cluster_32")
    mem = load_memory("fictional_stacked_dram")
    llama, gemma = load_model("llama-3.1-70b"), load_model("gemma-2-27b")
    memo._STAGE_TABLES.clear()
    first = Evaluator(llama, noc, mem)
    cold = [m.to_dict() for m in first.evaluate_batch(first.legal_plans())]
    again = Evaluator(llama, noc, mem)  # finds the tables the first one filled
    assert again.ctx.row_groups is first.ctx.row_groups and first.ctx.row_groups.groups
    assert [m.to_dict() for m in again.evaluate_batch(again.legal_plans())] == cold
    other = Evaluator(gemma, load_noc_profile("torus_mesh_switch_64"), mem)
    assert other.ctx.row_groups is not first.ctx.row_groups  # sliding/full runs: its own table


def test_layout_ids_are_one_per_group_layout_across_networks() -> None:
    from deepstack import ParallelScheme
    from deepstack.placement import layout

    from plena_opt.estimate.comm import CollectivePrices, PricedNetwork, layout_id

    schemes = [
        ParallelScheme(tp=tp, cp=cp, dp=dp, pp=pp)
        for tp in (1, 2, 4)
        for cp in (1, 2)
        for dp in (1, 2)
        for pp in (1, 2, 4)
    ]
    for dim in ("tp", "cp", "dp", "pp"):
        for a in schemes:
            for b in schemes:  # equal ids exactly when deepstack's groups are equal
                same = layout(a, dim) == layout(b, dim)
                assert (layout_id(a, dim) == layout_id(b, dim)) == same
    a, b = PricedNetwork(None, CollectivePrices()), PricedNetwork(None, CollectivePrices())
    assert a.layout(schemes[5], "tp") == b.layout(schemes[5], "tp") == layout_id(schemes[5], "tp")
