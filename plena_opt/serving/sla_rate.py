"""TTFT and TPOT at a percentile under a Poisson request rate, and the most requests/s one
replica serves within an SLA there (a closed form on top of ``open_loop``'s steady state).

``open_loop`` gives the means: ``N`` requests decoding on average. The tails, derived here:

* **TPOT.** Every admitted request decodes at once (continuous batching), so the requests decoding
  are the busy servers of an M/G/∞ queue: Poisson with mean ``N``. An arriving request sees that
  distribution (PASTA), and decodes beside it. Its TPOT at quantile ``q`` is the step of
  ``1 + N_q`` running requests, ``N_q = N + z_q·√N`` (the normal approximation of the Poisson
  quantile), with the prompt tokens those requests bring (``open_loop._tpot``). This takes one
  snapshot's occupancy for the whole decode; a request's TPOT averages its steps, so the true
  tail is narrower: the figure errs on the safe side.
* **TTFT.** A request first waits for the rest of the step in flight. Arrivals land in long
  steps more often (the inspection paradox): a share ``ρ = λ·S`` of the time goes to steps
  carrying a prompt (``S`` below), the rest to decode steps (TPOT), and the rest of a step is
  uniform within it (``_residual`` solves for its ``q`` quantile). Its prompt then needs
  ``S = k·own`` (``open_loop``'s service at the mean occupancy; the prompt at the tail length
  when the load file gives ``input_tokens_p90`` and ``q ≥ 0.9``), after a wait for room behind
  other prompts that fill a share ``u`` of the budget.
  The wait's mean is the M/D/1 value ``W = S·u / (2(1 − u))`` (as ``open_loop``), and its tail is
  taken exponential (the heavy-traffic form of a single-server queue's wait, Kingman):
  ``P(wait > t) = u·exp(−t·u / W)``, so the ``q`` quantile is ``S / (2(1 − u)) · ln(u / (1 − q))``
  when ``u > 1 − q``, else 0. TTFT_q = ``residual_q + S + wait_q``.

Against the replay (Llama-3.1-70B, H100 TP8, vLLM, 1024/256 tokens, 2–8 requests/s; the 50 ms
p90 TPOT allows 9.6): p90 TPOT 1–20 % above the replay's, p90 TTFT 13–20 % below it (the
replay's prompts also queue behind each other within a step); ``tests/serving/test_capacity.py``
holds TTFT within 0.70–1.05 and TPOT within 0.98–1.25 of the replay at 2, 4 and 6 requests/s.

``max_rate`` bisects the rate (both figures rise with it) up to the rate ``open_loop`` refuses,
and also keeps ``1 + N_q`` within the KV cache's sequences. ``tests/serving/test_capacity.py``
compares the p90 figures with the discrete-event replay (``replay_open_loop``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.serving.open_loop import OpenLoopWorkload, _tpot, open_loop
from plena_opt.serving.request_path import cycles_spread
from plena_opt.serving.steady import SATURATED_U

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel

# standard normal quantiles of the percentiles an SLA may name
Z = {"p50": 0.0, "p90": 1.2815515655446004, "p99": 2.3263478740408408}
QUANTILE = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
RATE_BISECTION_STEPS = 30  # the rate to 1e-9 of its bracket
TRICKLE_RATE = 1e-3  # requests/s: a replica that misses the SLA here misses it at any rate


@dataclass(frozen=True)
class Sla:
    """Upper bounds (seconds; None: no bound) on TTFT and TPOT at ``percentile`` (p50/p90/p99)."""

    ttft_seconds: float | None
    tpot_seconds: float | None
    percentile: str = "p90"

    def __post_init__(self) -> None:
        if self.percentile not in QUANTILE:
            raise PlenaInputError("percentile", f"percentile must be one of {', '.join(QUANTILE)}")


@dataclass(frozen=True)
class TailFigures:
    """TTFT and TPOT (s) at the percentile, and the mean requests decoding."""

    ttft_seconds: float
    tpot_seconds: float
    decoding: float


def tail_figures(
    step: StepModel, wl: OpenLoopWorkload, percentile: str, tail_input_len: int | None = None
) -> TailFigures:
    """TTFT and TPOT at ``percentile`` under ``wl`` (module docstring); raises naming
    ``request_rate`` when the plan cannot keep up."""
    q, z = QUANTILE[percentile], Z[percentile]
    n = open_loop(step, wl).decode_batch
    n_q = n + z * math.sqrt(n)
    tpot = _tpot(step, wl, 1 + n_q)[0]
    isl, osl, budget = wl.input_len, wl.output_len, step.engine.budget_tokens
    own_len = tail_input_len if tail_input_len and q >= 0.9 else isl
    p = n * isl / (osl - 1) if osl > 1 else 0.0
    room = max(1.0, budget - n)
    chunk = min(float(own_len), room)
    u = min(SATURATED_U, p / room)
    steps, x = max(1.0, own_len / room), min(room, chunk + p)
    service = steps * step.step_seconds(x, n)
    # the prompt steps ahead of it hold the engine for their time as the decoders see it (the
    # host dispatch overlapped where arrivals are spread: ``serving.host_overlap``,
    # ``request_path.cycles_spread``); its own step keeps its latency
    held = steps * step.window_seconds(x, n, n if cycles_spread(wl) else 0)
    wait = held / (2 * (1 - u)) * math.log(u / (1 - q)) if u > 1 - q else 0.0
    busy = min(SATURATED_U, wl.request_rate_per_s * held)
    return TailFigures(_residual(q, busy, held, tpot) + service + wait, tpot, n)


def _residual(q: float, busy: float, prompt_step: float, step: float) -> float:
    """Quantile ``q`` of the rest of the step in flight when a request arrives: with the share
    ``busy`` of the time in prompt steps (``prompt_step`` s) and the rest in decode steps
    (``step`` s), ``P(R > t) = busy·(1 − t/prompt_step)⁺ + (1 − busy)·(1 − t/step)⁺``."""
    long_, short = max(prompt_step, step), min(prompt_step, step)
    share = busy if prompt_step >= step else 1 - busy
    if share > 1 - q:
        t = long_ * (1 - (1 - q) / share)
        if t >= short:
            return t
    rate = share / long_ + (1 - share) / short if short > 0 else math.inf
    return q / rate if rate > 0 else 0.0


def meets(fig: TailFigures, sla: Sla) -> bool:
    """Whether ``fig`` is within both bounds of ``sla``."""
    return (sla.ttft_seconds is None or fig.ttft_seconds <= sla.ttft_seconds) and (
        sla.tpot_seconds is None or fig.tpot_seconds <= sla.tpot_seconds
    )


def _ok(
    step: StepModel,
    rate: float,
    isl: int,
    osl: int,
    sla: Sla,
    tail_isl: int | None,
    max_sequences: int | None,
) -> bool:
    try:
        fig = tail_figures(step, OpenLoopWorkload(rate, isl, osl), sla.percentile, tail_isl)
    except PlenaInputError:
        return False
    n_q = fig.decoding + Z[sla.percentile] * math.sqrt(fig.decoding)
    return meets(fig, sla) and (max_sequences is None or 1 + n_q <= max_sequences)


def max_rate(
    step: StepModel,
    isl: int,
    osl: int,
    sla: Sla,
    *,
    tail_input_len: int | None = None,
    max_sequences: int | None = None,
) -> float:
    """The most requests/s (Poisson) one replica serves with ``sla`` met at its percentile
    (0.0: not even a trickle of requests meets it)."""
    hi = TRICKLE_RATE
    if not _ok(step, hi, isl, osl, sla, tail_input_len, max_sequences):
        return 0.0
    while _ok(step, 2 * hi, isl, osl, sla, tail_input_len, max_sequences):
        hi *= 2
        if hi > 1e6:  # pragma: no cover - no plan serves a million requests/s
            break
    lo, hi = hi, 2 * hi
    for _ in range(RATE_BISECTION_STEPS):
        mid = (lo + hi) / 2
        if _ok(step, mid, isl, osl, sla, tail_input_len, max_sequences):
            lo = mid
        else:
            hi = mid
    return lo
