"""Speculative decoding (MTP, EAGLE, n-gram) priced as draft + verify steps of the engine model.

Each decode step of a running request drafts ``K`` tokens, then one verify step of the target
model runs ``K + 1`` query tokens per request (the last accepted token and the K drafts) and keeps
the longest accepted prefix plus the target's own next token. With ``a_i`` the probability that
draft ``i`` is accepted given drafts ``1..i−1`` were, a step yields on average

    E = 1 + Σ_{k=1..K} Π_{i≤k} a_i   tokens per request (Leviathan et al. 2023, chain drafts).

**Verify step** (``VerifyStepModel``): a decode step of ``n`` requests × ``K + 1`` tokens: the
weights are read once, each request's KV cache once, and the linear layers compute ``(K + 1)·n``
tokens. It is priced by the evaluator as the decode step of ``(K + 1)·n`` sequences whose KV
length is ``1 / (K + 1)`` of the workload's (input and output scaled): same weight bytes, same
KV bytes, ``K + 1`` times the GEMM work (and, for MoE, the experts those tokens route to). The
attention FLOPs stay those of ``n`` queries per KV read (a verify runs ``K + 1`` per read; decode
attention is memory-bound at the ≤ 9 queries per KV head this adds for GQA models, not
necessarily for MLA's absorbed 128 heads). A verify batch above the engine's CUDA-graph limit
(counted in tokens, as vLLM captures graphs by token count) pays the eager host time.

**Draft** (per step, ``K`` sequential draft passes of ``n`` requests): MTP and EAGLE run one
decoder layer of the target's width per draft token (DeepSeek-V3's MTP module is one Transformer
block, arXiv 2412.19437 §2.2; EAGLE's draft head is one decoder layer, arXiv 2401.15077 §4), priced
as ``1 / num_layers`` of the target's decode step of ``n`` requests each; n-gram (prompt lookup)
is a host-side match, priced at 0.

**TPOT**: a request's mean TPOT under load (``steady``) is its decode step + host time per step +
the share of other requests' prompt chunks per output token. Speculation divides the per-step part
by ``E`` and keeps the prompt work per output token (each request still brings one prompt per
``osl`` output tokens): ``TPOT' = (verify + draft + host) / E + (TPOT − decode − host)``, at the
decode batch of the run without speculation (with faster requests a closed loop keeps about the
same batch; a Poisson load would run a smaller one, so the verdict there is conservative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plena_opt.bounds import MAX_SPECULATIVE_TOKENS
from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.serving.steps import StepModel

METHODS = ("mtp", "eagle", "ngram")

# Published acceptance measurements, as conditional per-position rates a_1..a_k.
#: DeepSeek-V3 technical report (arXiv 2412.19437, §5.4.3 "Multi-Token Prediction Evaluation"):
#: "the acceptance rate of the second token prediction ranges between 85% and 90%" (one MTP
#: module, K = 1, across generation topics); the low end is taken. Beyond K = 1 nothing is
#: published for it: give --acceptance.
MTP_ACCEPTANCE = (0.85,)
MTP_SOURCE = "DeepSeek-V3 technical report, arXiv 2412.19437 §5.4.3 (85-90 %, low end)"
#: EAGLE-3 on gpt-oss-20b, vLLM PR #42764 (test plan, "Existing" drafter, K = 5, max_num_seqs 8):
#: acceptance at positions 0..4 of all drafts 0.622, 0.356, 0.203, 0.119, 0.060 (mean acceptance
#: length 2.359 = 1 + their sum); conditional rates are their successive ratios.
_EAGLE_AT = (0.622, 0.356, 0.203, 0.119, 0.060)
EAGLE_ACCEPTANCE = tuple(
    round(p / q, 4) for p, q in zip(_EAGLE_AT, (1.0, *_EAGLE_AT[:-1]), strict=True)
)
EAGLE_SOURCE = "vLLM PR #42764: EAGLE-3 on gpt-oss-20b, K=5 (acceptance length 2.36)"
DEFAULTS = {"mtp": (MTP_ACCEPTANCE, MTP_SOURCE), "eagle": (EAGLE_ACCEPTANCE, EAGLE_SOURCE)}
# n-gram (prompt lookup) has no default: its acceptance is how much the output copies the
# prompt (vLLM PR #24344 measured 0.81 at the first position on a code-editing set, far above
# chat), so it is asked for, not assumed.


@dataclass(frozen=True)
class Speculation:
    """A speculative decoding setting: ``method`` (mtp, eagle, ngram), ``k`` draft tokens per
    step and the conditional acceptance rate of each position (``source``: where it is from)."""

    method: str
    k: int
    acceptance: tuple[float, ...]
    source: str

    @property
    def expected_tokens_per_step(self) -> float:
        """E = 1 + Σ_k Π_{i≤k} a_i: tokens a request gains per verify step."""
        return expected_tokens(self.acceptance)


def expected_tokens(acceptance: tuple[float, ...]) -> float:
    """Mean tokens per step of chain drafts with conditional acceptance rates ``acceptance``."""
    total, run = 1.0, 1.0
    for a in acceptance:
        run *= a
        total += run
    return total


def speculation(method: str, k: int, acceptance: tuple[float, ...] | None = None) -> Speculation:
    """The checked setting; without ``acceptance`` the method's published default (first k).
    Bad input raises naming ``speculative_method``, ``speculative`` or ``acceptance``."""
    if method not in METHODS:
        raise PlenaInputError(
            "speculative_method",
            f"--speculative-method must be one of {', '.join(METHODS)}; got {method!r}",
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SPECULATIVE_TOKENS:
        raise PlenaInputError(
            "speculative",
            f"--speculative (draft tokens per step) must be 1..{MAX_SPECULATIVE_TOKENS}; got {k!r}",
        )
    if acceptance is None:
        if method not in DEFAULTS:
            raise PlenaInputError(
                "acceptance",
                f"{method} has no published default acceptance (it depends on how much the "
                "output repeats the prompt): give --acceptance a1,...,aK",
            )
        rates, source = DEFAULTS[method]
        if k > len(rates):
            raise PlenaInputError(
                "acceptance",
                f"the published {method} acceptance ({source}) covers K <= {len(rates)}; "
                f"give --acceptance with {k} rates for --speculative {k}",
            )
        return Speculation(method, k, rates[:k], source)
    rates = tuple(acceptance)
    if len(rates) != k:
        raise PlenaInputError(
            "acceptance",
            f"--acceptance needs one rate per draft token: {k} for --speculative {k}, "
            f"got {len(rates)}",
        )
    for a in rates:
        if not (isinstance(a, int | float) and math.isfinite(a) and 0 < a <= 1):
            raise PlenaInputError("acceptance", f"--acceptance rates must be in (0, 1]; got {a!r}")
    return Speculation(method, k, tuple(float(a) for a in rates), "given")


class VerifyStepModel:
    """Seconds of a verify step and of the drafts for ``n`` decoding requests (module doc).
    ``verify_costs``: the evaluator's step costs of the workload with KV lengths scaled by
    1 / (K + 1) (``EvaluatorStepCosts``); ``plain``: the engine's step model without it."""

    def __init__(self, spec: Speculation, verify_costs: object, plain: StepModel,
                 num_layers: int) -> None:  # fmt: skip
        self.spec, self.costs, self.plain, self.layers = spec, verify_costs, plain, num_layers
        self._memo: dict[int, float] = {}

    def _verify_int(self, n: int) -> float:
        if n not in self._memo:
            tokens = n * (self.spec.k + 1)
            t = self.costs.decode_mean_seconds(tokens)  # type: ignore[attr-defined]
            if self.plain.attention_dp is not None:  # the same KV per rank waits for the busiest
                t += self.plain.straggler_seconds(n)
            limit = self.plain.engine.cuda_graph_max_batch
            if limit is not None and tokens > limit:
                t += self.plain.costs.host_seconds
            self._memo[n] = t
        return self._memo[n]

    def verify_seconds(self, n: float) -> float:
        """The verify step of ``n`` requests (linear between whole ones), host time excluded."""
        if n <= 0:
            return 0.0
        if n < 1:
            return n * self._verify_int(1)
        lo = math.floor(n)
        t = self._verify_int(lo)
        return t if n == lo else t + (n - lo) * (self._verify_int(lo + 1) - t)

    def draft_seconds(self, n: float) -> float:
        """The K draft passes of ``n`` requests: one layer's share of a decode step each."""
        if self.spec.method == "ngram":
            return 0.0
        return self.spec.k * self.plain.decode_seconds(n) / self.layers

    def tpot(self, tpot_plain: float, n: float) -> float:
        """Mean TPOT with speculation from the plain run's ``tpot_plain`` at decode batch ``n``."""
        host = self.plain.engine.host_step_seconds
        rest = max(0.0, tpot_plain - self.plain.decode_seconds(n) - host)
        step = self.verify_seconds(n) + self.draft_seconds(n) + host
        return step / self.spec.expected_tokens_per_step + rest
