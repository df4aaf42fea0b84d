"""Use case: error bars on a search's front and the robust front (issue 30 item 4).

``annotate_front`` gives every front plan an interval when its serving workload and engine are
known (a search under load: ``request.engine`` and ``request.concurrency``): the shipped measured
group of exactly (engine, GPU, concurrency band) (``serving.error_bars.measured_band``) applied to
TTFT and TPOT and carried to tokens/s/device and $/Mtok (``error_bars.propagate``); otherwise no
interval and the reason. A DP plan's engines each see the clients split over its replicas, so
its band is that concurrency's; the measurements hold means only, so a search judged at a
percentile takes the mean's ratios for it. Each plan is then marked ``robust`` when its SLA
(``--max-ttft-ms``, ``--max-tpot-ms``, ``--min-tps-per-seq``, ``--max-cost-per-mtok``) still holds
at the interval's pessimistic end with the chip's peaks × ``ROBUST_PEAK_FACTOR``
(``estimate.derate``; the plan is re-priced there and its figures scaled by the ratio derated /
nominal), else with the reason (None: not judged, and why). ``robust_search`` prepares
``search --robust``: the derated problem and the SLA tightened by the least pessimistic ratios of
the bands any plan can have, in its own study; ``annotate_front(derated=True)`` then keeps the
Pareto front of the plans robust at their own band.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.derate import ROBUST_PEAK_FACTOR, derate
from plena_opt.metrics import INTERVAL_BASIS, interval_fields

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.result import FrontEntry, SearchResult
    from plena_opt.serving.error_bars import ErrorBand

NO_WORKLOAD = (
    "no interval: the measured error is of an engine under a serving workload; these figures "
    "are the static batch model (search under load with --concurrency and --engine gives one)"
)


@dataclass(frozen=True)
class Band:
    """The measured group a search's plans take their interval from (None: ``note`` says why)."""

    band: ErrorBand | None
    note: str | None


