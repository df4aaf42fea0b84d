"""The cold path's unchecked constructors build exactly what the checked ones build (issue 26).

``Plan.enumerated``, ``DeviceShard.build`` / ``without_micro``, ``shard.dense_scheme`` and
``PlanMetrics`` in ``metrics_of`` skip the generated dataclass ``__init__`` (and its checks) for
values already known valid; ``factorisations`` finds the divisors once. Each must equal, hash and
compare like the object the ordinary constructor gives.
"""

from __future__ import annotations

import pickle
from dataclasses import fields, replace

import pytest
from deepstack import ParallelScheme, load_noc_profile

from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.evaluator import PlanMetrics
from plena_opt.estimate.plan import divisors, factorisations
from plena_opt.estimate.shard import DeviceShard, dense_scheme
from plena_opt.memory import load_memory
from plena_opt.models import load_model


def _recursive(n: int, parts: int) -> list[tuple[int, ...]]:
    """The definition: every ordered ``parts``-tuple with product ``n``, smallest first."""
    if parts == 1:
        return [(n,)]
    return [(d, *rest) for d in divisors(n) for rest in _recursive(n // d, parts - 1)]


@pytest.mark.parametrize("n", [1, 2, 12, 32, 36, 360, 1001, 4096])
@pytest.mark.parametrize("parts", [1, 2, 3, 5])
def test_factorisations_equal_the_recursive_definition(n: int, parts: int) -> None:
    assert factorisations(n, parts) == _recursive(n, parts)


def test_an_enumerated_plan_is_the_checked_plan() -> None:
    fast = Plan.enumerated(2, 4, 1, 2, 1, "keep", "full")
    checked = Plan(2, 4, 1, 2, 1, "keep", "full")
    assert fast == checked and hash(fast) == hash(checked) and repr(fast) == repr(checked)
    assert fast.fields() == checked.fields() and fast.to_dict() == checked.to_dict()
    assert pickle.loads(pickle.dumps(fast)) == checked
    assert sorted([fast, Plan(1)]) == sorted([checked, Plan(1)])


def test_shards_and_schemes_equal_the_checked_constructors() -> None:
    model = load_model("qwen3-235b-a22b")
    plan = Plan(tp=4, ep=2, dp=2, pp=2, cp=1)
    shard = DeviceShard.build(model, plan, Workload(batch_size=24))
    values = {f.name: getattr(shard, f.name) for f in fields(DeviceShard)}
    assert shard == DeviceShard(**values) and hash(shard) == hash(DeviceShard(**values))
    no_micro = shard.without_micro()
    assert no_micro == replace(shard, micro=0) and hash(no_micro) == hash(replace(shard, micro=0))
    assert shard.micro == 12  # the original is left alone
    scheme = dense_scheme(plan)
    checked = ParallelScheme(tp=4, ep=1, cp=1, dp=4, pp=2)
    assert (
        scheme == checked and hash(scheme) == hash(checked) and scheme.sizes() == (4, 1, 1, 1, 4, 2)
    )


def test_batch_metrics_equal_metrics_built_by_the_dataclass() -> None:
    ev = Evaluator(
        load_model("llama-3.1-8b"),
        load_noc_profile("illustrative_gpu_cluster_32"),
        load_memory("fictional_stacked_dram"),
        Workload(batch_size=8, input_seq_len=512, output_seq_len=64),
    )
    plans = ev.legal_plans()
    assert plans == [Plan(**p.fields()) for p in ev.candidate_plans()]
    for m in ev.evaluate_batch(plans[:6]):
        rebuilt = PlanMetrics(**{f.name: getattr(m, f.name) for f in fields(PlanMetrics)})
        assert m == rebuilt and m.to_dict() == rebuilt.to_dict()
        assert pickle.loads(pickle.dumps(m)) == rebuilt


@pytest.mark.parametrize("batch, osl", [(1, 1), (3, 1024), (512, 7), (2**24, 2**24)])
def test_a_derived_workload_is_the_replaced_one(batch: int, osl: int) -> None:
    base = Workload(batch_size=5, input_seq_len=8192, output_seq_len=9, precision="fp8",
                    routing="random", eplb_redundant=2)  # fmt: skip
    fast = base.with_lengths(batch, osl)
    checked = replace(base, batch_size=batch, output_seq_len=osl)
    assert fast == checked and hash(fast) == hash(checked) and repr(fast) == repr(checked)
    assert type(fast) is Workload and base.batch_size == 5  # the original is left as it was


@pytest.mark.parametrize(
    "batch, osl, field",
    [(0, 8, "batch_size"), (2**24 + 1, 8, "batch_size"), (4, 0, "output_seq_len"),
     (4, 2**24 + 1, "output_seq_len"), (True, 8, "batch_size"), (4, 2.0, "output_seq_len")],
)  # fmt: skip
def test_a_derived_workload_refuses_what_replace_refuses(batch, osl, field: str) -> None:
    from plena_opt.errors import PlenaInputError, PlenaTypeError

    base = Workload(batch_size=5, input_seq_len=128, output_seq_len=9)
    with pytest.raises((PlenaInputError, PlenaTypeError)) as checked:
        replace(base, batch_size=batch, output_seq_len=osl)
    with pytest.raises(type(checked.value)) as fast:
        base.with_lengths(batch, osl)
    assert fast.value.field == checked.value.field == field
