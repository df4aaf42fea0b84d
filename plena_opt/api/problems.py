"""Use cases: load a problem, enumerate its plans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.problem import EvaluatorInputs, ProblemSpec

if TYPE_CHECKING:
    from plena_opt.estimate.evaluator import Evaluator
    from plena_opt.estimate.plan import Plan


def problem_spec(spec: ProblemSpec | Mapping[str, Any] | None = None, **fields: Any) -> ProblemSpec:
    """A validated ``ProblemSpec`` from a spec, a mapping of its fields or keyword fields."""
    if isinstance(spec, ProblemSpec):
        return spec.model_copy(update=fields) if fields else spec
    try:
        return ProblemSpec(**{**dict(spec or {}), **fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "problem"
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise PlenaInputError(loc, f"{loc}: {msg}") from exc


def load_problem(
    spec: ProblemSpec | Mapping[str, Any] | None = None, **fields: Any
) -> EvaluatorInputs:
    """Load what ``spec`` names: model, NoC, memory and chip (built-in names, JSON paths or inline
    documents) and the workload. ``load_problem(model="llama-3.1-8b", noc=…)`` works too. Bad
    input raises ``PlenaInputError`` naming the field."""
    return problem_spec(spec, **fields).load()


def evaluator_of(problem: EvaluatorInputs | Evaluator) -> Evaluator:
    """The evaluator of a loaded problem (an ``Evaluator`` passes through, e.g. a cached one)."""
    return problem.evaluator() if isinstance(problem, EvaluatorInputs) else problem


def enumerate_plans(problem: EvaluatorInputs | Evaluator) -> list[Plan]:
    """Every legal plan on the problem's cluster (``Evaluator.legal_plans``)."""
    return evaluator_of(problem).legal_plans()
