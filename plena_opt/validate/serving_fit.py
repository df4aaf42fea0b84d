"""Fit named global serving constants on part of a results file and score them on the rest.

Two constants per engine, both physically a time, both ≥ 0, neither per row nor per model:

* ``ttft_overhead_seconds[engine]``: time a request spends outside the engine's steps before its
  first token reaches the client (HTTP and API server, tokenisation, the wait for the step in
  flight, detokenising and streaming the first token). Added to every predicted TTFT.
* ``host_step_seconds[engine]``: host time per engine step (scheduling, sampling, launch gaps
  outside CUDA graphs). Added to every step, so to TPOT once per output token.

Each is the value that minimises the training rows' MAPE of that metric when added to the
prediction (a weighted median of measured − predicted, weights 1 / measured), clipped at 0.
TPOT moves by the step constant directly; TTFT's share of it (one step per prompt, more under
load) is left out of the fit, a first-order simplification stated here. Leave-one-GPU-out: fit
on one system's rows, score the other's; leave-one-model-out: fit on the other models' rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.validate.serving_score import RowResult, ServingReport


@dataclass(frozen=True)
class Constants:
    """Fitted values per engine (seconds) and the rows they were fitted on."""

    ttft_overhead_seconds: dict[str, float]
    host_step_seconds: dict[str, float]
    fitted_on: str
    rows: int


def _weighted_median_shift(pairs: list[tuple[float, float]]) -> float:
    """The shift o ≥ 0 minimising Σ |p + o − m| / m over (predicted p, measured m)."""
    pts = sorted(((m - p, 1.0 / m) for p, m in pairs), key=lambda t: t[0])
    if not pts:
        return 0.0
    half, acc = sum(w for _, w in pts) / 2, 0.0
    for d, w in pts:
        acc += w
        if acc >= half:
            return max(0.0, d)
    return max(0.0, pts[-1][0])


def fit(rows: list[RowResult], label: str) -> Constants:
    """Both constants per engine over the priced, measured ``rows``."""
    rows = _scored(rows)
    engines = sorted({r.backend for r in rows})
    ttft = {e: 1e-3 * _weighted_median_shift(
        [(r.ttft_ms, r.measured_ttft_ms) for r in rows if r.backend == e]) for e in engines}  # type: ignore[misc]  # fmt: skip
    step = {e: 1e-3 * _weighted_median_shift(
        [(r.tpot_ms, r.measured_tpot_ms) for r in rows if r.backend == e]) for e in engines}  # type: ignore[misc]  # fmt: skip
    return Constants(ttft, step, label, len(rows))


def apply(rows: list[RowResult], c: Constants) -> list[RowResult]:
    """The rows' predictions with the constants added (engines not fitted: unchanged)."""
    out = []
    for r in _scored(rows):
        o = 1e3 * c.ttft_overhead_seconds.get(r.backend, 0.0)
        h = 1e3 * c.host_step_seconds.get(r.backend, 0.0)
        out.append(replace(r, ttft_ms=r.ttft_ms + o, tpot_ms=r.tpot_ms + h))  # type: ignore[operator]
    return out


def _scored(rows: list[RowResult]) -> list[RowResult]:
    return [r for r in rows if r.status == "priced" and r.measured_ttft_ms and r.measured_tpot_ms]


def _mape(rows: list[RowResult], name: str) -> float | None:
    errs = [abs(getattr(r, f"{name}_ms") / getattr(r, f"measured_{name}_ms") - 1) for r in rows]
    return 100 * sum(errs) / len(errs) if errs else None


@dataclass(frozen=True)
class HeldOut:
    """One split: constants fitted on ``train``, MAPE (%) on ``test`` before and after."""

    train: str
    test: str
    rows: int
    constants: Constants
    ttft_before: float | None
    ttft_after: float | None
    tpot_before: float | None
    tpot_after: float | None


def held_out(report: ServingReport, key: Callable[[RowResult], str]) -> list[HeldOut]:
    """For each value of ``key``: fit on the other rows, score the rows with that value."""
    rows = _scored(report.rows)
    out = []
    for v in sorted({key(r) for r in rows}):
        train = [r for r in rows if key(r) != v]
        test = [r for r in rows if key(r) == v]
        c = fit(train, f"all but {v}")
        after = apply(test, c)
        ttft = (_mape(test, "ttft"), _mape(after, "ttft"))
        tpot = (_mape(test, "tpot"), _mape(after, "tpot"))
        out.append(HeldOut(f"all but {v}", v, len(test), c, *ttft, *tpot))
    return out


def cross_validate(report: ServingReport) -> dict[str, list[HeldOut]]:
    """Leave-one-GPU-out and leave-one-model-out figures of the constants."""
    return {"gpu": held_out(report, lambda r: r.system),
            "model": held_out(report, lambda r: r.model)}  # fmt: skip
