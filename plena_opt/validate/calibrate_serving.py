"""``plena-opt calibrate``: fit the serving model's named constants to a user's own measurements.

The constant fitted is ``host_step_seconds`` (``serving.engines.EngineModel``: host time per
engine step), one value per (engine, GPU chip) with measured rows. Rows are split once, seeded:
whole deployment groups (every column but the concurrency, the batch size derived from it, the
measurements and their date/image) go to the hold-out, so the rows of one deployment never
straddle the split; a benchmark result file of one deployment is split by run. On the training
rows each constant starts at its shipped default and is moved by the weighted median of measured
− predicted TPOT (weights 1 / measured: the shift minimising the rows' TPOT MAPE, as
``serving_fit``, here signed), the rows re-priced under load with the new value, until the move
is below :data:`TOLERANCE_SECONDS` or :data:`MAX_ITERATIONS` passes. TTFT is not fitted; its
hold-out MAPE before and after is reported as it comes out of the same re-pricing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.serving.calibration import (
    MAX_HOST_STEP_SECONDS,
    OVERLAY_VERSION,
    CalibrationOverlay,
    FittedConstant,
    HoldOut,
    active,
)
from plena_opt.validate.serving_fit import _mape, _scored
from plena_opt.validate.serving_rows import SYSTEM_ALIASES, SYSTEMS

if TYPE_CHECKING:
    from plena_opt.validate.bench_score import BenchTarget
    from plena_opt.validate.serving_score import RowResult

MAX_ITERATIONS = 8
TOLERANCE_SECONDS = 1e-7  # stop once no constant moves by more than 0.1 µs
DEFAULT_HOLDOUT = 0.25
DEFAULT_SEED = 0
# columns that vary within one deployment (or are the measurement): not part of its group key
NOT_DEPLOYMENT = frozenset({"id", "concurrency", "batch_size", "prefill_batch_size",
                            "decode_batch_size", "ttft_ms", "tpot_ms", "measured_on",
                            "engine_image"})  # fmt: skip

Host = dict[tuple[str, str], float]  # (engine, chip) -> host_step_seconds


@dataclass(frozen=True)
class Measurements:
    """A results file ready to fit: ``price(host)`` re-prices every row (file order) with the
    given host time per step per (engine, chip); ``groups[i]`` is row i's split group."""

    name: str
    price: Callable[[Host], list[RowResult]]
    groups: list[str]
    by: str  # "deployment" | "run"


def csv_measurements(path: Path) -> Measurements:
    """A serving results CSV (``validate --measurements`` schema)."""
    from plena_opt.validate.serving_rows import Refused, read_rows, resolve
    from plena_opt.validate.serving_score import _price_row

    rows = read_rows(path)
    keys = []
    for row in rows:
        try:
            d = resolve(row)
            keys.append((d.engine, d.chip))
        except (Refused, PlenaInputError):
            keys.append(("", ""))

    def price(host: Host) -> list[RowResult]:
        steps: dict[float, dict] = {}  # the step cache is per host value
        out = []
        for row, key in zip(rows, keys, strict=True):
            h = host.get(key, 0.0)
            out.append(_price_row(row, steps.setdefault(h, {}), {key[0]: h}))
        return out

    groups = ["|".join(v for k, v in sorted(r.fields.items()) if k not in NOT_DEPLOYMENT)
              for r in rows]  # fmt: skip
    return Measurements(path.name, price, groups, "deployment")


def bench_measurements(path: Path, target: BenchTarget) -> Measurements:
    """A benchmark result file (vLLM ``--save-result`` JSON, SGLang JSONL) of one deployment."""
    from plena_opt.validate.bench_score import score_bench

    def price(host: Host) -> list[RowResult]:
        h = host.get((target.engine, chip_of(target.system)), 0.0)
        return score_bench(path, target, {target.engine: h}).rows

    ids = [r.id for r in price({})]
    return Measurements(path.name, price, ids, "run")


def chip_of(system: str) -> str:
    """The chip profile of an AIConfigurator system name (a chip name stays as it is)."""
    system = SYSTEM_ALIASES.get(system, system)
    return SYSTEMS[system][0] if system in SYSTEMS else system


def split(groups: list[str], fraction: float, seed: int) -> set[str]:
    """The hold-out groups: ``round(fraction × groups)`` (at least 1) drawn with ``seed``."""
    names = sorted(set(groups))
    if len(names) < 2:
        raise PlenaInputError("measurements", "the hold-out needs measured rows of at least 2 "
                              "deployments (or runs); the file has " + str(len(names)))  # fmt: skip
    random.Random(seed).shuffle(names)
    return set(names[: min(len(names) - 1, max(1, round(fraction * len(names))))])


