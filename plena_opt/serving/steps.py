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
that have one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.estimate.gpu_queue import EvaluatorStepCosts
    from plena_opt.serving.engines import EngineModel


class StepModel:
    """Seconds per engine step for one (model, plan, chip, NoC, workload) and one engine."""

    def __init__(self, costs: EvaluatorStepCosts, engine: EngineModel, gpus: int) -> None:
        self.costs, self.engine, self.gpus = costs, engine, gpus
        self._decode: dict[int, float] = {}
        self._prefill: dict[float, float] = {}
        # values of the steady-state model that depend on this step model only (steady.py)
        self.memo: dict[tuple, object] = {}

    @classmethod
    def from_problem(cls, model: object, noc: object, memory: object, chip: object,
                     workload: object, plan: object, engine: EngineModel,
                     evaluators: dict | None = None) -> StepModel:  # fmt: skip
        """Build the evaluator's step costs for the plan (``workload``: an estimate Workload
        whose lengths are the serving workload's) and wrap them; ``evaluators``: a cache shared
        by the step models of many plans of one problem (``EvaluatorStepCosts``)."""
        from plena_opt.estimate.gpu_queue import EvaluatorStepCosts

        costs = EvaluatorStepCosts(model, noc, memory, chip, workload, plan, evaluators)  # type: ignore[arg-type]
        return cls(costs, engine, plan.world_size)  # type: ignore[attr-defined]

    def _decode_int(self, n: int) -> float:
        if n not in self._decode:
            t = self.costs.decode_mean_seconds(n)
            limit = self.engine.cuda_graph_max_batch
            if limit is not None and n > limit:
                t += self.costs.host_seconds
            self._decode[n] = t
        return self._decode[n]

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
