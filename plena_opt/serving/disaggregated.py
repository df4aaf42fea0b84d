"""Disaggregated serving under load: a prefill pool, a KV transfer, a decode pool (issue 23).

``P`` prefill workers and ``D`` decode workers, each an engine instance of its own plan, run by
the same engine's scheduler. A request waits for a place in a prefill step (FIFO over the pool),
has its prompt prefilled (chunked: ``⌊isl / budget⌋`` full steps and the rest, each
``StepModel.step_seconds`` with no decodes beside it) beside the other prompts of that step: a
worker batches up to ``B`` waiting prompts per step, as many as its token budget holds on each
of its attention-DP ranks (``serving.prefill_batch``; ``B = 1`` for a prompt that fills the
budget on a worker without attention DP: the one-prompt pool below, unchanged), its
prompt KV moved to a decode worker (``transfer_seconds``, from the network model), then decodes
beside the other requests of that worker. Steady state, means and the TTFT tail:

* **Prefill queue**, over ``c = P`` servers of service ``S``. Open loop (M/G/c, Allen–Cunneen):
  Erlang C gives the probability ``Pw`` of waiting and the M/M/c wait ``Pw / (cμ − λ)``, scaled
  by ``k = (ca² + cs²) / 2`` with ``ca² = 1`` (Poisson) and ``cs² = r² / 3`` (prompt lengths
  uniform within ±r: service ∝ tokens); its tail ``P(W > t) = Pw·exp(−(cμ − λ)·t / k)`` gives
  the TTFT percentiles. Closed loop (``C`` clients): the finite-source birth–death chain of
  ``finite_source`` (each client "thinks" for the transfer and its decode between prefills:
  far fewer arrivals while many wait, which Poisson arrivals overstate ~1.5× at 90 % busy), its
  wait scaled by ``(1 + cs²) / 2``; tail exponential with the same ``Pw`` and mean. Checked
  against event simulations of both loops (``tests/serving/test_serving_disagg_load.py``). A closed
  loop of no more clients than prefill workers never waits.
* **Decode pool**: ``b`` requests per worker decode at ``TPOT(b) = decode_seconds(b) + host``;
  ``b`` is the root of Little's law ``b = λ·(osl − 1)·TPOT(b) / D`` (bisection).
* **Batching pool** (``B > 1``): the birth–death chain of ``serving.prefill_batch.BulkQueue``
  (state-dependent step batch and seconds; capacity ``P·B / S(B)``), open and closed loop;
  ``S`` below is then the mean step a request is prefilled in. Closed loop: where ``λ`` is
  pinned at the pool's capacity, the clients beyond it wait at the pool (Little's law).
* **TTFT** = wait + ``S`` + transfer + the decode worker's first step; **E2E** = TTFT +
  ``(osl − 1)·TPOT``. TPOT has no spread in this model (a steady decode batch): its
  percentiles are the mean.
* **Closed loop**: ``λ`` is the root of ``λ·E2E(λ) = C`` on ``(0, P / S)``; **open loop**:
  ``λ`` given, refused naming ``request_rate`` at or beyond what either pool serves.

**Decode running cap.** A decode worker runs at most ``R`` = its engine's ``max_running``
requests (the default, or fewer where its KV pool holds fewer: ``serving.kv_admission.admitted``
in ``pools.pool_steps``); the requests beyond wait for a slot, as the engines do (vLLM's decode
instance keeps a transferred request in its waiting queue until blocks and a ``max_num_seqs``
slot free up; SGLang's decode server holds it in its pre-allocation queue until the KV pool has
room, and the prefill side waits for that allocation). Closed loop: when the ``C`` clients would
put more than ``R`` requests on a worker, ``n`` = the most clients whose steady state keeps
``b ≤ R`` circulate and the other ``C − n`` wait ``(C − n) / λ`` more before their first token
(``decode_wait_seconds``, in TTFT and E2E; ``steady.closed_loop``'s rule for an aggregated
engine). Open loop: a rate that needs ``b > R`` is refused naming ``request_rate``.

Not modelled (named, not approximated): a prompt's chunk sharing a step with the next prompt's
(whole prompts are batched), the pools' recorded batch sizes, contention between concurrent KV
transfers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.serving.prefill_batch import BulkQueue, PrefillBatches, tail_decay
from plena_opt.serving.steady import BISECTION_STEPS

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel

QUANTILES = (50, 90, 99)


@dataclass(frozen=True)
class Pools:
    """``prefill_workers`` × ``prefill_tp`` GPUs and ``decode_workers`` × ``decode_tp`` GPUs."""

    prefill_workers: int
    prefill_tp: int
    decode_workers: int
    decode_tp: int

    @property
    def gpus(self) -> int:
        return self.prefill_workers * self.prefill_tp + self.decode_workers * self.decode_tp


@dataclass(frozen=True)
class DisaggMetrics:
    """Steady state of a disaggregated deployment (seconds; tokens/s; requests/s).
    ``ttft_quantiles_seconds``/``e2e_quantiles_seconds``: p50, p90, p99."""

    request_rate_per_s: float
    prefill_wait_seconds: float
    prefill_seconds: float
    transfer_seconds: float
    prefill_utilisation: float
    decode_batch_per_worker: float
    ttft_seconds: float
    tpot_seconds: float
    e2e_seconds: float
    ttft_quantiles_seconds: tuple[float, float, float]
    e2e_quantiles_seconds: tuple[float, float, float]
    output_tps: float
    output_tps_per_gpu: float
    output_tps_per_user: float
    decode_wait_seconds: float = 0.0  # closed loop: waiting for a decode slot (the cap)


def prefill_service_seconds(step: StepModel, isl: int) -> float:
    """One prompt alone on a prefill worker: full chunks of the step budget (per attention-DP
    rank, ``prefill_batch.PrefillBatches``), then the rest."""
    return PrefillBatches(step, isl).seconds(1)


def erlang_c(c: int, a: float) -> float:
    """Probability an arrival waits in M/M/c with offered load ``a = λ·S`` (< c)."""
    b = 1.0
    for k in range(1, c + 1):  # Erlang B, stable recursion
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1 - rho * (1 - b))


def finite_source(c: int, n: int, service: float, think: float) -> tuple[float, float]:
    """(probability an arrival waits, mean wait) of ``n`` clients that each think ``think`` s
    between visits to ``c`` servers of mean service ``service`` s: the finite-source
    (machine-repairman) birth–death chain, exponential times; arrivals see the chain's state
    weighted by the clients still thinking."""
    p, probs = 1.0, [1.0]
    for k in range(n):  # birth (n − k) / think, death min(k + 1, c) / service
        p *= (n - k) / think * service / min(k + 1, c)
        probs.append(p)
        if p > 1e250:
            probs = [v / p for v in probs]
            p = 1.0
    arrivals = [v * (n - k) for k, v in enumerate(probs)]
    total = sum(arrivals)
    lam = total / sum(probs) / think
    waiting = sum(v * max(0, k - c) for k, v in enumerate(probs)) / sum(probs)
    return sum(arrivals[c:]) / total, waiting / lam


class _Model:
    """The pieces of one deployment and workload that do not depend on ``λ``."""

    def __init__(self, prefill: StepModel, decode: StepModel, transfer_s: float, pools: Pools,
                 isl: int, osl: int, range_ratio: float) -> None:  # fmt: skip
        self.decode, self.pools, self.isl, self.osl = decode, pools, isl, osl
        self.batches = PrefillBatches(prefill, isl)
        self.s = self.batches.seconds(1)  # one prompt alone
        self._bulk: dict[int, BulkQueue] = {}  # clients (0: open loop) → the batching pool
        self.x = transfer_s
        self.k = (1 + range_ratio**2 / 3) / 2  # Allen–Cunneen (ca² + cs²) / 2
        self.clients: int | None = None
        self.cap = decode.engine.max_running  # requests one decode worker runs (None: no cap)

    def tpot(self, b: float) -> float:
        return self.decode.decode_seconds(max(1.0, b)) + self.decode.engine.host_step_seconds

    def batch(self, lam: float) -> float | None:
        """Decode requests per worker at ``λ`` (None: the decode pool does not keep up)."""
        d, n = self.pools.decode_workers, max(1, self.osl - 1)
        hi = self.clients / d if self.clients else 1.0
        if self.clients is None:
            while lam * n * self.tpot(hi) / d > hi:
                hi *= 2
                if hi > 1 << 24:
                    return None
        lo = 0.0
        for _ in range(BISECTION_STEPS):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if lam * n * self.tpot(mid) / d > mid else (lo, mid)
        return (lo + hi) / 2

    def bulk(self) -> BulkQueue:
        key = self.clients or 0
        if key not in self._bulk:
            self._bulk[key] = BulkQueue(self.batches, self.pools.prefill_workers, self.k, key)
        return self._bulk[key]

    def capacity(self) -> float:
        """Requests/s the prefill pool serves (full batches)."""
        if self.batches.size == 1:
            return self.pools.prefill_workers / self.s
        return self.bulk().capacity

    def wait(self, lam: float) -> tuple[float, float, float, float, float]:
        """(mean wait, Pw, decay rate of the wait's tail, mean prefill seconds, mean batch) of
        the prefill queue at ``λ``."""
        c = self.pools.prefill_workers
        if self.clients is not None:
            if self.clients <= c:
                return 0.0, 0.0, math.inf, self.s, 1.0
            b = self.batch(lam)
            think = self.x + self.osl * self.tpot(b if b is not None else 1.0)
            if self.batches.size > 1:
                w, pw, s, n = self.bulk().closed_loop(self.clients, think)
                return w, pw, tail_decay(pw, w), s, n
            pw, w = finite_source(c, self.clients, self.s, think)
            w *= self.k
            return w, pw, tail_decay(pw, w), self.s, 1.0
        if self.batches.size > 1:
            w, pw, s, n = self.bulk().open_loop(lam)
            return w, pw, tail_decay(pw, w), s, n
        a = lam * self.s
        pw = erlang_c(c, a)
        rate = (c - a) / self.s  # cμ − λ
        return self.k * pw / rate, pw, rate / self.k, self.s, 1.0

    def e2e(self, lam: float) -> float:
        b = self.batch(lam)
        tpot = self.tpot(b if b is not None else 1.0)
        w, _, _, s, _ = self.wait(lam)
        return w + s + self.x + self.osl * tpot


def _quantile_wait(pw: float, decay: float, q: int) -> float:
    tail = 1 - q / 100
    return math.log(pw / tail) / decay if pw > tail and math.isfinite(decay) else 0.0


def _metrics(m: _Model, lam: float, queue: float = 0.0) -> DisaggMetrics:
    """The steady state at ``λ``, ``queue`` seconds of waiting for a decode slot added."""
    b = m.batch(lam)
    if b is None:
        raise PlenaInputError(
            "request_rate", f"{lam:g} requests/s is more than the decode pool serves"
        )
    if m.clients is None and m.cap is not None and b > m.cap:
        raise PlenaInputError(
            "request_rate",
            f"{lam:g} requests/s needs {b:.1f} requests on each decode worker, more than its "
            f"running cap of {m.cap} (the queue grows without bound)",
        )
    tpot = m.tpot(b)
    w, pw, decay, s, n = m.wait(lam)
    base = s + m.x + tpot + queue
    rest = (m.osl - 1) * tpot
    if m.clients is not None and m.clients > m.pools.prefill_workers:
        cycle = m.clients / lam  # Little's law over the loop
        short = cycle - (w + base - queue + rest)  # > 0: λ pinned at the pool's capacity
        if short > 1e-6 * cycle:  # saturated: the clients beyond it queue at the pool
            w, pw = w + short, 1.0
            decay = tail_decay(pw, w)
    ttft_q = tuple(base + _quantile_wait(pw, decay, q) for q in QUANTILES)
    out = lam * m.osl
    return DisaggMetrics(
        request_rate_per_s=lam,
        prefill_wait_seconds=w,
        prefill_seconds=s,
        transfer_seconds=m.x,
        prefill_utilisation=lam * s / n / m.pools.prefill_workers,
        decode_batch_per_worker=b,
        ttft_seconds=w + base,
        tpot_seconds=tpot,
        e2e_seconds=w + base + rest,
        ttft_quantiles_seconds=ttft_q,  # type: ignore[arg-type]
        e2e_quantiles_seconds=tuple(t + rest for t in ttft_q),  # type: ignore[arg-type]
        output_tps=out,
        output_tps_per_gpu=out / m.pools.gpus,
        output_tps_per_user=1.0 / tpot,
        decode_wait_seconds=queue,
    )


def disaggregated_under_load(
    prefill: StepModel,
    decode: StepModel,
    transfer_seconds: float,
    pools: Pools,
    lengths: tuple[int, int, float],
    concurrency: int | None = None,
    request_rate: float | None = None,
) -> DisaggMetrics:
    """Steady state of ``pools`` under a closed loop of ``concurrency`` clients or Poisson
    ``request_rate`` (requests/s); ``lengths`` = (input, output tokens, range ratio)."""
    m = _Model(prefill, decode, transfer_seconds, pools, *lengths)
    cap = m.capacity()  # requests/s the prefill pool serves
    if request_rate is not None:
        if request_rate >= cap:
            raise PlenaInputError(
                "request_rate",
                f"{request_rate:g} requests/s is at or beyond the {cap:.4g} "
                "the prefill pool serves",
            )
        return _metrics(m, request_rate)
    c = int(concurrency or 0)
    lam = _closed(m, c, cap)
    b = m.batch(lam)
    if m.cap is None or b is None or b <= m.cap:
        return _metrics(m, lam)
    lo, hi = 1, c  # the most clients that keep each decode worker within its cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        b = m.batch(_closed(m, mid, cap))
        lo, hi = (mid, hi) if b is not None and b <= m.cap else (lo, mid)
    lam = _closed(m, lo, cap)
    return _metrics(m, lam, (c - lo) / lam)


def _closed(m: _Model, clients: int, cap: float) -> float:
    """``λ`` of ``clients`` closed-loop clients: the root of ``λ·E2E(λ) = clients`` on
    ``(0, cap)`` (``m.clients`` set to ``clients``)."""
    m.clients = clients
    lo, hi = 0.0, cap
    for _ in range(BISECTION_STEPS * 2):  # λ·E2E(λ) rises from 0 to ∞ on (0, cap)
        lam = (lo + hi) / 2
        lo, hi = (lam, hi) if lam * m.e2e(lam) < clients else (lo, lam)
    return (lo + hi) / 2
