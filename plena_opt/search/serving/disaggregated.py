"""Aggregated vs disaggregated serving fronts over one cluster (issue 16, ``--serving``).

Space: aggregated = every legal plan on all N devices × batch; disaggregated = prefill worker
(plan on ``n_p`` devices × batch) × decode worker (plan on ``n_d`` × batch) with the worker counts
rate-matched (``plena_opt.estimate.disaggregated.rate_match``). Pool sizes are the powers of two
below N whose first devices form a sub-cluster (``sub_noc``). Workers are priced once each; the
pairs are combined with numpy. ``sampler="role-front"`` keeps only workers on their role's own
front (prefill: latency, supply per device, KV bytes; decode: TPOT, first step, consumption per
device, energy) before pairing — the large-cluster mode; ``exhaustive`` pairs every worker.
Objectives read serving figures: ``ttft`` (ms), ``tps-per-device``, ``tps-per-user`` /
``tps-per-seq`` (1 / TPOT), ``energy`` (J/token). System ``tps`` grows with the deployment's
size, not with a decision, so it is refused here.

Precision (``--precisions``): every worker is priced in each searched format; a deployment's two
pools share one format. vLLM's KV connector (``NixlConnector``) refuses a prefill/decode pair
whose compatibility hash differs, and the hash covers the model, its dtype and the KV-cache dtype
(``compute_nixl_compatibility_hash``, vllm/distributed/kv_transfer/kv_connector/v1/
nixl_connector.py) while the parallel shapes may differ; SGLang's transfer backends move the KV
pages as bytes of one layout. Pools in two formats are therefore never paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.disaggregated import (
    RATE_MATCH_RTOL,
    ServingFigures,
    WorkerFigures,
    aggregated_serving,
    kv_transfer_between,
    price_worker,
    sub_noc,
)
from plena_opt.search.fronts.pareto_large import front_indices
from plena_opt.search.serving.serving_points import (
    FIGURES,
    PAIR_CHUNK,
    SERVING_OBJECTIVES,
    Points,
    agg_doc,
    check_objectives,
    concat,
    feasible_front,
    pair_doc,
    sla_mask,
    subset,
)

__all__ = [
    "FIGURES",
    "SERVING_OBJECTIVES",
    "Points",
    "ServingSpace",
    "check_objectives",
    "feasible_front",
    "pair_points",
    "rate_match_arrays",
    "role_fronts",
]


@dataclass
class ServingSpace:
    """Workers of one problem: aggregated (N devices) and pool workers (n < N)."""

    inputs: Any
    batches: list[int]
    sla: dict[str, float | None]
    memory_fraction: float | None = None
    pool_sizes: list[int] = field(default_factory=list)
    aggregated: list[WorkerFigures] = field(default_factory=list)
    workers: list[WorkerFigures] = field(default_factory=list)
    precisions: list[str | None] = field(default_factory=lambda: [None])
    stop: Any = None  # a ``plena_opt.stop.StopToken`` polled per worker and per pair chunk
    stop_reason: str = ""  # why pricing or pairing stopped early ("": it did not)
    # sampler "optuna" (``search.serving.serving_optuna.optuna_points``): new deployments to score,
    # seed, Optuna sampler, stored sampler params to resume from; then its ``OptunaPairs``
    budget: int = 200
    seed: int | None = 0
    optuna_sampler: str = "nsga2"
    resume: list[dict[str, Any]] = field(default_factory=list)
    optuna: Any = None

    @classmethod
    def build(
        cls,
        inputs: Any,
        batches: Sequence[int],
        sla: dict,
        memory_fraction: float | None = None,
        min_pool: int = 1,
        precisions: Sequence[str] | None = None,
        stop: Any = None,
    ) -> ServingSpace:
        """Price every worker; pools of ``min_pool`` devices or more (powers of two); memory
        judged by the KV-capacity bound at ``memory_fraction`` (None: ``fits_in_memory``);
        each worker in every format of ``precisions`` (None: the workload's). When ``stop``
        (a ``StopToken``) is set, pricing ends with the workers priced so far and
        ``stop_reason`` says why."""
        space = cls(inputs, list(batches), dict(sla))
        space.memory_fraction = memory_fraction
        space.precisions = list(precisions) if precisions else [None]
        space.stop = stop
        n = inputs.noc.num_devices
        space.pool_sizes = [p for p in _powers_below(n) if p >= min_pool and _is_sub(inputs.noc, p)]
        space.aggregated = space._price(n)
        for size in space.pool_sizes:
            space.workers.extend(space._price(size))
        return space

    def _price(self, n: int) -> list[WorkerFigures]:
        from plena_opt.estimate import Evaluator

        inp = self.inputs
        sub = sub_noc(inp.noc, n)
        out = []
        for prec in self.precisions:
            for batch in self.batches:
                wl = inp.with_batch(batch).workload
                wl = wl if prec is None else replace(wl, precision=prec)
                plans = Evaluator(inp.model, sub, inp.memory, wl, chip=inp.chip).legal_plans()
                for plan in plans:
                    if self.stopped():
                        return out
                    w = price_worker(
                        inp.model, inp.noc, inp.memory, wl, plan, inp.chip, self.memory_fraction
                    )
                    out.append(w if prec is None else replace(w, precision=prec))
        return out

    def stopped(self) -> bool:
        """Whether the stop token is set (its reason kept in ``stop_reason``)."""
        if self.stop is not None and not self.stop_reason and self.stop.is_set():
            self.stop_reason = self.stop.reason or "cancelled"
        return bool(self.stop_reason)

    # -- points -------------------------------------------------------------------------------
    def aggregated_points(self) -> Points:
        out = self.inputs.workload.output_seq_len
        figs = [aggregated_serving(w, out) for w in self.aggregated]
        feas = np.array([w.fits is not False for w in self.aggregated], dtype=bool)
        pts = _points(figs, feas, self.sla)
        pts.describe = lambda i: agg_doc(self.aggregated[i], figs[i])
        pts.evaluated = len(figs)
        return pts

    def disaggregated_points(
        self, sampler: str = "exhaustive", objectives: Sequence[str] | None = None
    ) -> Points:
        """Every rate-matched pair of the sampler's workers. With ``objectives``, pairs are
        scored in chunks of about ``PAIR_CHUNK`` and only each chunk's feasible front is kept
        (the front of the union of chunk fronts is the whole front; memory stays bounded)."""
        n = self.inputs.noc.num_devices
        out = self.inputs.workload.output_seq_len
        ws = distinct([w for w in self.workers if w.fits is not False])
        if sampler == "optuna":
            from plena_opt.search.serving.serving_optuna import optuna_points

            return optuna_points(self, ws, objectives or ["ttft", "tps-per-device"], pair_points)
        groups = [[w for w in ws if w.precision == prec] for prec in self.precisions]
        if objectives is None:
            parts = []
            for g in groups:
                pre, dec = (g, g) if sampler == "exhaustive" else role_fronts(g, out)
                parts.append(pair_points(self.inputs.noc, pre, dec, out, n, self.sla))
            return parts[0] if len(parts) == 1 else concat(parts)
        kept: list[Points] = []
        evaluated = feasible = 0
        for g in groups:  # the two pools of a deployment share one format (module docstring)
            pre, dec = (g, g) if sampler == "exhaustive" else role_fronts(g, out)
            step = max(1, PAIR_CHUNK // max(len(dec), 1))
            for i in range(0, max(len(pre), 1), step):
                if self.stopped():
                    break
                pts = pair_points(self.inputs.noc, pre[i : i + step], dec, out, n, self.sla)
                evaluated += pts.evaluated
                feasible += pts.feasible_count
                kept.append(subset(pts, feasible_front(pts, objectives)))
        merged = concat(kept)
        merged.evaluated, merged.feasible_total = evaluated, feasible
        return merged


def distinct(ws: Sequence[WorkerFigures]) -> list[WorkerFigures]:
    """Workers without repeats: the first of those with the same shape and the same figures
    (e.g. comm overlap on and off when a plan has no collective to overlap)."""
    seen: dict[tuple, WorkerFigures] = {}
    for w in ws:
        p = w.plan
        key = (p.tp, p.ep, p.dp, p.pp, p.cp, w.batch, w.precision)
        key += tuple(_worker_attr(w, k) for k in _WORKER_FIELDS)
        seen.setdefault(key, w)
    return list(seen.values())


def _powers_below(n: int) -> list[int]:
    out, p = [], 1
    while p < n:
        out.append(p)
        p *= 2
    return out


def _is_sub(noc: Any, n: int) -> bool:
    try:
        sub_noc(noc, n)
    except PlenaInputError:
        return False
    return True


def _points(figs: Sequence[ServingFigures], feas: np.ndarray, sla: dict) -> Points:
    a = {
        "ttft_seconds": np.array([f.ttft_s for f in figs]),
        "tpot_seconds": np.array([f.tpot_s for f in figs]),
        "tps_per_device": np.array([f.tps_per_device for f in figs]),
        "energy_j_per_token": np.array(
            [np.nan if f.energy_per_token_j is None else f.energy_per_token_j for f in figs]
        ),
    }
    a["tps_per_user"] = 1.0 / a["tpot_seconds"]
    return Points(a, feas & sla_mask(a, sla), None)


def role_fronts(ws: list[WorkerFigures], out: int) -> tuple[list, list]:
    """Workers on their own role's front (module docstring)."""
    if not ws:
        return [], []
    pre = np.array(
        [[w.prefill_latency_s, -w.micro * w.plan.pp / w.prefill_batch_s / w.devices,
          w.kv_bytes_per_micro, w.devices] for w in ws]
    )  # fmt: skip
    dec = np.array(
        [[w.decode_s, w.first_decode_s, -w.tps / out / w.devices,
          w.energy_per_token_j or 0.0, w.devices] for w in ws]
    )  # fmt: skip
    return [ws[i] for i in front_indices(pre)], [ws[i] for i in front_indices(dec)]


def pair_points(
    noc: Any,
    pre: list[WorkerFigures],
    dec: list[WorkerFigures],
    out: int,
    total: int,
    sla: dict,
) -> Points:
    """Every (prefill, decode) worker pair that fits, rate-matched, as arrays."""
    if not pre or not dec:
        return Points({k: np.zeros(0) for k in FIGURES}, np.zeros(0, bool), lambda i: {}, 0)
    P = {k: np.array([_worker_attr(w, k) for w in pre], dtype=float) for k in _WORKER_FIELDS}
    D = {k: np.array([_worker_attr(w, k) for w in dec], dtype=float) for k in _WORKER_FIELDS}
    pi, di = np.meshgrid(np.arange(len(pre)), np.arange(len(dec)), indexing="ij")
    pi, di = pi.ravel(), di.ravel()
    keep = P["devices"][pi] + D["devices"][di] <= total
    pi, di = pi[keep], di[keep]
    xs, xe = _transfers(noc, pre, dec, pi, di)
    pp_p = P["pp"][pi]
    r_p = P["micro"][pi] * pp_p / np.maximum(P["prefill_batch_s"][pi], pp_p * xs)
    r_d = D["tps"][di] / out
    x, y, rate = rate_match_arrays(P["devices"][pi], D["devices"][di], r_p, r_d, total)
    devices = x * P["devices"][pi] + y * D["devices"][di]
    a = {
        "ttft_seconds": P["prefill_latency_s"][pi] + xs + D["first_decode_s"][di],
        "tpot_seconds": D["decode_s"][di] / out,
        "tps_per_device": rate * out / devices,
        "energy_j_per_token": D["energy"][di] + xe * 1e-12 / (P["micro"][pi] * out),
    }
    a["tps_per_user"] = 1.0 / a["tpot_seconds"]

    def describe(k: int) -> dict:
        return pair_doc(pre[pi[k]], dec[di[k]], int(x[k]), int(y[k]), xs[k], a, k)

    return Points(a, sla_mask(a, sla), describe, len(pi))


_WORKER_FIELDS = (
    "devices",
    "micro",
    "pp",
    "prefill_latency_s",
    "prefill_batch_s",
    "first_decode_s",
    "decode_s",
    "tps",
    "energy",
)


def _worker_attr(w: WorkerFigures, name: str) -> float:
    if name == "pp":
        return w.plan.pp
    if name == "energy":
        return np.nan if w.energy_per_token_j is None else w.energy_per_token_j
    return getattr(w, name)


def _shape_ids(ws: Sequence[WorkerFigures], table: dict) -> np.ndarray:
    return np.array(
        [table.setdefault((w.plan.tp, w.plan.ep, w.plan.dp, w.plan.pp, w.plan.cp), len(table))
         for w in ws]
    )  # fmt: skip


def _transfers(
    noc: Any, pre: Sequence[WorkerFigures], dec: Sequence[WorkerFigures], pi, di
) -> tuple[np.ndarray, np.ndarray]:
    """KV transfer seconds and pJ of every pair, priced once per distinct (n_p, n_d, same
    shape, bytes)."""
    table: dict = {}
    same = _shape_ids(pre, table)[pi] == _shape_ids(dec, table)[di]
    n_p = np.array([w.devices for w in pre])[pi]
    n_d = np.array([w.devices for w in dec])[di]
    nbytes = np.array([w.kv_bytes_per_micro for w in pre], dtype=np.int64)[pi]
    keys = np.stack([n_p, n_d, same.astype(np.int64), nbytes], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    secs = np.empty(len(uniq))
    energy = np.empty(len(uniq))
    for k, (a, b, sm, nb) in enumerate(uniq):
        s_, e_ = kv_transfer_between(noc, int(a), int(b), bool(sm), int(nb))
        secs[k], energy[k] = s_, 0.0 if e_ is None else e_  # no NoC energy data: as metrics_of
    inverse = inverse.ravel()
    return secs[inverse], energy[inverse]


def rate_match_arrays(
    n_p: np.ndarray, n_d: np.ndarray, r_p: np.ndarray, r_d: np.ndarray, total: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rate_match`` over arrays of pairs: (x, y, sequences/s), the same rules and stop."""
    n = len(n_p)
    best_per = np.full(n, -1.0)
    best_dev = np.zeros(n)
    bx, by, brate = np.zeros(n), np.zeros(n), np.zeros(n)
    x_max = (total - n_d) // n_p
    target = r_p * r_d / (r_d * n_p + r_p * n_d) * (1 - RATE_MATCH_RTOL)
    active = np.arange(n)
    xv = 0
    while len(active):
        xv += 1
        active = active[xv <= x_max[active]]
        if not len(active):
            break
        a_np, a_nd, a_rp, a_rd = n_p[active], n_d[active], r_p[active], r_d[active]
        y_max = np.maximum((total - xv * a_np) // a_nd, 1)
        ideal = xv * a_rp / a_rd
        for cand in (np.floor(ideal), np.ceil(ideal)):
            y = np.clip(cand, 1, y_max)
            rate = np.minimum(xv * a_rp, y * a_rd)
            dev = xv * a_np + y * a_nd
            per = rate / dev
            cur, cdev = best_per[active], best_dev[active]
            better = (per > cur) | ((per == cur) & (dev < cdev))
            idx = active[better]
            best_per[idx], best_dev[idx] = per[better], dev[better]
            bx[idx], by[idx], brate[idx] = xv, y[better], rate[better]
        active = active[best_per[active] < target[active]]
    return bx, by, brate
