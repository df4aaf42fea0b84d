"""One simulation as the page shows it (:class:`SimRun`), its trace download, the noise check, and
simulating a training schedule.

Units: training durations are milliseconds (as ``plena-opt simulate --schedule``); serving plans
are simulated in seconds (as the evaluator) and :attr:`SimRun.to_ms` scales them for the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plena_opt.api.simulation_io import (
    QuantileStats,
    SimulationResult,
    check_schedule_durations,
    chrome_trace,
    chunked_op_types,
    parse_noise,
)
from plena_opt.errors import PlenaInputError, PlenaNotFoundError


@dataclass(frozen=True)
class SimRun:
    """One simulation for the page. ``result`` is the shown timeline's ``SimulationResult``;
    ``to_ms`` scales its times to ms; ``metrics`` are the Monte Carlo figures to tabulate as
    ``(metric, unit, stats, scale)``; ``durations`` the per-op-type inputs used (ms)."""

    mode: str
    title: str
    result: SimulationResult
    to_ms: float
    simulate_comm: bool
    durations_ms: dict[str, float]
    metrics: list[tuple[str, str, QuantileStats, float]] = field(default_factory=list)
    analytic: dict[str, float] | None = None
    notes: list[str] = field(default_factory=list)


def prefixed(exc: PlenaInputError, prefix: str) -> PlenaInputError:
    """The same error with its field under ``prefix`` (``durations.F`` → ``training.…``)."""
    field_name = exc.field or ""
    if field_name.startswith("durations"):
        field_name = field_name.replace("durations", "durations_ms", 1)
    full = f"{prefix}.{field_name}" if field_name else prefix
    cls = PlenaNotFoundError if isinstance(exc, PlenaNotFoundError) else PlenaInputError
    return cls(full, str(exc))


def check_training_size(pp: int, vpp: int, microbatches: int, max_ops: int) -> None:
    """Refuse a schedule above the ``max_ops`` ops the page draws, before building it."""
    if pp * vpp * microbatches * 2 > max_ops:  # every schedule has >= 2 ops per (rank, chunk, mb)
        raise PlenaInputError(
            "training.microbatches",
            f"pp·vpp·microbatches·2 = {pp * vpp * microbatches * 2} ops is above the {max_ops} "
            "ops the UI draws (fewer micro-batches or ranks)",
        )


def run_training(
    schedule: str,
    pp: int,
    vpp: int,
    microbatches: int,
    durations_ms: dict[str, float],
    noise: Any,
    samples: int,
    seed: int,
    simulate_comm: bool,
    max_ops: int,
) -> SimRun:
    """Simulate a training schedule (``durations_ms`` per pipeline stage; chunk ops take F/v)."""
    check_training_size(pp, vpp, microbatches, max_ops)
    from plena_opt import api

    try:
        plan = api.build_schedule(schedule, pp, microbatches, vpp, simulate_comm=simulate_comm)
    except PlenaInputError as exc:
        raise prefixed(exc, "training") from None
    if plan.n_ops > max_ops:
        raise PlenaInputError(
            "training.microbatches",
            f"the plan has {plan.n_ops} ops; the UI draws at most {max_ops} (fewer micro-batches "
            "or ranks)",
        )
    try:
        stage = check_schedule_durations(schedule, durations_ms, simulate_comm=simulate_comm)
        res = api.simulate_schedule(
            plan, stage, noise=noise, samples=samples, seed=seed, simulate_comm=simulate_comm
        ).result
    except PlenaInputError as exc:
        raise prefixed(exc, "training") if exc.field.startswith("durations") else exc from None
    metrics = []
    if res.mc:
        metrics.append(("makespan", "ms", res.mc.makespan, 1.0))
    chunked = chunked_op_types(plan)
    notes = [f"chunk ops take {', '.join(t + '/v' for t in chunked)} (v={vpp})"] if chunked else []
    title = f"{schedule} pp={pp} vpp={vpp} m={microbatches}"
    return SimRun("training", title, res, 1.0, simulate_comm, dict(stage), metrics, None, notes)


def trace_of(run: SimRun, sample: str) -> dict[str, Any]:
    """Chrome/Perfetto trace of one shown timeline (``deterministic``, ``p50`` or ``p99``)."""
    timelines = run.result.timelines()
    if sample not in timelines:
        raise PlenaInputError(
            "sample", f"sample must be one of {', '.join(timelines)}, got {sample!r}"
        )
    unit_us = 1000.0 * run.to_ms
    other = {"unit": "ms" if run.to_ms == 1.0 else "s", "title": run.title}
    return chrome_trace(timelines[sample], unit_us=unit_us, other=other)


def check_noise(noise: Any) -> Any:
    """A validated noise spec within the shared request bounds (errors name
    ``noise.<field>``)."""
    from plena_opt.api.limits import check_noise as within_bounds

    return within_bounds(parse_noise(noise))
