"""r14pass: the cold path's plumbing shortcuts give what the long ways give (issue 26).

``shard.moe_scheme`` builds a scheme of positive ``int`` degrees unchecked (the checked
constructor's scheme); ``PlanBase`` interns a MoE plan's collectives by the schemes' field
values (equal schemes, one id); ``gpu_host.model_ops`` keeps its count per model object.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from deepstack import ParallelScheme
from deepstack.errors import ProfileError, ProfileTypeError

from plena_opt.estimate import Evaluator, Plan, Workload, gpu_host
from plena_opt.estimate.gpu_host import count_model_ops, model_ops
from plena_opt.estimate.plan_base import PlanBase
from plena_opt.estimate.shard import moe_scheme
from plena_opt.models import load_model
from tests.estimate._step_models import h100_step_model


@pytest.mark.parametrize("tp_moe", [1, 2, 8])
@pytest.mark.parametrize("ep_moe", [1, 4, 8])
@pytest.mark.parametrize("fields", [{}, {"dp": 2}, {"pp": 2, "cp": 2}])
def test_moe_scheme_equals_the_checked_constructor(tp_moe, ep_moe, fields):
    plan = Plan(tp=2, ep=4, **fields)
    fast = moe_scheme(plan, tp_moe, ep_moe)
    slow = ParallelScheme(
        tp=tp_moe, ep=ep_moe, cp=plan.cp, dp=plan.dp, pp=plan.pp, ep1=ep_moe, ep2=1
    )
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert all(type(getattr(fast, f)) is int for f in ("tp", "ep", "sp", "cp", "dp", "pp"))


def test_moe_scheme_still_checks_other_degrees():
    plan = Plan(tp=2, ep=4)
    with pytest.raises(ProfileError):
        moe_scheme(plan, 0, 8)
    with pytest.raises(ProfileTypeError):
        moe_scheme(plan, 2.0, 8)  # type: ignore[arg-type]
    numpy_int = moe_scheme(plan, np.int64(2), 4)  # checked, converted to int
    assert numpy_int == moe_scheme(plan, 2, 4) and type(numpy_int.tp) is int


def _ctx(model: str, batch: int = 32):
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate.gpu import gpu_memory

    chip = load_chip("h100-sxm")
    wl = Workload(batch_size=batch, input_seq_len=1024, output_seq_len=1024, precision="fp8")
    return Evaluator(load_model(model), load_noc_profile("hgx-h100x8"), gpu_memory(chip), wl, chip)


def test_moe_comm_ids_follow_the_schemes():
    """Plans with equal shards and schemes share a collectives id (comm-overlap variants);
    another scheme of the same shard gets another id, as keying by the schemes did."""
    ev = _ctx("qwen3-235b-a22b")
    ctx = ev.ctx
    a = PlanBase(ctx, Plan(ep=8), True)
    b = PlanBase(ctx, Plan(ep=8, comm_overlap="full"), True)
    assert a.comm_id == b.comm_id
    c = PlanBase(ctx, Plan(tp=2, ep=4), True)
    d = PlanBase(ctx, Plan(tp=2, ep=4, moe_tp_mode="keep"), True)
    assert (c.moe != d.moe) and c.comm_id != d.comm_id
    ids = {a.comm_id, c.comm_id, d.comm_id}
    assert len(ids) == 3


@pytest.mark.parametrize("name", ["llama-3.1-70b", "qwen3-235b-a22b", "llama-3.1-8b"])
@pytest.mark.parametrize("tp", [1, 8])
@pytest.mark.parametrize("block", [False, True])
def test_model_ops_kept_equals_the_count(name, tp, block):
    m = load_model(name)
    kept = model_ops(m, tp, block)
    assert kept == count_model_ops(m, tp, block)
    assert model_ops(m, tp, block) is kept  # kept for the model object


def test_model_ops_keyed_by_the_model_object():
    """Another model object (even an equal copy) is counted afresh, and an entry whose id was
    taken by another object is not read for it."""
    m = load_model("qwen3-235b-a22b")
    kept = model_ops(m, 8, False)
    other = copy.deepcopy(m)
    assert model_ops(other, 8, False) == kept and model_ops(other, 8, False) is not kept
    dense = load_model("llama-3.1-8b")
    gpu_host._MODEL_OPS[(id(dense), 8, False)] = (m, kept)  # a stale entry under dense's id
    assert model_ops(dense, 8, False) == count_model_ops(dense, 8, False) != kept


def test_model_ops_table_is_bounded():
    gpu_host._MODEL_OPS.clear()
    models = [copy.deepcopy(load_model("llama-3.1-8b")) for _ in range(3)]
    for i in range(gpu_host.MODEL_OPS_KEPT + 5):
        model_ops(models[i % 3], i + 1, False)
    assert len(gpu_host._MODEL_OPS) <= gpu_host.MODEL_OPS_KEPT


def _step_model(name: str, fields: dict, ratio: float):
    return h100_step_model(name, fields, ratio)


@pytest.mark.parametrize(
    ("name", "fields"),
    [("qwen3-235b-a22b", {"ep": 8}), ("llama-3.1-70b", {"tp": 4, "pp": 2})],
)
def test_decode_growth_is_the_two_interpolations(name, fields):
    """``decode_growth(n)`` is ``decode_mean_seconds(n) - decode_seconds(n)`` bit for bit at
    and between the powers of two (one pipeline stage and two)."""
    costs = _step_model(name, fields, 0.0).costs
    for n in (1, 2, 3, 5, 8, 31, 32, 33, 47, 63, 64, 100):
        assert costs.decode_growth(n) == costs.decode_mean_seconds(n) - costs.decode_seconds(n)


def test_straggler_reads_the_growth_or_the_two_figures_alike():
    """The attention-DP straggler from ``decode_growth`` equals the one from the two
    interpolations (step costs without ``decode_growth``), and is positive at drawn lengths."""
    fast = _step_model("qwen3-235b-a22b", {"ep": 8}, 0.8)
    slow = _step_model("qwen3-235b-a22b", {"ep": 8}, 0.8)
    slow._growth = None  # as for step costs that have no one-read form
    assert fast._growth is not None
    values = [fast.straggler_seconds(n) for n in (9, 33, 41, 48, 63, 64, 200)]
    assert values == [slow.straggler_seconds(n) for n in (9, 33, 41, 48, 63, 64, 200)]
    assert all(v > 0 for v in values)