def search_band(request: Any, problem: EvaluatorInputs, dp: int = 1) -> Band:
    """The interval of a plan with ``dp`` replicas in a search: (engine, GPU, band of the
    concurrency one engine sees, the clients split over the DP replicas, rounded up) when the
    search prices a serving workload, else none with the reason."""
    from plena_opt.serving.error_bars import load_table, measured_band

    engine = getattr(request, "engine", None)
    concurrency = getattr(request, "concurrency", None)
    rate = getattr(request, "request_rate", None)
    if concurrency is None and rate is None:
        return Band(None, NO_WORKLOAD)
    chip = getattr(problem.chip, "name", None)
    if chip is None or getattr(problem.chip, "kind", None) != "gpu":
        return Band(None, "no interval: serving engines were measured on GPU chips only")
    per_engine = None if concurrency is None else -(-concurrency // max(1, dp))
    band, note = measured_band(load_table(), engine or "vllm", chip, per_engine)
    return Band(band, note)


def annotate_front(
    result: SearchResult, request: Any, problem: EvaluatorInputs, derated: bool = False
) -> Band:
    """Intervals and robustness on every front plan (module docstring). ``derated``: a
    ``search --robust`` result, its figures already at the scaled peaks: every feasible plan
    scored is judged at its own band and the front becomes the Pareto front of the robust ones.
    Returns the band of a single-replica plan (each plan's own is on its entry)."""
    if derated:
        return _keep_robust(result, request, problem)
    return annotate_entries(result.front, request, problem)


def annotate_entries(
    entries: list[FrontEntry], request: Any, problem: EvaluatorInputs, derated: bool = False
) -> Band:
    """``annotate_front`` on a list of plans (each with the band of its DP size)."""
    bands: dict[int, Band] = {}
    scaled = None if derated else _derated_or_reason(problem)
    ratios = [(1.0, 1.0, 1.0)] * len(entries)
    if scaled is not None and not isinstance(scaled, str):
        ratios = peak_ratios(entries, problem, scaled)
    for e, r in zip(entries, ratios, strict=True):
        dp = int(e.plan.get("dp", 1))
        if dp not in bands:
            bands[dp] = search_band(request, problem, dp)
        _interval(e, bands[dp])
        _robust(e, bands[dp], request, scaled, r)
    return bands.get(1) or search_band(request, problem)


def _keep_robust(result: SearchResult, request: Any, problem: EvaluatorInputs) -> Band:
    """The Pareto front (``result``'s objectives) of the feasible scored plans that are robust
    (or not judged); the front is left as is when all of its plans are."""
    import numpy as np

    from plena_opt.search.fronts.pareto import pareto_mask

    band = annotate_entries(result.front, request, problem, derated=True)
    if all(e.robust is not False for e in result.front):
        return band
    seen = {_identity(e) for e in result.front}
    pool = [e for e in result.scored if e.feasible and _identity(e) not in seen]
    pool = list({_identity(e): e for e in pool}.values())
    annotate_entries(pool, request, problem, derated=True)
    keep = [e for e in [*result.front, *pool] if e.robust is not False]
    objectives = list(zip(result.metric_names, result.directions, strict=True))
    rows = [[_minimised(e, n, d) for n, d in objectives] for e in keep]
    mask = pareto_mask(np.array(rows)) if keep else []
    dropped = sum(e.robust is False for e in result.front)
    result.front = sorted((e for e, m in zip(keep, mask, strict=True) if m), key=lambda e: -e.tps)
    result.warnings.append(
        f"--robust: {dropped} front plan(s) miss the SLA at their own measured group's "
        "pessimistic end; the front is recomputed from the robust plans scored"
    )
    return band


def _identity(e: FrontEntry) -> str:
    """One plan (shape, batch, precision, options) however many copies of it were scored."""
    import json

    return json.dumps(e.plan, sort_keys=True, default=str)


def _minimised(e: FrontEntry, name: str, direction: str) -> float:
    """Objective ``name`` of ``e`` as a value to minimise (None: the worst)."""
    v = getattr(e, name, None)
    if v is None:
        return float("inf")
    return -float(v) if direction.startswith("max") else float(v)


def _derated_or_reason(problem: EvaluatorInputs) -> EvaluatorInputs | str:
    try:
        return derate(problem, ROBUST_PEAK_FACTOR)
    except PlenaInputError as exc:
        return exc.rule


def _interval(e: FrontEntry, sb: Band) -> None:
    from plena_opt.serving.error_bars import propagate

    if sb.band is None:
        e.interval_note = sb.note
        return
    p = propagate(
        sb.band, e.ttft_ms / 1e3, e.tpot_ms / 1e3, e.tps_per_device, e.usd_per_million_output_tokens
    )
    e.interval_group, e.interval_level = sb.band.group, sb.band.level
    e.ttft_seconds_low, e.ttft_seconds_high = p.ttft
    e.tpot_seconds_low, e.tpot_seconds_high = p.tpot
    if p.tps is not None:
        e.tps_per_device_low, e.tps_per_device_high = p.tps
    if p.usd_per_mtok is not None:
        lo, hi = p.usd_per_mtok
        e.usd_per_million_output_tokens_low, e.usd_per_million_output_tokens_high = lo, hi


def peak_ratios(
    entries: list[FrontEntry], problem: EvaluatorInputs, scaled: EvaluatorInputs
) -> list[tuple[float, float, float]]:
    """Per plan, in order: (TTFT, TPOT, $/Mtok) at the scaled peaks over the nominal (≥ ~1), the
    plans of one (batch, precision) priced in one batch on each problem."""
    from plena_opt.search.space.space import Point

    groups: dict[tuple[int, Any], list[tuple[int, Any]]] = {}
    for i, e in enumerate(entries):
        pt = Point.from_dict(e.plan)
        groups.setdefault((pt.batch_size, e.plan.get("precision")), []).append((i, pt.plan))
    out = [(1.0, 1.0, 1.0)] * len(entries)
    for (batch, prec), items in groups.items():
        plans = [p for _, p in items]
        nom = problem.evaluator(batch, prec).evaluate_batch(plans)
        low = scaled.evaluator(batch, prec).evaluate_batch(plans)
        for (i, _), n, s in zip(items, nom, low, strict=True):
            out[i] = (
                s.ttft_seconds / n.ttft_seconds,
                n.tps_per_sequence / s.tps_per_sequence,
                n.tps / s.tps,
            )
    return out


def pessimistic(
    e: FrontEntry, band: ErrorBand | None, ratios: tuple[float, float, float]
) -> tuple[float, float, float | None]:
    """(TTFT s, TPOT s, $/Mtok) of ``e`` at the scaled peaks and the interval's high end."""
    rt, rp, ru = ratios
    kt = band.ttft_high if band else 1.0
    kp = band.tpot_high if band else 1.0
    usd = e.usd_per_million_output_tokens
    return (
        e.ttft_ms / 1e3 * rt * kt,
        e.tpot_ms / 1e3 * rp * kp,
        None if usd is None else usd * ru * kp,
    )


NO_SLA = "no SLA to hold (--max-ttft-ms, --max-tpot-ms, --min-tps-per-seq, --max-cost-per-mtok)"


def has_sla(request: Any) -> bool:
    """Whether the request bounds TTFT, TPOT, tokens/s per sequence or $/Mtok."""
    names = ("max_ttft_ms", "max_tpot_ms", "min_tps_per_seq", "max_cost_per_mtok")
    return any(getattr(request, n, None) is not None for n in names)


def sla_misses(ttft: float, tpot: float, usd: float | None, request: Any) -> list[str]:
    """What of the request's SLA (ms flags, tokens/s per sequence, $/Mtok) the figures miss."""
    out = []
    if request.max_ttft_ms is not None and ttft * 1e3 > request.max_ttft_ms:
        out.append(f"TTFT {ttft * 1e3:.4g} ms > {request.max_ttft_ms:g} ms")
    if request.max_tpot_ms is not None and tpot * 1e3 > request.max_tpot_ms:
        out.append(f"TPOT {tpot * 1e3:.4g} ms > {request.max_tpot_ms:g} ms")
    if request.min_tps_per_seq is not None and tpot * request.min_tps_per_seq > 1:
        out.append(f"tokens/s per sequence {1 / tpot:.4g} < {request.min_tps_per_seq:g}")
    cap = getattr(request, "max_cost_per_mtok", None)
    if cap is not None and usd is not None and usd > cap:
        out.append(f"$/Mtok {usd:.4g} > {cap:g}")
    return out


def _robust(
    e: FrontEntry, sb: Band, request: Any, scaled: Any, ratios: tuple[float, float, float]
) -> None:
    where = f"peaks × {ROBUST_PEAK_FACTOR:g}"
    where += (
        f" and the {100 * sb.band.level:g} % interval's pessimistic end"
        if sb.band
        else " only (no measured interval)"
    )
    e.robust_basis = where
    if isinstance(scaled, str):
        e.robust, e.robust_reason = None, f"not judged: {scaled}"
        return
    if not has_sla(request):
        e.robust, e.robust_reason = None, f"not judged: {NO_SLA}"
        return
    misses = sla_misses(*pessimistic(e, sb.band, ratios), request)
    e.robust = not misses
    e.robust_reason = "; ".join(misses) or None  # at ``robust_basis``


def goodput_interval(result: SearchResult, request: Any) -> dict[str, Any]:
    """Goodput's interval from the annotated front: the best tokens/s/device of the plans
    meeting the SLA at the interval's pessimistic end (``*_low``) and at its optimistic end
    (``*_high``); None and why without an interval."""
    front = [e for e in result.front if e.interval_group is not None]
    if not front:
        note = next((e.interval_note for e in result.front if e.interval_note), None)
        return {
            "goodput_tps_per_device_low": None,
            "goodput_tps_per_device_high": None,
            "interval_group": None,
            "interval_note": note or "no interval: empty front",
        }
    lows, highs = [], []
    for e in front:
        if e.tps_per_device_low is None or e.tps_per_device_high is None:
            continue
        ends = (
            (e.ttft_seconds_high, e.tpot_seconds_high),
            (e.ttft_seconds_low, e.tpot_seconds_low),
        )
        if not sla_misses(*ends[0], None, request):
            lows.append(e.tps_per_device_low)
        if not sla_misses(*ends[1], None, request):
            highs.append(e.tps_per_device_high)
    return {
        "goodput_tps_per_device_low": max(lows, default=None),
        "goodput_tps_per_device_high": max(highs, default=None),
        "interval_group": ", ".join(sorted({str(e.interval_group) for e in front})),
        "interval_note": None,
    }


def recommendation_interval(rec_doc: dict[str, Any], result: SearchResult) -> dict[str, Any]:
    """The recommendation's ``*_low``/``*_high`` and ``robust`` (from its front plan): the
    document with them added to ``figures`` (a disaggregated pick has none: front plans only)."""
    entry = next((e for e in result.front if e.label == rec_doc.get("label")), None)
    figs = rec_doc["figures"]
    for name in INTERVAL_FIELDS:
        figs[name] = None if entry is None else getattr(entry, name)
    if entry is None:
        figs["interval_note"] = "no interval: the recommendation is not a plan of the front"
    return rec_doc


# a recommendation's interval fields: the registry's ``*_low``/``*_high`` and their basis
INTERVAL_FIELDS = (*interval_fields(), *INTERVAL_BASIS)


def robust_search(
    request: SearchRequest, problem: EvaluatorInputs
) -> tuple[SearchRequest, EvaluatorInputs, Band]:
    """``search --robust``: (request with the SLA tightened by the interval's pessimistic ratios
    and its own ``<study>-robust`` study, the problem at peaks × ``ROBUST_PEAK_FACTOR``, the
    single-replica band). A plan's band depends on its DP (the clients split over replicas)
    and a search constraint is one number, so the SLA is tightened by the least high ratios over
    the bands of the possible DP sizes (no robust plan is cut); ``annotate_front(derated=True)``
    then judges each plan at its own band and keeps the Pareto front of the robust ones."""
    from plena_opt.search.run.session import default_study_name

    scaled = derate(problem, ROBUST_PEAK_FACTOR)
    sb = search_band(request, problem)
    kt, kp = least_ratios(request, problem)
    r = request
    update: dict[str, Any] = {"study": f"{r.study or default_study_name(r)}-robust"}
    if r.max_ttft_ms is not None:
        update["max_ttft_ms"] = r.max_ttft_ms / kt
    if r.max_tpot_ms is not None:
        update["max_tpot_ms"] = r.max_tpot_ms / kp
    if r.min_tps_per_seq is not None:
        update["min_tps_per_seq"] = r.min_tps_per_seq * kp
    if getattr(r, "max_cost_per_mtok", None) is not None:
        update["max_cost_per_mtok"] = r.max_cost_per_mtok / kp
    return r.model_copy(update=update), scaled, sb


def least_ratios(request: Any, problem: EvaluatorInputs) -> tuple[float, float]:
    """(TTFT, TPOT) high ratios, the least over the bands of every DP size that divides the
    cluster (1.0 where no band is measured)."""
    n = problem.noc.num_devices if problem.noc is not None else 1
    top = min(n, getattr(request, "concurrency", None) or 1)  # beyond it: one client each
    dps = {d for d in range(1, top + 1) if n % d == 0} | {n}
    found = [search_band(request, problem, dp).band for dp in sorted(dps)]
    bands = [b for b in found if b is not None]
    return (
        min((b.ttft_high for b in bands), default=1.0),
        min((b.tpot_high for b in bands), default=1.0),
    )