def _signed_shift(pairs: list[tuple[float, float]]) -> float:
    """The shift o minimising Σ |p + o − m| / m over (predicted p, measured m) (ms; none: 0)."""
    if not pairs:  # every row of the pair refused at this value (e.g. a rate beyond the plan)
        return 0.0
    pts = sorted(((m - p, 1.0 / m) for p, m in pairs), key=lambda t: t[0])
    half, acc = sum(w for _, w in pts) / 2, 0.0
    for d, w in pts:
        acc += w
        if acc >= half:
            return d
    return pts[-1][0]


def _ok(r: RowResult) -> bool:
    """Whether ``r`` was priced and has both measurements."""
    return bool(_scored([r]))


def _key(r: RowResult) -> tuple[str, str]:
    return (r.backend, chip_of(r.system))


def fit_host(m: Measurements, train: list[bool], start: Host) -> tuple[Host, list[RowResult]]:
    """The fitted host step per (engine, chip) on the ``train`` rows, and the rows priced so."""
    host = dict(start)
    for _ in range(MAX_ITERATIONS):
        rows = m.price(host)
        moved = 0.0
        for key in host:
            pairs = [(r.tpot_ms, r.measured_tpot_ms) for r, t in zip(rows, train, strict=True)
                     if t and _key(r) == key and _ok(r)]  # fmt: skip
            new = min(MAX_HOST_STEP_SECONDS, max(0.0, host[key] + 1e-3 * _signed_shift(pairs)))  # type: ignore[arg-type]
            moved, host[key] = max(moved, abs(new - host[key])), new
        if moved < TOLERANCE_SECONDS:
            return host, rows
    return host, m.price(host)


def _holdout_mape(rows: list[RowResult], test: list[bool], key: tuple | None = None) -> tuple:
    sel = [r for r, t in zip(rows, test, strict=True) if t and (key is None or _key(r) == key)]
    sel = _scored(sel)
    return len(sel), _mape(sel, "ttft"), _mape(sel, "tpot")


def calibrate(m: Measurements, fraction: float = DEFAULT_HOLDOUT,
              seed: int = DEFAULT_SEED) -> CalibrationOverlay:  # fmt: skip
    """Fit on the training groups, score before/after on the held-out ones (MAPE %)."""
    if not 0.05 <= fraction <= 0.5:
        raise PlenaInputError("holdout", f"must be 0.05 to 0.5; got {fraction:g}")
    if active() is not None:  # it would override the values being fitted
        raise PlenaInputError("calibration", "calibrate fits from the shipped constants: apply "
                              "no overlay while it runs")  # fmt: skip
    base = m.price({})
    held = split([g for g, r in zip(m.groups, base, strict=True) if _ok(r)],
                 fraction, seed)  # fmt: skip
    test = [g in held for g in m.groups]
    train = [not t and _ok(r) for t, r in zip(test, base, strict=True)]
    pairs = sorted({_key(r) for r, t in zip(base, train, strict=True) if t})
    if not pairs:
        raise PlenaInputError("measurements", "no priced row with measured TTFT and TPOT to fit on")
    defaults = {k: _default(*k) for k in pairs}
    host, after = fit_host(m, train, defaults)
    consts = []
    for k in pairs:
        n, tb, pb = _holdout_mape(base, test, k)
        _, ta, pa = _holdout_mape(after, test, k)
        fitted = sum(1 for r, t in zip(base, train, strict=True) if t and _key(r) == k)
        consts.append(FittedConstant(
            name="host_step_seconds", engine=k[0], chip=k[1], value=host[k], default=defaults[k],
            fitted_on_rows=fitted, holdout_rows=n, holdout_ttft_mape_before=tb,
            holdout_ttft_mape_after=ta, holdout_tpot_mape_before=pb,
            holdout_tpot_mape_after=pa))  # type: ignore[arg-type]  # fmt: skip
    n, tb, pb = _holdout_mape(base, test)
    _, ta, pa = _holdout_mape(after, test)
    hold = HoldOut(seed=seed, fraction=fraction, by=m.by, groups=len(held), rows=n,  # type: ignore[arg-type]
                   ttft_mape_before=tb, ttft_mape_after=ta, tpot_mape_before=pb,
                   tpot_mape_after=pa)  # fmt: skip
    priced = sum(r.status == "priced" for r in base)
    return CalibrationOverlay(version=OVERLAY_VERSION, fitted_on=m.name[:256],  # type: ignore[arg-type]
                              rows_priced=priced, holdout=hold, constants=consts)  # fmt: skip


def _default(engine: str, chip: str) -> float:
    """The shipped host time per step of ``engine`` on ``chip`` (s)."""
    from plena_opt.chip import load_chip
    from plena_opt.serving import engine_model

    hbm = float(load_chip(chip).hbm.capacity_bytes.value)  # type: ignore[union-attr]
    return engine_model(engine, hbm).host_step_seconds
