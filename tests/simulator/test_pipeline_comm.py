"""The ``simulate_comm`` switch (pipeline-simulator §0 rule 4): explicit sends on a comm lane, or
no communication ops at all."""

from __future__ import annotations

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.simulator import InferenceStageTimes, build_schedule, serving_window, simulate
from plena_opt.simulator.engine import (
    DepReason,
    check_schedule_durations,
    derive_dependencies,
    per_op_durations,
    simulate_serving,
)
from plena_opt.simulator.scheduler import (
    OpKind,
    apply_comm,
    schedule_op_types,
    with_training_p2p,
    without_comm,
)


def _op(plan, code, rank, mb, chunk=0, step=-1):
    return next(
        o
        for o in plan.ops
        if o.code == code
        and o.rank == rank
        and o.microbatch == mb
        and o.chunk == chunk
        and o.step == step
    )


def _deps(plan, op):
    return {(d.src, d.reason) for d in derive_dependencies(plan)[op.id]}


def test_1f1b_sends_and_their_reasons() -> None:
    plan = build_schedule("1f1b", 4, 8, simulate_comm=True)
    comm = [o for o in plan.ops if o.kind is OpKind.COMM]
    assert len(comm) == 2 * 3 * 8 and {o.lane for o in comm} == {"comm"}
    assert {o.code for o in comm if o.rank == 3} == {"XB"}
    assert {o.code for o in comm if o.rank == 0} == {"XF"}
    f1, xf0 = _op(plan, "F", 1, 2), _op(plan, "XF", 0, 2)
    assert (xf0.id, DepReason.FWD_PREV_STAGE) in _deps(plan, f1)
    assert (_op(plan, "F", 0, 2).id, DepReason.COMM_P2P) in _deps(plan, xf0)
    b1, xb2 = _op(plan, "B", 1, 5), _op(plan, "XB", 2, 5)
    assert (xb2.id, DepReason.BWD_NEXT_STAGE) in _deps(plan, b1)
    assert (_op(plan, "B", 2, 5).id, DepReason.COMM_P2P) in _deps(plan, xb2)
    # a send sits right after its producer in the sender's order
    order = plan.ranks[0]
    assert order[order.index(_op(plan, "F", 0, 2).id) + 1] == xf0.id


def test_interleaved_chunk_wrap_goes_through_the_send() -> None:
    plan = build_schedule("interleaved-1f1b", 4, 8, 2, simulate_comm=True)
    f = _op(plan, "F", 0, 0, chunk=1)
    assert (_op(plan, "XF", 3, 0, chunk=0).id, DepReason.FWD_PREV_CHUNK_WRAP) in _deps(plan, f)
    b = _op(plan, "B", 3, 0, chunk=0)
    assert (_op(plan, "XB", 0, 0, chunk=1).id, DepReason.BWD_NEXT_CHUNK_WRAP) in _deps(plan, b)
    # the last virtual stage sends no activation, the first sends no gradient
    codes = {(o.code, o.rank, o.chunk) for o in plan.ops if o.kind is OpKind.COMM}
    assert ("XF", 3, 1) not in codes and ("XB", 0, 0) not in codes


def test_zero_bubble_sends_the_input_gradient() -> None:
    plan = build_schedule("zb-h1", 3, 6, simulate_comm=True)
    xb = _op(plan, "XB", 2, 1)
    assert (_op(plan, "I", 2, 1).id, DepReason.COMM_P2P) in _deps(plan, xb)
    assert (xb.id, DepReason.BWD_NEXT_STAGE) in _deps(plan, _op(plan, "I", 1, 1))


