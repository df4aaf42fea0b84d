"""The waits an engine adds before a prompt's first step, beside the scheduler's queue:
TensorRT-LLM's batch waiting and its attention-DP balancing, in decode steps (``serving.steady``
adds them to TTFT where the engine model turns them on)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.serving.engines import EngineModel
    from plena_opt.serving.workload import ServingWorkload


def batch_wait_steps(eng: EngineModel, wl: ServingWorkload, c: int, phi: float) -> float:
    """Mean steps a prompt is held back by TensorRT-LLM's batch waiting (``EngineModel``): the
    first waiting prompt waits ``W`` = ``batch_wait_iters`` steps, or until the waiting prompts
    and the ``(c − 1)·φ`` decode tokens reach ratio × budget (``k`` prompts), and prompts that
    arrive meanwhile (``λ = c·φ / (osl − 1)`` a step, Poisson) leave with it: the mean over a
    release of ``1 + λW`` prompts is ``W·(1 + λW/2) / (1 + λW)``."""
    w = float(eng.batch_wait_iters)
    lam = c * phi / (wl.output_len - 1) if wl.output_len > 1 else 0.0
    if eng.batch_wait_tokens_ratio > 0:
        room = eng.batch_wait_tokens_ratio * eng.budget_tokens - (c - 1) * phi
        k = math.ceil(room / wl.input_len)  # prompts that release the batch by tokens
        if k <= 1:
            return 0.0
        if lam > 0:
            w = min(w, (k - 1) / lam)
    return w * (1 + lam * w / 2) / (1 + lam * w)


def adp_balance_steps(eng: EngineModel, wl: ServingWorkload, c: int, phi: float) -> float:
    """Mean decode steps a prompt is held by TensorRT-LLM's attention-DP balancing
    (``EngineModel.adp_timeout_iters``): prompts are released when every one of the ``k`` ranks
    has one waiting, or ``T`` steps after the last release (the counter runs whether or not a
    prompt waits). A new request goes to a rank below the mean active count, fewest active tokens
    first (ExecutorRequestQueue._balance_requests_across_ranks): in a closed loop the rank a
    request just left, so arrivals land on ranks at random: covering all ``k`` takes
    ``k·H(k)`` arrivals on average (coupon collector), ``k·H(k) / λ`` steps at
    ``λ = c·φ / (osl − 1)`` arrivals a step. An arrival waits half the release interval
    ``min(T, k·H(k) / λ)`` on average, plus ``batching_wait_iters`` when the ranks filled first."""
    k, t = eng.adp_ranks, float(eng.adp_timeout_iters)
    lam = c * phi / (wl.output_len - 1) if wl.output_len > 1 else 0.0
    cover = arrivals_to_cover(k)  # arrivals that reach every rank
    if lam <= 0 or cover / lam >= t:
        return t / 2
    return cover / lam / 2 + eng.adp_batching_wait_iters


@lru_cache(maxsize=64)
def arrivals_to_cover(k: int) -> float:
    """Mean arrivals, landing on ``k`` attention-DP ranks at random, until every rank has one:
    ``k·H(k)`` (the coupon collector; ``H`` the harmonic number)."""
    return k * sum(1.0 / i for i in range(1, k + 1))
