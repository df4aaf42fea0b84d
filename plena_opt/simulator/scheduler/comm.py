"""The ``simulate_comm`` switch (pipeline-simulator §0 rule 4): pipeline hops as explicit ``COMM``
ops, or none at all.

* :func:`without_comm` drops every ``COMM`` op from a plan (the rank orders keep the other ops in
  their order); the consumers of a dropped hop then wait for its producer directly.
* :func:`with_training_p2p` adds the point-to-point sends of a training schedule: after every LLM
  forward that feeds another rank (``F(r, c)`` for ``r < p−1``, and the chunk wrap
  ``F(p−1, c)`` for ``c < v−1``) an ``XF`` op (activations), and after every LLM backward
  ``B``/``I`` that feeds another rank (``r > 0``, and the wrap ``B(0, c)`` for ``c > 0``) an ``XB``
  op (input gradients). A send is placed in the *sending* rank's order right after its producer,
  so the rank is busy while it sends: the same model as the serving windows' ``XP``/``XD`` hops
  (:mod:`~plena_opt.simulator.scheduler.inference`), where the analytic ``period = max_stage + X``
  assumes the hop is not overlapped with compute. The UI and the trace draw ``COMM`` ops on the
  rank's comm lane. Vision-encoder and generator edges of ``bigmac-vpp`` get no send ops (their
  placement is the product's own unit rule, §0.1; no transfer size is specified for them).
"""

from __future__ import annotations

from plena_opt.simulator.scheduler.ops import Component, OpKind, PipelinePlan, make_op

#: Duration keys of the training sends added by :func:`with_training_p2p`.
TRAINING_COMM_OP_TYPES = ("XF", "XB")


def _rebuild(
    plan: PipelinePlan, orders: list[list[tuple]], name_meta: dict[str, str]
) -> PipelinePlan:
    """A new plan from per-rank lists of ``("op", old op)`` / ``("new", kwargs)`` entries."""
    ops = []
    ranks: list[tuple[int, ...]] = []
    for order in orders:
        ids = []
        for what, item in order:
            new_id = len(ops)
            if what == "op":
                o = item
                op = make_op(
                    new_id,
                    o.rank,
                    o.kind,
                    o.microbatch,
                    chunk=o.chunk,
                    component=o.component,
                    step=o.step,
                    op_type=o.op_type,
                    code=o.code,
                )
            else:
                op = make_op(new_id, **item)
            ops.append(op)
            ids.append(new_id)
        ranks.append(tuple(ids))
    meta = dict(plan.meta)
    meta.update(name_meta)
    return PipelinePlan(
        schedule_name=plan.schedule_name,
        pp_size=plan.pp_size,
        vpp_size=plan.vpp_size,
        microbatches=plan.microbatches,
        ops=tuple(ops),
        ranks=tuple(ranks),
        meta=tuple(sorted(meta.items())),
    )


def has_comm(plan: PipelinePlan) -> bool:
    """Whether the plan has explicit communication ops."""
    return any(o.kind is OpKind.COMM for o in plan.ops)


def without_comm(plan: PipelinePlan) -> PipelinePlan:
    """``plan`` without its ``COMM`` ops (the same plan object when it has none)."""
    if not has_comm(plan):
        return plan
    orders = [
        [("op", plan.ops[j]) for j in order if plan.ops[j].kind is not OpKind.COMM]
        for order in plan.ranks
    ]
    return _rebuild(plan, orders, {"simulate_comm": "false"})


def _sends_to_other_rank(plan: PipelinePlan, kind: OpKind, rank: int, chunk: int) -> bool:
    p, v = plan.pp_size, plan.vpp_size
    if kind is OpKind.F:
        return rank < p - 1 or chunk < v - 1
    if kind in (OpKind.B, OpKind.I):
        return rank > 0 or chunk > 0
    return False


def with_training_p2p(plan: PipelinePlan) -> PipelinePlan:
    """``plan`` (a training schedule) with an ``XF``/``XB`` send after each LLM op that feeds
    another rank; a plan that already has ``COMM`` ops is returned unchanged."""
    if has_comm(plan):
        return plan
    orders: list[list[tuple]] = []
    for order in plan.ranks:
        out: list[tuple] = []
        for j in order:
            o = plan.ops[j]
            out.append(("op", o))
            if o.component is Component.LLM and _sends_to_other_rank(plan, o.kind, o.rank, o.chunk):
                code = "XF" if o.kind is OpKind.F else "XB"
                kw = dict(rank=o.rank, kind=OpKind.COMM, mb=o.microbatch, chunk=o.chunk, code=code)
                out.append(("new", {**kw, "op_type": code}))
        orders.append(out)
    return _rebuild(plan, orders, {"simulate_comm": "true"})


def apply_comm(plan: PipelinePlan, simulate_comm: bool) -> PipelinePlan:
    """The switch: training plans get their sends when ``simulate_comm``; every plan loses its
    ``COMM`` ops when not. Serving windows already carry their hops (``XP``/``XD``)."""
    if not simulate_comm:
        return without_comm(plan)
    if plan.schedule_name in ("serving-window", "decode-window"):
        return plan
    return with_training_p2p(plan)
