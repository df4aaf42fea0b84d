"""Disaggregated deployments of a cluster priced under load, for ``search --serving`` with a
workload (issue 23; the use case is ``api.serving_loaded.compare_under_load``).

The space is the static comparison's (``search.serving.disaggregated``): a prefill worker plan
on ``n_p`` devices × a decode worker plan on ``n_d`` devices × worker counts ``x``P``y``D, pool
sizes the powers of two below the cluster's ``N`` devices that form a sub-cluster. Under load
the same ``C`` clients (or the same Poisson ``λ``) are served in both modes, and the aggregated
plans run on all ``N`` devices, so a deployment fills the cluster: ``x·n_p + y·n_d = N`` (one
carrying the whole load on fewer devices would compare a heavier load per device). Each
deployment is priced by ``serving.disaggregated.disaggregated_under_load`` (prefill queue over
the pool, KV transfer on the network model, decode pool batch; TTFT includes the queue) with
``engine``'s scheduler, both pools in one format.

Workers: legal plans of the pool size with ``dp = pp = cp = 1`` (a worker with ``dp`` replicas
is ``dp`` workers, which the counts cover; ``pp`` and ``cp`` workers are listed as not priced,
with the reason). A worker must hold its requests' KV. vLLM and SGLang (whose admission is
priced, ``serving.kv_admission``): a worker's running cap is at most the requests its KV pool
holds at ``memory_fraction`` (the setting the launch files write, ``api.running_cap``), a worker
whose pool holds none is not listed, and the decode requests beyond the cap wait for a slot
(``serving.disaggregated``: in TTFT), as those engines queue them. TensorRT-LLM (admission not
priced): the decode worker must hold ``⌈C / y⌉`` requests (closed loop) or its steady batch
rounded up (Poisson) within the plan's KV-capacity bound (``estimate.capacity``,
``memory_fraction`` of device memory), else the deployment is listed as not priced. For a
prefill pool only the prompt's service time matters (the transfer depends on device counts), so
each pool size keeps its fastest prefill worker (exact, not a heuristic). A closed loop never
gives a pool more workers than clients. At most ``MAX_LOADED_DEPLOYMENTS`` deployments are
priced, in a fixed order (the rest are counted as not priced). Seconds, tokens/s.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from plena_opt.errors import PlenaInputError

# Deployments one comparison prices at most (each ~5-15 ms on one core: a bound on its time).
MAX_LOADED_DEPLOYMENTS = 4096
PP_REFUSED = (
    "a disaggregated pool worker with pipeline stages is not priced under load (the pool "
    "model runs one engine step per worker)"
)
CP_REFUSED = (
    "a disaggregated pool worker with context parallelism is not priced under load (context "
    "parallelism is not modelled)"
)
KV_SHORT = (
    "a TensorRT-LLM decode worker cannot hold the KV of its requests (closed loop: ⌈C / decode "
    "workers⌉; Poisson: its steady batch) within the memory fraction; its KV admission is not "
    "priced (serving.kv_admission), so the requests beyond are not queued"
)
QUANTILE_INDEX = {"p50": 0, "p90": 1, "p99": 2}


@dataclass(frozen=True)
class LoadedWorker:
    """One pool worker: its plan and format, step model (its engine's running cap: the KV
    pool's where priced), prefill service (s), KV capacity checked before pricing (None: none,
    the running cap queues the requests beyond)."""

    plan: Any
    precision: str | None
    step: Any
    service_seconds: float
    max_batch: int | None


@dataclass
class LoadedDisaggSpace:
    """The workers of one problem and workload, and the deployments priced from them."""

    problem: Any
    engine: Any  # serving.engines.EngineModel
    concurrency: int | None
    request_rate: float | None
    range_ratio: float
    percentile: str
    sla: dict[str, Any]
    memory_fraction: float
    stop: Any = None  # a ``plena_opt.stop.StopToken`` polled per worker and per deployment
    not_priced: Counter = field(default_factory=Counter)  # reason -> plans or deployments
    stop_reason: str = ""

    def stopped(self) -> bool:
        """Whether the stop token is set (its reason kept in ``stop_reason``)."""
        if self.stop is not None and not self.stop_reason and self.stop.is_set():
            self.stop_reason = self.stop.reason or "cancelled"
        return bool(self.stop_reason)

    def pool_sizes(self) -> list[int]:
        """Powers of two below the cluster's device count that form a sub-cluster."""
        from plena_opt.estimate.disaggregated import sub_noc

        n, out, p = self.problem.noc.num_devices, [], 1
        while p < n:
            try:
                sub_noc(self.problem.noc, p)
                out.append(p)
            except PlenaInputError:
                pass
            p *= 2
        return out

    def workers(self, size: int, precision: str | None, evs: dict) -> list[LoadedWorker]:
        """The workers of one pool size and format that hold one request (module docstring)."""
        from plena_opt.estimate import Evaluator
        from plena_opt.estimate.capacity import capacity_bound
        from plena_opt.estimate.context import EstimateContext
        from plena_opt.estimate.disaggregated import sub_noc
        from plena_opt.estimate.distributed import PlanCost
        from plena_opt.serving.disaggregated import prefill_service_seconds
        from plena_opt.serving.kv_admission import KV_CAPPED_ENGINES, kv_cap
        from plena_opt.serving.steps import StepModel

        p = self.problem
        sub = sub_noc(p.noc, size)
        wl = p.with_batch(1).workload
        wl = wl if precision is None else replace(wl, precision=precision)
        out = []
        for plan in Evaluator(p.model, sub, p.memory, wl, chip=p.chip).legal_plans():
            if self.stopped():
                break
            if plan.cp != 1 or plan.pp != 1:
                self.not_priced[CP_REFUSED if plan.cp != 1 else PP_REFUSED] += 1
                continue
            if plan.dp != 1:  # dp workers of its TP: the worker counts cover it
                continue
            cost = PlanCost(EstimateContext(p.model, sub, p.memory, wl, p.chip), plan)
            cap = capacity_bound(cost, self.memory_fraction).max_batch
            eng = self.engine
            if eng.name in KV_CAPPED_ENGINES:  # the pool's admission: queue beyond it
                kv = kv_cap(p.model, sub, p.memory, p.chip, wl, plan, eng.name,
                            eng.budget_tokens, self.memory_fraction)  # fmt: skip
                cap = None if kv is None else kv.requests
                if cap is not None and (eng.max_running is None or cap < eng.max_running):
                    eng = replace(eng, max_running=max(1, cap))
            if cap is not None and cap < 1:
                continue
            step = StepModel.from_problem(p.model, sub, p.memory, p.chip, wl, plan, eng,
                                          evs, self.range_ratio)  # fmt: skip
            cap = None if eng.name in KV_CAPPED_ENGINES else cap  # queued, not refused
            svc = prefill_service_seconds(step, wl.input_seq_len)
            out.append(LoadedWorker(plan, precision, step, svc, cap))
        return out


