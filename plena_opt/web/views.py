"""Simulation results → API responses (:mod:`plena_opt.web.schemas`), and the words the page
uses to say why an op waited (one phrase per dependency reason, pipeline-simulator §0.1, §5)."""

from __future__ import annotations

from plena_opt.web import schemas
from plena_opt.web.service import BUBBLE_DEFINITION, SimRun

#: "waited … for F3-C0 on rank 2: <phrase>". Every ``DepReason`` has one (tested).
REASON_TEXT = {
    "RANK_ORDER": "the previous op in this rank's order",
    "FWD_PREV_STAGE": "previous pipeline stage",
    "FWD_PREV_CHUNK_WRAP": "previous virtual chunk on the last rank (chunk wrap)",
    "BWD_NEXT_STAGE": "next pipeline stage's gradient",
    "BWD_NEXT_CHUNK_WRAP": "next virtual chunk's gradient from rank 0 (chunk wrap)",
    "OWN_FWD_ACTIVATION": "its own forward activation",
    "OWN_INPUT_GRAD": "its own input-gradient backward (W after I)",
    "LOSS": "the loss: the last stage's own forward",
    "VE_UNIT_READY": "the vision-encoder forwards of its unit",
    "VE_BWD_AFTER_LLM_RANK0_BWD_UNIT": "the LLM rank-0 backwards of its unit",
    "GEN_FWD_AFTER_LLM_OUTPUT_UNIT": "the LLM output of its unit",
    "GEN_BWD_AFTER_GEN_FWD": "its own generator forward",
    "LLM_LAST_BWD_AFTER_GEN_BWD_UNIT": "the generator backwards of its unit",
    "PREFILL_PREV_STAGE": "previous pipeline stage's prefill",
    "PREFILL_PREV_CHUNK": "the previous prefill chunk (KV cache)",
    "PREFILL_TO_DECODE": "the end of its prefill",
    "DECODE_PREV_STAGE": "previous pipeline stage's decode step",
    "DECODE_TOKEN_FEEDBACK": "the previous token (fed back from the last stage)",
    "COMM_P2P": "the op whose output it sends",
}


def _ops(run: SimRun) -> schemas.OpsOut:
    plan = run.result.plan
    reasons = list(REASON_TEXT)
    rix = {r: i for i, r in enumerate(reasons)}
    deps = [[(d.src, rix[d.reason.value]) for d in ds] for ds in run.result.graph.deps]
    o = plan.ops
    return schemas.OpsOut(
        name=[x.trace_name for x in o],
        label=[x.label for x in o],
        rank=[x.rank for x in o],
        chunk=[x.chunk for x in o],
        microbatch=[x.microbatch for x in o],
        step=[x.step for x in o],
        op_type=[x.op_type for x in o],
        kind=[x.kind.value for x in o],
        component=[x.component.value for x in o],
        lane=["comm" if x.kind.value == "COMM" else "compute" for x in o],
        deps=deps,
        reasons=reasons,
        reason_text=REASON_TEXT,
    )


def _timeline(tl, scale: float) -> schemas.TimelineOut:
    binding = []
    waits = 0
    for t in tl.ops:
        binding.append(t.deps.index(t.binding) if t.binding is not None else -1)
        waits += t.start > t.rank_free_at
    busy = [b * scale for b in tl.rank_busy]
    idle = [i * scale for i in tl.rank_idle]
    return schemas.TimelineOut(
        sample=tl.sample,
        makespan=tl.makespan * scale,
        rank_busy=busy,
        rank_idle=idle,
        rank_bubble_ratio=[i / b if b > 0 else 0.0 for i, b in zip(idle, busy, strict=True)],
        bubble_ratio=tl.bubble_ratio,
        bubble_share=tl.bubble_share,
        critical_path=list(tl.critical_path),
        start=[t.start * scale for t in tl.ops],
        end=[t.end * scale for t in tl.ops],
        ready_at=[t.ready_at * scale for t in tl.ops],
        rank_free_at=[t.rank_free_at * scale for t in tl.ops],
        binding=binding,
        n_waits=int(waits),
    )


def _quantile(metric: str, unit: str, q, scale: float) -> schemas.QuantileOut:
    def ci(pair: tuple[float, float]) -> tuple[float, float]:
        return (pair[0] * scale, pair[1] * scale)

    return schemas.QuantileOut(
        metric=metric,
        unit=unit,
        n=q.n,
        mean=q.mean * scale,
        mean_ci=ci(q.mean_ci),
        p50=q.p50 * scale,
        p50_ci=ci(q.p50_ci),
        p90=q.p90 * scale,
        p90_ci=ci(q.p90_ci),
        p99=q.p99 * scale,
        p99_ci=ci(q.p99_ci),
    )


def simulate_out(run: SimRun, result_id: str) -> schemas.SimulateOut:
    """The page's view of one simulation: ops, the representative timelines and the figures."""
    res = run.result
    mc = None
    if res.mc:
        mc = schemas.MonteCarloOut(
            n_samples=res.mc.n_samples,
            seed=res.mc.seed,
            quantiles=[_quantile(*m) for m in run.metrics],
            criticality_by_type=dict(res.mc.criticality_by_type),
            rank_idle_mean_ms=[x * run.to_ms for x in res.mc.rank_idle_mean],
        )
    return schemas.SimulateOut(
        result_id=result_id,
        mode=run.mode,
        title=run.title,
        pp=res.plan.pp_size,
        vpp=res.plan.vpp_size,
        microbatches=res.plan.microbatches,
        n_ops=res.plan.n_ops,
        simulate_comm=run.simulate_comm,
        durations_ms=run.durations_ms,
        ops=_ops(run),
        timelines={k.split()[0]: _timeline(tl, run.to_ms) for k, tl in res.timelines().items()},
        monte_carlo=mc,
        analytic=run.analytic,
        notes=run.notes,
        bubble_definition=BUBBLE_DEFINITION + "; per rank: idle_r / busy_r",
    )
