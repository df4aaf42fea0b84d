"""Use case: price one plan (distributed with a NoC, or the single-chip estimate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from plena_opt.api.problems import evaluator_of
from plena_opt.errors import PlenaInputError
from plena_opt.jsonio import dumps as strict_json

if TYPE_CHECKING:
    from plena_opt.estimate.cost import CostFigures, Prices
    from plena_opt.estimate.evaluator import Evaluator, PlanMetrics
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import EvaluatorInputs


@dataclass(frozen=True)
class PlanEstimate:
    """One plan priced. ``document`` is the reference JSON document (``estimate --json``; SI:
    seconds, tokens/s, bytes, pJ); ``metrics`` the headline ``PlanMetrics`` (seconds, tokens/s,
    J/token, bytes per device; None for the single-chip estimate); ``cost`` its dollars per
    million tokens, tokens/s per kW and power per device (``estimate.cost``; None: not priced)."""

    mode: Literal["distributed", "single_chip"]
    document: dict[str, Any]
    metrics: PlanMetrics | None = None
    cost: CostFigures | None = None

    def to_json(self) -> str:
        """The document as compact JSON (what the gRPC ``estimate_json`` field carries)."""
        return strict_json(self.document)

    def to_text(self, *, as_json: bool = False) -> str:
        """What ``plena-opt estimate`` prints (``--json``: the indented document)."""
        from plena_opt.estimate.report import estimate_output, single_chip_output

        if self.mode == "single_chip":
            return single_chip_output(self.document, as_json=as_json)
        assert self.metrics is not None
        return estimate_output(self.document, self.metrics, as_json=as_json, cost=self.cost)


def estimate_plan(
    problem: EvaluatorInputs | Evaluator, plan: Plan, prices: Prices | None = None
) -> PlanEstimate:
    """The distributed estimate of ``plan``, its metrics and its cost (``prices``: a loaded
    price file; None: the shipped defaults), from one pricing."""
    from plena_opt.estimate.cost import load_prices, plan_cost

    ev = evaluator_of(problem)
    estimate, metrics = ev.estimate_with_metrics(plan)
    cost = plan_cost(metrics, ev.workload, ev.chip_name, prices or load_prices())
    doc = estimate.to_dict()
    power = ev.ctx.pricer.power_report()  # a PLENA chip's compute power (issue 30)
    if power is not None:
        doc["chip_power"] = power
    return PlanEstimate("distributed", doc, metrics, cost)


def estimate_single_chip(problem: EvaluatorInputs, plan: Plan | None = None) -> PlanEstimate:
    """The single-chip decoder estimate (analytic-model §2); the NoC is not used. A plan other
    than one device is refused (field ``noc``: it needs a NoC profile)."""
    from plena_opt.estimate.single_chip import estimate_single_chip as single

    if plan is not None and plan.world_size != 1:
        raise PlenaInputError("noc", "a multi-device plan needs a NoC profile")
    from plena_opt.estimate.pricer import pricer_of

    refusal = pricer_of(problem.chip).single_chip_refusal  # by the chip's kind (a GPU: a node)
    if refusal is not None:
        raise PlenaInputError("noc", refusal)
    est = single(problem.model, problem.memory, problem.workload, problem.chip)
    return PlanEstimate("single_chip", est.to_dict())
