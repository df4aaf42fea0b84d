"""Training schedules: GPipe, 1F1B, interleaved 1F1B (VPP) and ZB-H1 (pipeline-simulator §1.2).

The scheduler only emits legal per-rank op orders; the simulator derives the dependencies.
"""

from __future__ import annotations

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.scheduler.ops import OpKind, PipelinePlan, PlanBuilder, check_positive_int


def _check_shape(pp: int, m: int, vpp: int = 1) -> None:
    check_positive_int("pp", pp)
    check_positive_int("microbatches", m)
    check_positive_int("vpp", vpp)


def gpipe(pp: int, microbatches: int) -> PipelinePlan:
    """GPipe (torch ``ScheduleGPipe`` order): all forwards, then backwards in ascending order."""
    _check_shape(pp, microbatches)
    b = PlanBuilder(pp)
    for r in range(pp):
        for i in range(microbatches):
            b.add(r, OpKind.F, i)
        for i in range(microbatches):
            b.add(r, OpKind.B, i)
    return b.build("gpipe", pp, 1, microbatches)


def one_f_one_b(pp: int, microbatches: int) -> PipelinePlan:
    """1F1B: ``w = min(p−1−r, m)`` warm-up forwards, steady (F, B) pairs, cool-down backwards."""
    _check_shape(pp, microbatches)
    m = microbatches
    b = PlanBuilder(pp)
    for r in range(pp):
        w = min(pp - 1 - r, m)
        for i in range(w):
            b.add(r, OpKind.F, i)
        for k in range(m - w):
            b.add(r, OpKind.F, w + k)
            b.add(r, OpKind.B, k)
        for i in range(m - w, m):
            b.add(r, OpKind.B, i)
    return b.build("1f1b", pp, 1, m)


def virtual_slot(k: int, pp: int, vpp: int) -> tuple[int, int]:
    """Forward virtual slot ``k`` → (chunk, micro-batch): ``c = (k mod p·v) div p``,
    ``mb = (k div p·v)·p + k mod p`` (spec §1.2, Megatron order)."""
    group = pp * vpp
    return (k % group) // pp, (k // group) * pp + k % pp


def check_interleaved_shape(field_prefix: str, pp: int, vpp: int, m: int) -> None:
    """Megatron's interleaved schedule needs ``m ≥ p`` and ``m % p == 0``."""
    _check_shape(pp, m, vpp)
    if m < pp or m % pp:
        raise PlenaInputError(
            f"{field_prefix}microbatches",
            f"microbatches ({m}) must be a positive multiple of pp ({pp}) for a VPP schedule",
        )


def interleaved_order(pp: int, vpp: int, m: int, r: int, extra_warmup: int = 0) -> list[tuple]:
    """Interleaved-1F1B order of rank ``r`` as ``(kind, chunk, mb)`` triples.

    Warm-up ``W_r = min(2(p−1−r) + (v−1)·p + extra, m·v)`` forwards (all of them if ``m == p``),
    then alternating ``F(k+W_r)``, ``B(k)``, then the cool-down backwards.
    """
    total = m * vpp
    warm = total if m == pp else min(2 * (pp - 1 - r) + (vpp - 1) * pp + extra_warmup, total)
    order: list[tuple] = []

    def fwd(k: int) -> None:
        c, mb = virtual_slot(k, pp, vpp)
        order.append((OpKind.F, c, mb))

    def bwd(k: int) -> None:
        c, mb = virtual_slot(k, pp, vpp)
        order.append((OpKind.B, vpp - 1 - c, mb))

    for k in range(warm):
        fwd(k)
    for k in range(total - warm):
        fwd(k + warm)
        bwd(k)
    for k in range(total - warm, total):
        bwd(k)
    return order


def interleaved_1f1b(pp: int, vpp: int, microbatches: int) -> PipelinePlan:
    """Interleaved 1F1B (Megatron VPP); chunk ``c`` of rank ``r`` is virtual stage ``c·p + r``."""
    check_interleaved_shape("", pp, vpp, microbatches)
    b = PlanBuilder(pp)
    for r in range(pp):
        for kind, c, mb in interleaved_order(pp, vpp, microbatches, r):
            b.add(r, kind, mb, chunk=c)
    return b.build("interleaved-1f1b", pp, vpp, microbatches)


def zb_h1(pp: int, microbatches: int) -> PipelinePlan:
    """ZB-H1: 1F1B shape with ``B → I``; ``W`` follows an (F, I) pair once ``#F − #W ≥ p−1``
    counted before that pair's F (``≥ p`` after it); cool-down emits (I, W) pairs, then the
    leftover ``W``s (spec §1.2). Makespan ``3m + p − 1`` for F = I = W = 1."""
    _check_shape(pp, microbatches)
    m = microbatches
    b = PlanBuilder(pp)
    for r in range(pp):
        w = min(pp - 1 - r, m)
        nf = ni = nw = 0
        for _ in range(w):
            b.add(r, OpKind.F, nf)
            nf += 1
        while ni < m:
            if nf < m:
                b.add(r, OpKind.F, nf)
                nf += 1
            b.add(r, OpKind.I, ni)
            ni += 1
            if nf == m or nf - nw >= pp:
                b.add(r, OpKind.W, nw)
                nw += 1
        while nw < m:
            b.add(r, OpKind.W, nw)
            nw += 1
    return b.build("zb-h1", pp, 1, m)
