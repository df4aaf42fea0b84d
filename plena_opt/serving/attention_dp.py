"""Attention-DP imbalance: a decode step of a MoE engine waits for its slowest attention-DP rank.

An engine whose attention runs ``ep`` > 1 data-parallel ranks (``Plan.ep``: each rank keeps its
own requests and KV cache) and whose MoE layers span those ranks (any ``moe_tp × moe_ep`` split
of the ``tp·ep`` devices) synchronises every rank at every MoE layer (token dispatch and combine,
or the experts' TP collectives). A decode step therefore lasts as long as the rank with the most
attention (KV-read) work. The evaluator prices one rank at the mean KV length; this module gives
the expected KV work of the busiest rank. Nothing here is fitted.

With ``n`` running requests split as evenly as they go over ``k`` ranks (``⌈n/k⌉`` on
``n mod k`` of them, ``⌊n/k⌋`` on the rest: the request-count imbalance) and, in a closed-loop
steady state, each request's decode progress uniform over its output, one request's KV length is
``L_in + U·L_out`` (U uniform on [0, 1]; lengths drawn uniformly in ``L·(1 ± r)`` when
``range_ratio`` r > 0, as ``vllm bench serve --random-range-ratio``):

* mean ``μ = L_in + L_out/2``;
* variance ``σ² = L_out²/12 + r²·L_out²/9 + r²·L_in²/3`` (progress; output draw:
  Var(U·L_out) = E[U²]·E[L_out²] − μ_out², with Var(L_out) = r²·L_out²/3; input draw).

A rank with ``m`` requests holds a sum of ``m`` such lengths: mean ``m·μ``, standard deviation
``√m·σ``, near normal by the central limit theorem. The expected maximum over ``j`` ranks is
``m·μ + √m·σ·z(j)`` with ``z(j)`` the expected maximum of ``j`` standard normals, taken from
Blom's approximation of normal order statistics, ``z(j) ≈ Φ⁻¹((j − 0.375)/(j + 0.25))``
(G. Blom, *Statistical Estimates and Transformed Beta-Variables*, Wiley 1958; exact at j = 1,
4.5 % high at j = 2 (exact 1/√π), 0.7 % at j = 8, within 0.5 % from 16 to 512 against the exact
integral). The busiest rank is the larger of the two groups' maxima (ranks at ``⌈n/k⌉`` and at
``⌊n/k⌋`` requests). The evaluator already prices ``⌈n/k⌉`` requests per rank at its batch
points (``estimate.shard``: ``b_dev``); ``StepModel`` adds only the difference.

Dense models never get this: pure DP replicas of a dense model share no layer and run as
independent engines (``Plan.dp``; ``serving_rows`` refuses attention DP on a dense model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

BLOM_ALPHA = 0.375  # Blom (1958): plotting position (j − α)/(j + 1 − 2α) of the normal's maximum


@lru_cache(maxsize=1024)  # a pure function of j: each rank count's value once per process
def expected_max_standard_normal(j: int) -> float:
    """E[max of ``j`` independent standard normals] by Blom's approximation (0 at j = 1)."""
    if j < 1:
        raise ValueError(f"j must be at least 1; got {j}")
    return NormalDist().inv_cdf((j - BLOM_ALPHA) / (j + 1 - 2 * BLOM_ALPHA))


@dataclass(frozen=True)
class AttentionDpImbalance:
    """KV work of the busiest of ``ranks`` attention-DP ranks (KV tokens), for a workload of
    ``input_len`` / ``output_len`` tokens with lengths spread by ``range_ratio``."""

    ranks: int
    mean_kv: float  # μ: mean KV tokens of a running request in the steady state
    sd_kv: float  # σ: their standard deviation (tokens)

    @classmethod
    def of(cls, ranks: int, input_len: int, output_len: int,
           range_ratio: float = 0.0) -> AttentionDpImbalance:  # fmt: skip
        """μ and σ of the module docstring for the workload's lengths (tokens)."""
        r2, lo, li = range_ratio**2, float(output_len), float(input_len)
        var = lo * lo / 12 + r2 * lo * lo / 9 + r2 * li * li / 3
        return cls(ranks, li + lo / 2, math.sqrt(var))

    def busiest_kv(self, n: int) -> float:
        """Expected KV tokens of the busiest rank with ``n`` running requests on the engine."""
        per, extra = divmod(n, self.ranks)
        best = None  # the larger of the two groups' maxima: (requests, ranks holding them)
        for m, j in ((per + 1, extra), (per, self.ranks - extra)):
            if m > 0 and j > 0:
                v = m * self.mean_kv + math.sqrt(m) * self.sd_kv * expected_max_standard_normal(j)
                if best is None or v > best:  # ``max``: the first of equal values
                    best = v
        if best is None:
            raise ValueError("busiest_kv needs at least one running request")
        return best

    def factor(self, n: float) -> float:
        """Busiest rank's KV work over the mean rank's (≥ 1; 1 at one rank or no request),
        linear between whole request counts like the step times."""
        if n <= 0 or self.ranks == 1:
            return 1.0
        lo = max(1, math.floor(n))
        f = self._factor_int(lo)
        return f if n <= lo else f + (n - lo) * (self._factor_int(lo + 1) - f)

    def _factor_int(self, n: int) -> float:
        return self.busiest_kv(n) / (n / self.ranks * self.mean_kv)

    def to_dict(self, n: float) -> dict[str, float | int]:
        """The ``attention_dp_imbalance`` document at ``n`` running requests (mean)."""
        return {
            "ranks": self.ranks,
            "running_requests": n,
            "factor": self.factor(n),
            "kv_mean_tokens": self.mean_kv,
            "kv_sd_tokens": self.sd_kv,
        }


def imbalance_of(model: object, plan: object, input_len: int, output_len: int,
                 range_ratio: float) -> AttentionDpImbalance | None:  # fmt: skip
    """The imbalance of ``plan``'s attention-DP ranks (``plan.ep`` > 1) on a MoE ``model``;
    None for a dense model or a plan without attention DP."""
    ranks = int(getattr(plan, "ep", 1))
    if ranks <= 1 or not getattr(model, "num_experts", 0):
        return None
    return AttentionDpImbalance.of(ranks, input_len, output_len, range_ratio)