def _deployments(space: LoadedDisaggSpace, pre: list, dec: list) -> list[tuple]:
    """(prefill worker, decode worker, x, y) filling the cluster, in a fixed order."""
    n, c = space.problem.noc.num_devices, space.concurrency
    out = []
    for p in pre:
        np_ = p.plan.world_size
        for d in dec:
            nd = d.plan.world_size
            for x in range(1, n // np_ + 1):
                rest = n - x * np_
                if rest <= 0 or rest % nd:
                    continue
                y = rest // nd
                if c is not None and (x > c or y > c):
                    continue  # a worker no client ever reaches
                out.append((p, d, x, y))
    return out


def _describe(p: LoadedWorker, d: LoadedWorker, x: int, y: int, dec_batch: int, m: Any,
              pct: str) -> dict[str, Any]:  # fmt: skip
    """A priced deployment as the comparison's documents show it (SI)."""
    from plena_opt.search.space.space import Point

    pp, dp = Point(p.plan, 1, p.precision), Point(d.plan, dec_batch, d.precision)
    return {
        "serving": "disaggregated",
        "label": f"{x}P[{pp.label()}] {y}D[{dp.label()}]",
        "key": f"{x}P:{pp.key}+{y}D:{dp.key}",
        "prefill": {**pp.to_dict(), "workers": x},
        "decode": {**dp.to_dict(), "workers": y},
        "devices": x * p.plan.world_size + y * d.plan.world_size,
        "kv_transfer_seconds": m.transfer_seconds,
        "prefill_wait_seconds": m.prefill_wait_seconds,
        "prefill_seconds": m.prefill_seconds,
        "prefill_utilisation": m.prefill_utilisation,
        "decode_wait_seconds": m.decode_wait_seconds,  # for a decode slot (its running cap)
        "decode_max_running": d.step.engine.max_running,
        "decode_batch_per_worker": m.decode_batch_per_worker,
        "ttft_mean_seconds": m.ttft_seconds,
        "e2e_mean_seconds": m.e2e_seconds,
        "percentile": pct,
    }


def _price(space: LoadedDisaggSpace, dep: tuple, transfers: dict) -> tuple[Any, int] | None:
    """(steady state, decode requests per worker checked against memory) or None when the
    deployment does not serve the workload or its decode worker cannot hold its requests."""
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.disaggregated import kv_bytes_per_sequence, sub_noc
    from plena_opt.serving.disaggregated import Pools, disaggregated_under_load
    from plena_opt.serving.pools import transfer_seconds

    p, d, x, y = dep
    c, pr = space.concurrency, space.problem
    need = -(-c // y) if c is not None else None
    if need is not None and d.max_batch is not None and need > d.max_batch:
        space.not_priced[KV_SHORT] += 1
        return None
    pools = Pools(x, p.plan.world_size, y, d.plan.world_size)
    key = (p.precision, pools)
    if key not in transfers:
        wl = pr.with_batch(1).workload
        wl = wl if p.precision is None else replace(wl, precision=p.precision)
        ctx = EstimateContext(pr.model, sub_noc(pr.noc, 1), pr.memory, wl, pr.chip)
        transfers[key] = transfer_seconds(pr.noc, pools, kv_bytes_per_sequence(ctx))
    wl = pr.workload
    lengths = (wl.input_seq_len, wl.output_seq_len, space.range_ratio)
    try:
        m = disaggregated_under_load(p.step, d.step, transfers[key], pools, lengths, c,
                                     space.request_rate)  # fmt: skip
    except PlenaInputError:  # a rate beyond what a pool serves
        return None
    need = need if need is not None else max(1, math.ceil(m.decode_batch_per_worker))
    if d.max_batch is not None and need > d.max_batch:
        space.not_priced[KV_SHORT] += 1
        return None
    return m, need


def loaded_disaggregated_points(
    space: LoadedDisaggSpace, precisions: list[str | None]
) -> tuple[Any, int]:
    """(every deployment of the space priced under load as ``Points``, how many were priced);
    infeasible: does not serve the workload, does not hold its KV, or misses the SLA."""
    from plena_opt.search.serving.serving_points import Points, sla_mask

    sizes = space.pool_sizes()
    deps: list[tuple] = []
    for prec in precisions:
        by_size = {s: space.workers(s, prec, {}) for s in sizes}  # evaluators per sub-cluster
        pre = [min(ws, key=lambda w: w.service_seconds) for ws in by_size.values() if ws]
        dec = [w for ws in by_size.values() for w in ws]
        deps += _deployments(space, pre, dec)
    if len(deps) > MAX_LOADED_DEPLOYMENTS:
        space.not_priced[
            f"beyond the {MAX_LOADED_DEPLOYMENTS:,} disaggregated deployments one comparison "
            "under load prices (the first ones in pool-size order were priced)"
        ] += len(deps) - MAX_LOADED_DEPLOYMENTS
        deps = deps[:MAX_LOADED_DEPLOYMENTS]
    q = QUANTILE_INDEX[space.percentile]
    rows, docs, transfers = [], [], {}
    for dep in deps:
        if space.stopped():
            break
        priced = _price(space, dep, transfers)
        if priced is None:
            rows.append((math.nan,) * 3)
            docs.append(None)
            continue
        m, need = priced
        rows.append((m.ttft_quantiles_seconds[q], m.tpot_seconds, m.output_tps_per_gpu))
        docs.append(_describe(*dep, need, m, space.percentile))
    arr = np.array(rows, dtype=float).reshape(-1, 3)
    a = {"ttft_seconds": arr[:, 0], "tpot_seconds": arr[:, 1], "tps_per_device": arr[:, 2]}
    a["tps_per_user"] = 1.0 / a["tpot_seconds"]
    a["energy_j_per_token"] = np.full(len(arr), np.nan)
    priced = np.isfinite(arr).all(axis=1)
    with np.errstate(invalid="ignore"):
        feasible = priced & sla_mask(a, space.sla)
    return Points(a, feasible, lambda i: dict(docs[i]), len(docs)), int(priced.sum())
