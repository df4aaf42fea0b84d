"""Prefill steps that batch waiting prompts, and the queue over a pool of such workers (r17pfbatch).

A prefill worker of a disaggregated deployment runs its engine's scheduler: each step takes as
many waiting prompts as its token budget holds, not one. vLLM: ``Scheduler.schedule`` fills
``max_num_batched_tokens`` with waiting requests (vllm/v1/core/sched/scheduler.py); SGLang:
``PrefillAdder`` adds waiting requests until ``chunked_prefill_size`` / ``max_prefill_tokens``
is reached (sglang/srt/managers/schedule_policy.py; the prefill server's
``event_loop_normal_disagg_prefill`` runs ``get_new_batch_prefill``); TensorRT-LLM: the
capacity / micro-batch scheduler packs context requests up to ``max_num_tokens``
(tensorrt_llm/_torch/pyexecutor/scheduler.py). An attention-DP worker of ``d`` ranks runs each
rank's prompts in the same step; its budget is per rank (TensorRT-LLM and vLLM schedule each
rank / DP engine core against its own ``max_num_tokens`` / ``max_num_batched_tokens``), except
SGLang, which divides ``chunked_prefill_size`` by ``dp_size`` when DP attention is on
(sglang/srt/server_args.py: ``self.chunked_prefill_size // self.dp_size``).

**Batch.** ``B = d · max(1, ⌊budget / isl⌋)`` prompts per step; a worker without attention DP
takes at most its running cap ``R`` (``engine.max_running``): vLLM's scheduler stops admitting
waiting requests at ``max_num_seqs`` running (vllm/v1/core/sched/scheduler.py ``schedule``),
SGLang's at ``max_running_requests`` (sglang/srt/managers/scheduler.py
``get_new_batch_prefill``: ``get_num_allocatable_reqs``), so ``B = min(⌊budget / isl⌋, R)``.
A batch of ``n ≤ B`` prompts that fit the budget is one step of ``n · isl`` prompt tokens
(``StepModel.step_seconds``; the evaluator spreads the batch over the DP ranks, ``⌈n / d⌉``
prompts per rank). A prompt longer than the budget is chunked (``⌊isl / budget⌋`` full steps and
the rest), one per rank: a batch of ``n ≤ d`` such prompts costs what one does (the ranks run in
parallel; the MoE layers' larger token count is not priced).
``n = 1`` is ``prefill_service_seconds``.

**Queue** (bulk service, FIFO over ``P`` workers): the birth–death chain of ``j`` prompts at the
pool, ``busy = min(P, j)`` workers each serving ``n_j = min(B, j / busy)`` prompts per step of
``S(n_j)``: death rate ``busy · n_j / S(n_j)``. Births ``λ`` (open loop; geometric tail above
``P·B``) or ``(C − j) / think`` (closed loop, ``C`` clients). A prompt waits (i) for a place in
a step, ``E[(j − P·B)⁺] / λ`` (Little), and (ii) when it finds every worker busy with room left,
for the next step to end (``2k·S(n_j) / (P + 1)``: the first of ``P`` step residuals,
``k = (1 + cs²) / 2``); (i) × ``k`` as the one-prompt pool's wait is. Its prefill is ``S`` of
the batch it departs in (departure-weighted). With ``B = 1`` the chain is the one-prompt
pool's (M/M/c, finite source).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel


Figures = tuple[float, float, float, float]  # (mean wait s, Pw, mean prefill s, mean batch)


class PrefillBatches:
    """Prompts of ``isl`` tokens per step of one prefill worker (``size``) and a step's seconds."""

    def __init__(self, step: StepModel, isl: int) -> None:
        self.step, self.isl = step, isl
        adp = step.attention_dp
        self.ranks = adp.ranks if adp is not None else 1
        budget = step.engine.budget_tokens
        if step.engine.name == "sglang" and self.ranks > 1:  # SGLang: the budget over the ranks
            budget = max(2, budget // self.ranks)
        self.budget = budget
        per_rank = max(1, budget // isl)
        cap = step.engine.max_running  # the running cap bounds a step's prompts too (below)
        if cap is not None and self.ranks == 1:
            per_rank = min(per_rank, cap)
        self.size = self.ranks * per_rank
        self._kept: dict[float, float] = {}

    def seconds(self, n: float) -> float:
        """Seconds to prefill a batch of ``n`` prompts (1 ≤ ``n`` ≤ ``size``; fractional: the
        step's linear interpolation)."""
        t = self._kept.get(n)
        if t is None:
            step, isl, budget = self.step, self.isl, self.budget
            if isl <= budget:
                t = step.step_seconds(n * isl, 0)
            else:  # chunked, one prompt per rank: as one prompt
                full, rest = divmod(isl, budget)
                t = full * step.step_seconds(budget, 0) + (
                    step.step_seconds(rest, 0) if rest else 0
                )
            self._kept[n] = t
        return t


class BulkQueue:
    """The prefill pool's chain: ``workers`` workers, ``batches`` per step, ``k`` Allen–Cunneen."""

    def __init__(self, batches: PrefillBatches, workers: int, k: float, states: int) -> None:
        self.p, self.b, self.k = workers, batches.size, k
        top = max(states, workers * self.b)
        self.n = [0.0] + [min(self.b, j / min(workers, j)) for j in range(1, top + 1)]
        self.s = [0.0] + [batches.seconds(n) for n in self.n[1:]]
        self.mu = [0.0] + [min(workers, j) * self.n[j] / self.s[j] for j in range(1, top + 1)]
        self.capacity = self.mu[workers * self.b]  # requests/s at full batches

    def _summary(self, probs: list[float], arrivals: list[float], lam: float,
                 tail: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> Figures:  # fmt: skip
        """(mean wait, Pw, mean prefill seconds, mean batch) from the chain's state weights;
        ``tail``: (mass, arrival mass, mean (j − P·B)⁺ mass) of states above the kept ones."""
        p, full = self.p, self.p * self.b
        norm = sum(probs) + tail[0]
        arr = sum(arrivals) + tail[1]
        queued = (sum(v * (j - full) for j, v in enumerate(probs) if j > full) + tail[2]) / norm
        sync = sum(arrivals[j] * self.s[j] for j in range(p, min(full, len(arrivals))))
        pw = (sum(arrivals[p:]) + tail[1]) / arr
        wait = self.k * queued / lam + 2 * self.k * sync / arr / (p + 1)
        dep = [v * self.mu[j] for j, v in enumerate(probs)]
        top = len(self.mu) - 1
        dep_tail = tail[0] * self.mu[min(full, top)]
        total = sum(dep) + dep_tail
        s_mean = (
            sum(d * self.s[j] for j, d in enumerate(dep)) + dep_tail * self.s[min(full, top)]
        ) / total
        n_mean = (
            sum(d * self.n[j] for j, d in enumerate(dep)) + dep_tail * self.n[min(full, top)]
        ) / total
        return wait, pw, s_mean, n_mean

    def open_loop(self, lam: float) -> Figures:
        """(mean wait, Pw, mean prefill seconds, mean batch) under Poisson ``lam`` requests/s
        (< ``capacity``)."""
        full = self.p * self.b
        probs = [1.0]
        for j in range(1, full + 1):
            probs.append(probs[-1] * lam / self.mu[j])
            if probs[-1] > 1e250:
                probs = [v / probs[-1] for v in probs]
        r = lam / self.capacity  # geometric tail above P·B
        last = probs[full]
        tail = (last * r / (1 - r), last * r / (1 - r), last * r / (1 - r) ** 2)
        return self._summary(probs, list(probs), lam, tail)

    def closed_loop(self, clients: int, think: float) -> Figures:
        """(mean wait, Pw, mean prefill seconds, mean batch) of ``clients`` that each think
        ``think`` s between prefills."""
        probs = [1.0]
        for j in range(1, clients + 1):
            probs.append(probs[-1] * (clients - j + 1) / think / self.mu[j])
            if probs[-1] > 1e250:
                probs = [v / probs[-1] for v in probs]
        arrivals = [v * (clients - j) for j, v in enumerate(probs)]
        lam = sum(arrivals) / sum(probs) / think
        return self._summary(probs, arrivals, lam)


def tail_decay(pw: float, wait: float) -> float:
    """Decay rate of the exponential wait tail with ``P(W > 0) = pw`` and mean ``wait``."""
    return pw / wait if wait > 0 else math.inf
