"""Use cases: simulate one serving plan, or one training pipeline schedule (pipeline-simulator)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plena_opt.api.problems import evaluator_of

if TYPE_CHECKING:
    from plena_opt.estimate.evaluator import Evaluator
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.simulator.engine import NoiseSpec, ServingResult, SimulationResult
    from plena_opt.simulator.scheduler import InferenceStageTimes, PipelinePlan
    from plena_opt.stop import StopToken


@dataclass(frozen=True)
class ServingSimulation:
    """A plan's serving windows simulated (seconds, tokens/s) beside its estimate document."""

    estimate: dict[str, Any]
    result: ServingResult

    @property
    def micro_batches(self) -> int:
        return self.result.times.micro_batches

    @property
    def decode_steps(self) -> int:
        return self.result.times.decode_steps

    @property
    def n_ops(self) -> int:
        return self.result.window.plan.n_ops

    def document(self) -> dict[str, Any]:
        """The ``simulate --json`` document (also the gRPC ``result_json``)."""
        from plena_opt.simulator.report import serving_document

        return serving_document(self.result, self.estimate.get("plan"))

    def trace_documents(self) -> dict[str, dict]:
        """Chrome traces of the serving window by name (``deterministic``, ``p50``, …; µs)."""
        from plena_opt.simulator.engine import chrome_trace

        other = {"plan": self.estimate.get("plan"), "unit": "s"}
        return {
            name: chrome_trace(tl, unit_us=1e6, other=other)
            for name, tl in self.result.window.timelines().items()
        }

    def to_text(self, doc: dict[str, Any], trace_paths: list[str]) -> str:
        """The ``simulate`` table of ``doc`` (``document()``, local or received)."""
        from plena_opt.simulator.report import render_serving

        return render_serving(
            doc,
            trace_paths,
            micro_batches=self.micro_batches,
            decode_steps=self.decode_steps,
            n_ops=self.n_ops,
        )


@dataclass(frozen=True)
class ScheduleSimulation:
    """A training schedule simulated (milliseconds) with the per-stage durations given."""

    result: SimulationResult
    stage_ms: dict[str, float]

    def document(self) -> dict[str, Any]:
        from plena_opt.simulator.report import schedule_document

        return schedule_document(self.result, self.stage_ms)

    def trace_documents(self) -> dict[str, dict]:
        from plena_opt.simulator.engine import chrome_trace

        return {
            name: chrome_trace(tl, unit_us=1000.0, other={"unit": "ms"})
            for name, tl in self.result.timelines().items()
        }


def simulate_plan(
    problem: EvaluatorInputs | Evaluator,
    plan: Plan,
    *,
    noise: NoiseSpec | Mapping | str | None = None,
    samples: int = 1000,
    seed: int = 0,
    max_window_steps: int = 64,
    check_work: Callable[[InferenceStageTimes], None] | None = None,
    simulate_comm: bool = True,
    stop: StopToken | None = None,
) -> ServingSimulation:
    """Estimate ``plan`` and simulate its serving windows (``samples`` Monte Carlo draws under
    ``noise``); ``check_work(times)`` may refuse the work before it runs (server limits);
    ``simulate_comm=False`` leaves the pipeline hops out (pipeline-simulator §0 rule 4);
    ``stop`` (deadline / cancel token) ends the Monte Carlo early (``result.partial``)."""
    from plena_opt.simulator.engine import simulate_estimate

    est = evaluator_of(problem).estimate(plan).to_dict()
    res = simulate_estimate(
        est,
        noise,
        samples,
        seed,
        max_window_steps,
        check_work,
        simulate_comm=simulate_comm,
        stop=stop,
    )
    return ServingSimulation(est, res)


def build_schedule(
    schedule: str, pp: int, microbatches: int, vpp: int = 1, *, simulate_comm: bool = False
) -> PipelinePlan:
    """The ops of a training schedule (``gpipe``, ``1f1b``, … on ``pp`` stages); with
    ``simulate_comm`` also its point-to-point sends (``XF``/``XB`` ops)."""
    from plena_opt.simulator.scheduler import build_schedule as build

    return build(schedule, pp, microbatches, vpp, simulate_comm)


def simulate_schedule(
    plan: PipelinePlan,
    stage_ms: Mapping[str, float],
    *,
    noise: NoiseSpec | Mapping | str | None = None,
    samples: int = 1000,
    seed: int = 0,
    simulate_comm: bool | None = None,
    stop: StopToken | None = None,
) -> ScheduleSimulation:
    """Simulate a schedule with ``stage_ms`` per op type and pipeline stage (ms; with vpp > 1
    each chunk op takes F/v, pipeline-simulator §1.3). ``simulate_comm=False`` filters the
    plan's communication ops out; None simulates the plan as built. ``stop`` ends the Monte Carlo
    early."""
    from plena_opt.simulator.engine import parse_noise, per_op_durations, simulate

    stage = {k: float(v) for k, v in stage_ms.items()}
    res = simulate(
        plan,
        per_op_durations(plan, stage),
        parse_noise(noise),
        samples,
        seed,
        simulate_comm=simulate_comm,
        stop=stop,
    )
    return ScheduleSimulation(res, stage)