@pytest.mark.parametrize(
    ("name", "pp", "m", "vpp", "base"),
    [
        ("gpipe", 4, 6, 1, {"F": 1.0, "B": 2.0}),
        ("1f1b", 4, 8, 1, {"F": 1.0, "B": 2.0}),
        ("interleaved-1f1b", 4, 8, 2, {"F": 1.0, "B": 2.0}),
        ("zb-h1", 4, 8, 1, {"F": 1.0, "I": 1.0, "W": 1.0}),
        ("bigmac-vpp", 4, 8, 2, {"F": 1, "B": 2, "VF": 0.5, "VB": 1, "GF": 0.5, "GB": 1}),
    ],
)
def test_free_sends_change_nothing_and_costly_ones_add_time(name, pp, m, vpp, base) -> None:
    plain = build_schedule(name, pp, m, vpp)
    comm = build_schedule(name, pp, m, vpp, simulate_comm=True)
    fp = comm.fingerprint()
    ref = simulate(plain, per_op_durations(plain, base)).makespan
    free = simulate(comm, per_op_durations(comm, {**base, "XF": 0.0, "XB": 0.0})).makespan
    assert free == pytest.approx(ref, rel=1e-12)
    costly = simulate(comm, per_op_durations(comm, {**base, "XF": 0.25, "XB": 0.25}))
    assert costly.makespan > ref
    # the switch off filters the sends out: the same timeline as the plan without them
    off = simulate(
        comm, per_op_durations(comm, {**base, "XF": 9.0, "XB": 9.0}), simulate_comm=False
    )
    assert off.makespan == pytest.approx(ref, rel=1e-12)
    assert sorted(o.trace_name for o in off.plan.ops) == sorted(o.trace_name for o in plain.ops)
    assert comm.fingerprint() == fp  # the given plan is never modified


def test_sends_are_whole_transfers_under_vpp() -> None:
    plan = build_schedule("interleaved-1f1b", 2, 4, 2, simulate_comm=True)
    d = per_op_durations(plan, {"F": 1.0, "B": 2.0, "XF": 0.3, "XB": 0.4})
    assert d == {"F": 0.5, "B": 1.0, "XF": 0.3, "XB": 0.4}


def test_op_types_and_duration_keys() -> None:
    assert schedule_op_types("1f1b") == ("F", "B")
    assert schedule_op_types("1f1b", True) == ("F", "B", "XF", "XB")
    with pytest.raises(PlenaInputError) as err:
        check_schedule_durations("1f1b", {"F": 1, "B": 2, "XF": 1})
    assert err.value.field == "durations.XF"
    assert check_schedule_durations("1f1b", {"F": 1, "B": 2, "XF": 1}, simulate_comm=True)


def test_single_rank_has_nothing_to_send() -> None:
    plan = build_schedule("1f1b", 1, 4, simulate_comm=True)
    assert not any(o.kind is OpKind.COMM for o in plan.ops)


def test_serving_switch() -> None:
    times = InferenceStageTimes((1.0, 1.0), 0.1, (0.5, 0.5), 0.05, 2, 3, 4)
    win = serving_window(times)
    assert apply_comm(win, True) is win
    off = without_comm(win)
    assert not any(o.kind is OpKind.COMM for o in off.ops)
    d1 = _op(off, "D", 1, 0, step=1)
    assert (_op(off, "D", 0, 0, step=1).id, DepReason.DECODE_PREV_STAGE) in _deps(off, d1)
    on = simulate_serving(times)
    res = simulate_serving(times, simulate_comm=False)
    assert res.period_deterministic == pytest.approx(on.period_deterministic - 0.05)
    assert any("communication not simulated" in c for c in res.causes)
    # probes of a filtered plan follow the kept ops
    probe = _op(win, "D", 1, 1, step=2).id
    sim = simulate(win, times.durations(), probes={"x": probe}, samples=4, simulate_comm=False)
    assert sim.mc.probe_ends["x"][0] == pytest.approx(
        next(t.end for t in sim.deterministic.ops if t.op.trace_name == "rank1/D/chunk_a/mb1/step2")
    )
    with pytest.raises(PlenaInputError):
        xd = _op(win, "XD", 0, 0, step=0).id
        simulate(win, times.durations(), probes={"x": xd}, samples=2, simulate_comm=False)


def test_with_training_p2p_keeps_a_plan_that_has_comm() -> None:
    plan = build_schedule("1f1b", 2, 2, simulate_comm=True)
    assert with_training_p2p(plan) is plan
