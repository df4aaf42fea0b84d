"""One test per dependency reason (pipeline-simulator §0.1, §5, §7.4), BigMac unit rules on the
pp=4, vpp=2 plan, cycle reports and the scheduler ↛ simulator import rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from plena_opt.simulator.engine import DepReason, PlanCycleError, build_graph, simulate
from plena_opt.simulator.scheduler import (
    Component,
    InferenceStageTimes,
    OpKind,
    PipelinePlan,
    build_schedule,
    serving_window,
)
from plena_opt.simulator.scheduler.ops import PlanBuilder

BIGMAC_DUR = {"F": 0.5, "B": 1.0, "VF": 0.5, "VB": 1.0, "GF": 0.5, "GB": 1.0}


def find(plan: PipelinePlan, kind: OpKind, rank: int, mb: int, chunk: int = 0, comp=None, step=-1):
    comp = comp or Component.LLM
    (op,) = [
        o
        for o in plan.ops
        if o.kind is kind
        and o.rank == rank
        and o.microbatch == mb
        and o.chunk == chunk
        and o.component is comp
        and o.step == step
    ]
    return op.id


def deps_of(plan: PipelinePlan, op_id: int) -> set[tuple[int, DepReason]]:
    return {(d.src, d.reason) for d in build_graph(plan).deps[op_id]}


@pytest.fixture(scope="module")
def vpp_plan() -> PipelinePlan:
    return build_schedule("interleaved-1f1b", 4, 8, 2)


@pytest.fixture(scope="module")
def bigmac() -> PipelinePlan:
    return build_schedule("bigmac-vpp", 4, 8, 2)


def test_reference_check_interleaved(vpp_plan: PipelinePlan) -> None:
    """Spec §1.1: F(r0,c1,mb0) ← F(r3,c0,mb0) wrap + F(r0,c0,mb3) rank order; B(r3,c0,mb0) ←
    B(r0,c1,mb0), F(r3,c0,mb0) and rank order."""
    p = vpp_plan
    f = find(p, OpKind.F, 0, 0, chunk=1)
    deps = deps_of(p, f)
    assert (find(p, OpKind.F, 3, 0, chunk=0), DepReason.FWD_PREV_CHUNK_WRAP) in deps
    assert (find(p, OpKind.F, 0, 3, chunk=0), DepReason.RANK_ORDER) in deps
    b = find(p, OpKind.B, 3, 0, chunk=0)
    deps = deps_of(p, b)
    assert (find(p, OpKind.B, 0, 0, chunk=1), DepReason.BWD_NEXT_CHUNK_WRAP) in deps
    assert (find(p, OpKind.F, 3, 0, chunk=0), DepReason.OWN_FWD_ACTIVATION) in deps
    assert DepReason.RANK_ORDER in {r for _, r in deps}
    # binding dependency with F=1, B=2 per chunk: the wrap (tie with rank order goes to data)
    res = simulate(p, {"F": 1.0, "B": 2.0})
    bind = res.deterministic.ops[f].binding
    assert (bind.src, bind.reason) == (find(p, OpKind.F, 3, 0), DepReason.FWD_PREV_CHUNK_WRAP)


def _binding(plan: PipelinePlan, dur: dict, op_id: int) -> tuple[int, DepReason]:
    b = simulate(plan, dur).deterministic.ops[op_id].binding
    return (b.src, b.reason)


def test_rank_order_binding() -> None:
    p = build_schedule("1f1b", 4, 8)
    op = find(p, OpKind.F, 0, 1)
    assert _binding(p, {"F": 1, "B": 2}, op) == (find(p, OpKind.F, 0, 0), DepReason.RANK_ORDER)


def test_fwd_prev_stage_binding() -> None:
    p = build_schedule("gpipe", 4, 8)
    op = find(p, OpKind.F, 2, 0)
    assert _binding(p, {"F": 1, "B": 2}, op) == (find(p, OpKind.F, 1, 0), DepReason.FWD_PREV_STAGE)


def test_bwd_next_stage_binding() -> None:
    p = build_schedule("1f1b", 4, 8)
    op = find(p, OpKind.B, 1, 0)
    assert _binding(p, {"F": 1, "B": 2}, op) == (find(p, OpKind.B, 2, 0), DepReason.BWD_NEXT_STAGE)


def _slow(plan: PipelinePlan, dur: dict, slow: int, factor: float = 50.0) -> list[float]:
    base = [float(dur[o.op_type]) for o in plan.ops]
    base[slow] *= factor
    return base


def test_bwd_next_chunk_wrap_binding(vpp_plan: PipelinePlan) -> None:
    op = find(vpp_plan, OpKind.B, 3, 0, chunk=0)
    src = find(vpp_plan, OpKind.B, 0, 0, chunk=1)
    b = simulate(vpp_plan, _slow(vpp_plan, {"F": 1, "B": 2}, src)).deterministic.ops[op].binding
    assert (b.src, b.reason) == (src, DepReason.BWD_NEXT_CHUNK_WRAP)


def test_own_fwd_activation_binding() -> None:
    # a huge forward on rank 1 makes the activation, not the gradient, the binding dependency
    p = build_schedule("gpipe", 2, 1)
    base = [1.0] * p.n_ops
    f1 = find(p, OpKind.F, 0, 0)
    base[f1] = 100.0
    res = simulate(p, base)
    op = find(p, OpKind.B, 0, 0)
    b = res.deterministic.ops[op].binding
    assert (b.src, b.reason) == (find(p, OpKind.B, 1, 0), DepReason.BWD_NEXT_STAGE)
    assert (f1, DepReason.OWN_FWD_ACTIVATION) in deps_of(p, op)
    p2 = build_schedule("gpipe", 2, 2)  # rank 0 runs F0 F1 B0 B1: B0's activation F0 is older
    assert (find(p2, OpKind.F, 0, 0), DepReason.OWN_FWD_ACTIVATION) in deps_of(
        p2, find(p2, OpKind.B, 0, 0)
    )


def test_loss_binding() -> None:
    p = build_schedule("1f1b", 4, 8)
    op = find(p, OpKind.B, 3, 0)
    assert _binding(p, {"F": 1, "B": 2}, op) == (find(p, OpKind.F, 3, 0), DepReason.LOSS)
    assert all(r is not DepReason.OWN_FWD_ACTIVATION for _, r in deps_of(p, op))


def test_own_input_grad_binding() -> None:
    p = build_schedule("zb-h1", 4, 8)
    dur = {"F": 1, "I": 1, "W": 1}
    # rank 0 runs F0 F1 F2 F3 I0 W0: W0's own input gradient is also its rank predecessor
    op = find(p, OpKind.W, 0, 0)
    assert _binding(p, dur, op) == (find(p, OpKind.I, 0, 0), DepReason.OWN_INPUT_GRAD)
    op3 = find(p, OpKind.W, 3, 0)
    assert (find(p, OpKind.I, 3, 0), DepReason.OWN_INPUT_GRAD) in deps_of(p, op3)
    # I(s) ← I(s+1) uses the backward-stage reason
    i1 = find(p, OpKind.I, 1, 0)
    assert _binding(p, dur, i1) == (find(p, OpKind.I, 2, 0), DepReason.BWD_NEXT_STAGE)


# --- BigMac unit rules on the pp_size=4, vpp_size=2 UnifiedBigMacVPP plan (spec §0.1 rules 5–9) ---


def test_bigmac_plan_is_acyclic_with_sensible_waits(bigmac: PipelinePlan) -> None:
    res = simulate(bigmac, BIGMAC_DUR)
    det = res.deterministic
    assert all(t.wait >= 0 for t in det.ops)
    total = sum(det.rank_busy)
    # one rank's whole work is a lower bound; the plan keeps ranks busy most of the time
    assert max(det.rank_busy) <= det.makespan < 1.6 * total / bigmac.pp_size


def test_ve_unit_ready(bigmac: PipelinePlan) -> None:
    op = find(bigmac, OpKind.F, 0, 5, chunk=0)  # unit 1 = mbs 4..7, VE F on ranks 0..3
    deps = deps_of(bigmac, op)
    ve = {find(bigmac, OpKind.F, mb % 4, mb, comp=Component.VE) for mb in range(4, 8)}
    assert {s for s, r in deps if r is DepReason.VE_UNIT_READY} == ve
    # unit 0: F(r0,c0,mb0) waits for the VE forwards of mbs 0..3; a slow one on rank 2 binds
    op0 = find(bigmac, OpKind.F, 0, 0, chunk=0)
    slow = find(bigmac, OpKind.F, 2, 2, comp=Component.VE)
    b = simulate(bigmac, _slow(bigmac, BIGMAC_DUR, slow)).deterministic.ops[op0].binding
    assert (b.src, b.reason) == (slow, DepReason.VE_UNIT_READY)
    first = find(bigmac, OpKind.F, 0, 0, comp=Component.VE)  # equal durations: first of the tie
    assert _binding(bigmac, BIGMAC_DUR, op0) == (first, DepReason.VE_UNIT_READY)


def test_ve_bwd_after_llm_rank0_bwd_unit(bigmac: PipelinePlan) -> None:
    op = find(bigmac, OpKind.B, 2, 2, comp=Component.VE)
    deps = deps_of(bigmac, op)
    llm = {find(bigmac, OpKind.B, 0, mb, chunk=0) for mb in range(4)}
    assert {s for s, r in deps if r is DepReason.VE_BWD_AFTER_LLM_RANK0_BWD_UNIT} == llm
    b = simulate(bigmac, BIGMAC_DUR).deterministic.ops[op].binding
    assert (b.src, b.reason) in {(s, DepReason.VE_BWD_AFTER_LLM_RANK0_BWD_UNIT) for s in llm} | {
        (s, DepReason.RANK_ORDER) for s in range(bigmac.n_ops)
    }


def test_gen_fwd_after_llm_output_unit(bigmac: PipelinePlan) -> None:
    op = find(bigmac, OpKind.F, 1, 1, comp=Component.GEN)
    out = {find(bigmac, OpKind.F, 3, mb, chunk=1) for mb in range(4)}
    deps = deps_of(bigmac, op)
    assert {s for s, r in deps if r is DepReason.GEN_FWD_AFTER_LLM_OUTPUT_UNIT} == out
    b = simulate(bigmac, BIGMAC_DUR).deterministic.ops[op].binding
    assert (b.src, b.reason) == (
        find(bigmac, OpKind.F, 3, 3, chunk=1),
        DepReason.GEN_FWD_AFTER_LLM_OUTPUT_UNIT,
    )


def test_gen_bwd_after_gen_fwd_only(bigmac: PipelinePlan) -> None:
    op = find(bigmac, OpKind.B, 2, 6, comp=Component.GEN)
    gf = find(bigmac, OpKind.F, 2, 6, comp=Component.GEN)
    deps = deps_of(bigmac, op)
    assert deps == {(gf, DepReason.GEN_BWD_AFTER_GEN_FWD)}  # also the rank predecessor
    assert _binding(bigmac, BIGMAC_DUR, op) == (gf, DepReason.GEN_BWD_AFTER_GEN_FWD)


def test_llm_last_bwd_after_gen_bwd_unit_replaces_loss(bigmac: PipelinePlan) -> None:
    op = find(bigmac, OpKind.B, 3, 4, chunk=1)
    deps = deps_of(bigmac, op)
    gb = {find(bigmac, OpKind.B, mb % 4, mb, comp=Component.GEN) for mb in range(4, 8)}
    assert {s for s, r in deps if r is DepReason.LLM_LAST_BWD_AFTER_GEN_BWD_UNIT} == gb
    assert all(r not in (DepReason.LOSS, DepReason.OWN_FWD_ACTIVATION) for _, r in deps)
    # rank 3 runs ... GF7 GB7 B3-C0 B4-C1: a slow generator backward on rank 1 (mb 5) binds
    slow = find(bigmac, OpKind.B, 1, 5, comp=Component.GEN)
    b = simulate(bigmac, _slow(bigmac, BIGMAC_DUR, slow)).deterministic.ops[op].binding
    assert (b.src, b.reason) == (slow, DepReason.LLM_LAST_BWD_AFTER_GEN_BWD_UNIT)


def test_bigmac_other_llm_edges_unchanged(bigmac: PipelinePlan) -> None:
    op = find(bigmac, OpKind.B, 2, 0, chunk=1)
    deps = deps_of(bigmac, op)
    assert (find(bigmac, OpKind.B, 3, 0, chunk=1), DepReason.BWD_NEXT_STAGE) in deps
    assert (find(bigmac, OpKind.F, 2, 0, chunk=1), DepReason.OWN_FWD_ACTIVATION) in deps


# --- inference reasons (spec §1.4) ---

TIMES = InferenceStageTimes(
    prefill_stage_seconds=(4.0, 3.0, 5.0),
    prefill_transfer_seconds=0.5,
    decode_stage_seconds=(1.0, 2.0, 1.5),
    decode_transfer_seconds=0.25,
    micro_batches=3,
    decode_steps=3,
    tokens_per_micro_batch=4,
)


def test_inference_reasons() -> None:
    plan = serving_window(TIMES, prefill_chunks=2)
    dur = TIMES.durations(prefill_chunks=2)
    g = build_graph(plan)
    det = simulate(plan, dur).deterministic

    def has(op: int, src: int, reason: DepReason) -> None:
        assert (src, reason) in {(d.src, d.reason) for d in g.deps[op]}

    x = find(plan, OpKind.COMM, 0, 1, chunk=1)
    has(find(plan, OpKind.P, 1, 1, chunk=1), x, DepReason.PREFILL_PREV_STAGE)
    has(x, find(plan, OpKind.P, 0, 1, chunk=1), DepReason.COMM_P2P)
    has(
        find(plan, OpKind.P, 1, 1, chunk=1),
        find(plan, OpKind.P, 1, 1, chunk=0),
        DepReason.PREFILL_PREV_CHUNK,
    )
    d0 = find(plan, OpKind.D, 0, 0, step=0)
    has(d0, find(plan, OpKind.P, 2, 0, chunk=1), DepReason.PREFILL_TO_DECODE)
    d1 = find(plan, OpKind.D, 1, 2, step=1)
    has(d1, find(plan, OpKind.COMM, 0, 2, step=1), DepReason.DECODE_PREV_STAGE)
    fb = find(plan, OpKind.D, 0, 1, step=2)
    src = find(plan, OpKind.COMM, 2, 1, step=1)
    has(fb, src, DepReason.DECODE_TOKEN_FEEDBACK)
    # binding on the slow stage 1 → stage 2 hop in prefill
    p2 = find(plan, OpKind.P, 2, 0, chunk=0)
    b = det.ops[p2].binding
    assert (b.src, b.reason) == (
        find(plan, OpKind.COMM, 1, 0, chunk=0),
        DepReason.PREFILL_PREV_STAGE,
    )
    b = det.ops[fb].binding
    assert (b.src, b.reason) in {(src, DepReason.DECODE_TOKEN_FEEDBACK)} | {
        (s, DepReason.RANK_ORDER) for s in plan.ranks[0]
    }
    # the isolated request's first decode binds to its prefill through PREFILL_TO_DECODE
    iso = serving_window(TIMES, micro_batches=1, decode_steps=1)
    iso_d0 = find(iso, OpKind.D, 0, 0, step=0)
    assert _binding(iso, TIMES.durations(), iso_d0) == (
        find(iso, OpKind.P, 2, 0),
        DepReason.PREFILL_TO_DECODE,
    )


def test_every_reason_has_a_test_here() -> None:
    source = Path(__file__).read_text()
    missing = [r.value for r in DepReason if f"DepReason.{r.value}" not in source]
    assert not missing


# --- cycles ---


def test_cyclic_plan_reports_reasons_along_the_cycle() -> None:
    b = PlanBuilder(2)
    b.add(0, OpKind.F, 0)
    b.add(1, OpKind.B, 0)  # rank 1 runs B0 before F0: B0 needs F0 (LOSS), F0 follows B0
    b.add(1, OpKind.F, 0)
    b.add(0, OpKind.B, 0)
    plan = b.build("bad", 2, 1, 1)
    with pytest.raises(PlanCycleError) as exc:
        build_graph(plan)
    reasons = {d.reason for d in exc.value.cycle}
    assert reasons == {DepReason.LOSS, DepReason.RANK_ORDER}
    assert exc.value.field == "plan"
    assert "rank1/B/chunk_a/mb0 waits for rank1/F/chunk_a/mb0 (LOSS)" in str(exc.value)
    assert "rank1/F/chunk_a/mb0 waits for rank1/B/chunk_a/mb0 (RANK_ORDER)" in str(exc.value)


def test_cross_rank_cycle() -> None:
    b = PlanBuilder(2)
    b.add(0, OpKind.B, 0)  # rank 0 backward before its forward: waits for rank 1's B
    b.add(0, OpKind.F, 0)
    b.add(1, OpKind.F, 0)
    b.add(1, OpKind.B, 0)
    with pytest.raises(PlanCycleError) as exc:
        build_graph(b.build("bad", 2, 1, 1))
    reasons = [d.reason for d in exc.value.cycle]
    assert DepReason.FWD_PREV_STAGE in reasons and DepReason.BWD_NEXT_STAGE in reasons


def test_scheduler_never_imports_simulator() -> None:
    root = Path(__file__).resolve().parents[2] / "plena_opt" / "simulator" / "scheduler"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                )
                engine = [
                    n
                    for n in names
                    if n in ("plena_opt.simulator", "plena_opt.simulator.engine")
                    or n.startswith("plena_opt.simulator.engine.")
                    or "engine" in n.split(".")
                ]
                assert engine == [], path
