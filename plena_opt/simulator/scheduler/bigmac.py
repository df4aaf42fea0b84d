"""Unified BigMac-style VPP schedule: vision encoder (VE), LLM and generator (GEN) ops.

Unit ``u`` = micro-batches ``[u·p, (u+1)·p)`` (pipeline-simulator §0.1, §5). The LLM part is
interleaved 1F1B with one extra unit of warm-up, so the last rank finishes a unit's forwards before
its first backward (the generator gates that backward). VE and GEN ops of micro-batch ``mb`` run on
rank ``mb mod p``, placed in each rank's order as follows:

* VE forwards of unit ``u``: right after the rank's first LLM forward of unit ``u−1`` (unit 0: at
  the start);
* GEN forward + backward of unit ``u``: right after both the rank's last LLM forward of unit ``u``
  and its last LLM backward of unit ``u−1`` on a chunk ≥ 1 (the last rank's forwards of unit ``u``
  wait for those through the chunk wrap, so an earlier slot deadlocks);
* VE backwards of unit ``u``: right after the rank's last LLM backward of unit ``u+1`` (the last
  unit's at the end; nothing depends on a VE backward, and an earlier slot deadlocks once rank 0
  runs a unit behind).

The unit rules are the product's own specification (not confirmed against the BigMac paper).
"""

from __future__ import annotations

from plena_opt.simulator.scheduler.ops import Component, OpKind, PipelinePlan, PlanBuilder
from plena_opt.simulator.scheduler.training import check_interleaved_shape, interleaved_order


def unified_bigmac_vpp(pp: int, vpp: int, microbatches: int) -> PipelinePlan:
    """Per-rank orders of the unified VE + LLM + GEN schedule (``m`` a multiple of ``pp``)."""
    check_interleaved_shape("", pp, vpp, microbatches)
    m = microbatches
    b = PlanBuilder(pp)
    for r in range(pp):
        llm = interleaved_order(pp, vpp, m, r, extra_warmup=pp)
        first_f: dict[int, int] = {}
        last_f: dict[int, int] = {}
        last_b: dict[int, int] = {}
        last_b_hi: dict[int, int] = {}
        for pos, (kind, c, mb) in enumerate(llm):
            u = mb // pp
            if kind is OpKind.F:
                first_f.setdefault(u, pos)
                last_f[u] = pos
            else:
                last_b[u] = pos
                if c >= 1:
                    last_b_hi[u] = pos
        units = m // pp
        before: dict[int, list[tuple]] = {}
        after: dict[int, list[tuple]] = {}
        for u in range(units):
            mb = u * pp + r
            if u == 0:
                before.setdefault(first_f[0], []).append((Component.VE, OpKind.F, mb))
            else:
                after.setdefault(first_f[u - 1], []).append((Component.VE, OpKind.F, mb))
            gen_at = max(last_f[u], last_b_hi.get(u - 1, -1))
            after.setdefault(gen_at, []).extend(
                [(Component.GEN, OpKind.F, mb), (Component.GEN, OpKind.B, mb)]
            )
            ve_b_at = last_b[min(u + 1, units - 1)]
            after.setdefault(ve_b_at, []).append((Component.VE, OpKind.B, mb))
        for pos, (kind, c, mb) in enumerate(llm):
            for comp, k, x in before.get(pos, []):
                b.add(r, k, x, component=comp)
            b.add(r, kind, mb, chunk=c)
            for comp, k, x in after.get(pos, []):
                b.add(r, k, x, component=comp)
    return b.build("bigmac-vpp", pp, vpp, m)
