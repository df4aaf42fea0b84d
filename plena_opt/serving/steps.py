"""Step times of a continuous-batching engine, from the evaluator.

A step runs ``prefill_tokens`` prompt tokens (chunks of waiting requests) and one token of each of
``decoding`` running requests. Its time is the evaluator's prefill pass over those prompt tokens
(``EvaluatorStepCosts.prefill_seconds``: whole prompts of the workload's length, a short chunk as
its share of one prompt's kernels plus the whole eager host time) plus the decode step of the
running requests at the mean KV length over the output (``decode_mean_seconds``: 1 /
``tps_per_sequence`` of a static batch of that size), plus the engine's host time per step. A
decode batch above the engine's CUDA-graph limit pays the eager host time of a forward.
Fractional batches (the steady-state model's means) interpolate linearly between whole ones;
below one request a decode step costs that fraction of a one-request step (the share of steps
that have one). A MoE plan with attention-DP ranks (``Plan.ep`` > 1) waits each decode step for
its busiest rank: the step's KV-dependent part is scaled to that rank's KV work
(``serving.attention_dp``; the replay and the steady state both read it here, so they agree on it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from plena_opt.estimate.gpu_queue import EvaluatorStepCosts
from plena_opt.serving.attention_dp import AttentionDpImbalance, imbalance_of
from plena_opt.serving.host_overlap import chunk_in_decode_window

if TYPE_CHECKING:
    from plena_opt.serving.engines import EngineModel


def engine_workload(workload: object, engine: EngineModel) -> object:
    """``workload`` with the engine's kernel choices that change the pricing (an estimate
    ``Workload``: ``fused_input_quant``); itself where nothing changes."""
    from dataclasses import replace

    fused = engine.fused_input_quant
    if getattr(workload, "fused_input_quant", fused) == fused:
        return workload
    return replace(workload, fused_input_quant=fused)  # type: ignore[type-var]


class StepModel:
    """Seconds per engine step for one (model, plan, chip, NoC, workload) and one engine."""

    def __init__(self, costs: EvaluatorStepCosts, engine: EngineModel, gpus: int,
                 attention_dp: AttentionDpImbalance | None = None) -> None:  # fmt: skip
        self.costs, self.engine, self.gpus = costs, engine, gpus
        self.attention_dp = attention_dp  # None: no attention-DP ranks synchronised by MoE
        # ``decode_mean_seconds(n) - decode_seconds(n)`` in one read (``straggler_seconds``)
        self._growth = getattr(costs, "decode_growth", None)
        # (``decode_mean_seconds(n)``, ``decode_growth(n)``) in one read (``_decode_int``)
        self._mean_growth = getattr(costs, "decode_mean_and_growth", None)
        self._decode: dict[int, float] = {}
        self._spread: dict[float, StepModel] = {}
        self._prefill: dict[float, float] = {}
        # look-ups of the kept figures (None when not priced yet): whole request counts →
        # decode part, prompt tokens → prefill part; the fixed points read them inline
        self.decode_kept, self.prefill_kept = self._decode.get, self._prefill.get
        # n → (decode part at n, at n + 1 − at n) once both are kept: ``decode_seconds``'s
        # interpolation ``t + (x − n)·(h − t)`` with its difference taken once (the same floats)
        self.decode_lines: dict[int, tuple[float, float]] = {}
        # values of the steady-state model that depend on this step model only (steady.py)
        self.memo: dict[tuple, object] = {}

    @classmethod
    def from_problem(cls, model: object, noc: object, memory: object, chip: object,
                     workload: object, plan: object, engine: EngineModel,
                     evaluators: dict | None = None,
                     range_ratio: float = 0.0) -> StepModel:  # fmt: skip
        """Build the evaluator's step costs for the plan (``workload``: an estimate Workload
        whose lengths are the serving workload's) and wrap them; ``evaluators``: a cache shared
        by the step models of many plans of one problem (``EvaluatorStepCosts``);
        ``range_ratio``: the serving workload's length spread (the attention-DP imbalance)."""
        workload = engine_workload(workload, engine)
        costs = EvaluatorStepCosts(model, noc, memory, chip, workload, plan, evaluators)  # type: ignore[arg-type]
        wl = workload
        adp = imbalance_of(model, plan, wl.input_seq_len, wl.output_seq_len, range_ratio)  # type: ignore[attr-defined]
        return cls(costs, engine, plan.world_size, adp)  # type: ignore[attr-defined]

    def with_spread(self, range_ratio: float) -> StepModel:
        """This step model for lengths drawn with ``range_ratio`` (the same evaluator costs);
        itself when it has no attention-DP imbalance."""
        adp = self.attention_dp
        if adp is None:
            return self
        if range_ratio not in self._spread:
            wl = self.costs.workload
            new = AttentionDpImbalance.of(
                adp.ranks, wl.input_seq_len, wl.output_seq_len, range_ratio
            )
            self._spread[range_ratio] = StepModel(self.costs, self.engine, self.gpus, new)
        return self._spread[range_ratio]

    def _decode_int(self, n: int) -> float:
        if n not in self._decode:
            adp = self.attention_dp
            if adp is None:
                t = self.costs.decode_mean_seconds(n)
            elif self._mean_growth is not None and self.costs.workload.output_seq_len > 1:
                # the busiest rank's wait (``straggler_seconds``), the bracket read once
                t, grow = self._mean_growth(n)
                t += self._straggler(n, grow)
            else:  # MoE attention-DP ranks: the busiest one's wait
                t = self.costs.decode_mean_seconds(n) + self.straggler_seconds(n)
            t *= self.engine.decode_kernel_scale  # the engine's own kernels (kernel_scale)
            limit = self.engine.cuda_graph_max_batch
            if limit is not None and n > limit:
                t += self.costs.host_seconds
            kept, lines = self._decode, self.decode_lines
            kept[n] = t
            if n - 1 in kept:
                lines[n - 1] = (kept[n - 1], t - kept[n - 1])
            if n + 1 in kept:
                lines[n] = (t, kept[n + 1] - t)
        return self._decode[n]

    def straggler_seconds(self, n: int) -> float:
        """Extra seconds of a decode step of ``n`` requests waiting for the busiest attention-DP
        rank: the step's KV-dependent part per request at the mean KV length × (the busiest
        rank's KV work in requests − the requests per rank the evaluator priced). The KV part is
        the evaluator's own growth over the output: (mean step − first step) / ((osl − 1)/2)
        seconds per KV token, × the mean KV length ``L_in + (osl − 1)/2``."""
        adp, wl = self.attention_dp, self.costs.workload
        half = (wl.output_seq_len - 1) / 2
        if adp is None or half <= 0:  # no decode growth to read the KV part from
            return 0.0
        growth = self._growth  # the step costs' one-read form, where they have one
        if growth is not None:
            grow = growth(n)
        else:
            grow = self.costs.decode_mean_seconds(n) - self.costs.decode_seconds(n)
        return self._straggler(n, grow)

    def _straggler(self, n: int, grow: float) -> float:
        """``straggler_seconds(n)`` from the decode growth ``grow`` at ``n`` (s): its
        expression, each ``max(0, x)`` written as the comparison that picks the same operand."""
        adp, wl = self.attention_dp, self.costs.workload
        half = (wl.output_seq_len - 1) / 2
        if adp is None or half <= 0:  # no decode growth to read the KV part from
            return 0.0
        kv_part = (grow if grow > 0.0 else 0.0) / half * (wl.input_seq_len + half)
        lo = 1 << (n.bit_length() - 1)  # requests per rank as the step costs interpolate them
        ranks = adp.ranks
        per_lo, per_hi = -(-lo // ranks), -(-2 * lo // ranks)  # ⌈lo / ranks⌉, ⌈2·lo / ranks⌉
        priced = per_lo + (n - lo) / lo * (per_hi - per_lo)
        over = adp.busiest_kv(n) / adp.mean_kv - priced
        return kv_part / priced * (over if over > 0.0 else 0.0)

    def decode_seconds(self, n: float) -> float:
        """A step's decode part for ``n`` running requests (0 when none), host time excluded."""
        if n <= 0:
            return 0.0
        if n < 1:
            return n * self._decode_int(1)
        lo = int(n)  # math.floor of n ≥ 1
        t = self._decode.get(lo)  # the usual case: both ends already priced
        if t is None:
            t = self._decode_int(lo)
        if n == lo:
            return t
        hi = self._decode.get(lo + 1)
        if hi is None:
            hi = self._decode_int(lo + 1)
        return t + (n - lo) * (hi - t)

    def prefill_seconds(self, tokens: float) -> float:
        """A step's prefill part for ``tokens`` prompt tokens (0 when none), kept per count."""
        t = self._prefill.get(tokens)
        if t is None:
            t = self.costs.prefill_seconds(tokens) if tokens > 0 else 0.0  # type: ignore[arg-type]
            self._prefill[tokens] = t
        return t

    def step_seconds(self, prefill_tokens: float, decoding: float) -> float:
        """One step: prefill part + decode part + the engine's host time per step."""
        return (self.prefill_seconds(prefill_tokens) + self.decode_seconds(decoding)
                + self.engine.host_step_seconds)  # fmt: skip

    def decode_floor_seconds(self, n: float) -> float | None:
        """The step costs' floor of a decode step of ``n`` requests (s; the bytes it streams at
        least, ``estimate.decode_floor``; None for step costs that give none): where the open
        loop's search starts (``serving.spine.open_near``), never a figure."""
        return self.decode_floor_reader()(n)

    def decode_floor_reader(self) -> Callable[[float], float | None]:
        """``decode_floor_seconds`` as a function of ``n`` alone, the floor read once (what
        ``serving.spine.open_near`` calls, up to 8 times)."""
        floor = getattr(self.costs, "decode_floor", None)
        return _no_floor if floor is None else floor.seconds

    @property
    def eager_host_seconds(self) -> float:
        """Seconds of an eager forward's host dispatch inside a prefill figure (the step costs'
        ``host_seconds``; 0 for step costs that carry none): what ``serving.host_overlap``
        hides behind the decode steps around a prompt chunk."""
        return getattr(self.costs, "host_seconds", 0.0)

    def window_seconds(self, prefill_tokens: float, decoding: float, around: float) -> float:
        """``step_seconds`` as the ``around`` requests decoding in or beside the step see it: its
        prompt chunk's eager host dispatch overlapped with the device's work
        (``serving.host_overlap``: the decode step of ``around`` requests hides it); the whole
        step when it carries no prompt tokens or nobody decodes around it."""
        pre = self.prefill_seconds(prefill_tokens)
        if prefill_tokens > 0 and around > 0:
            eager, engine = self.eager_host_seconds, self.engine
            pre = chunk_in_decode_window(pre, eager, self.decode_seconds(around), engine)
        return pre + self.decode_seconds(decoding) + self.engine.host_step_seconds


def _no_floor(n: float) -> None:
    """The floor of step costs that give none (``StepModel.decode_floor_reader``)."""
    return None
