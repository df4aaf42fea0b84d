"""Error bars from measured error (issue 30 item 4): the shipped interval table and its lookup.

``plena-opt validate --measurements`` prices each row of the shipped serving results file and
knows, row by row, the ratio measured / predicted of the mean TTFT and mean TPOT
(``plena_opt.validate.error_bars`` fits this table from them). A prediction's interval is
``[predicted · q_low, predicted · q_high]``, ``q_low``/``q_high`` the ``(1 − LEVEL)/2`` and
``(1 + LEVEL)/2`` empirical quantiles of the ratios of the closest group holding at least
``MIN_ROWS`` rows: (engine, GPU, concurrency band), else (engine, GPU), else the engine, else
every row. Nothing is fitted to make the model agree: an interval only states its measured spread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: Central probability of each interval (0.9: the 5th to the 95th percentile of the ratios).
LEVEL = 0.9
#: Fewest rows a group needs to give an interval (below it, the next wider group is used);
#: 20 rows put ~1 row beyond each 5 % tail.
MIN_ROWS = 20
#: Concurrency bands of the validate report and of the table's groups (inclusive).
BANDS = ((1, 1), (2, 8), (9, 32), (33, 128), (129, 1 << 30))
TABLE = Path(__file__).parent / "data" / "error_bars.json"
ANY = "*"


@dataclass(frozen=True)
class ErrorBand:
    """Ratios measured / predicted at the interval's ends for mean TTFT and mean TPOT, the
    group they come from (``engine|gpu|band``, ``*`` for any) and its row count."""

    group: str
    rows: int
    ttft_low: float
    ttft_high: float
    tpot_low: float
    tpot_high: float
    level: float = LEVEL


def group_keys(engine: str, gpu: str, band: str) -> list[str]:
    """Group keys of one row or query, most specific first."""
    return [f"{engine}|{gpu}|{band}", f"{engine}|{gpu}|{ANY}", f"{engine}|{ANY}|{ANY}", "*|*|*"]


def band_of(concurrency: int | None) -> str:
    """The concurrency band of ``concurrency`` (None or 0: an open-loop rate, band ``0``)."""
    c = concurrency or 0
    lo, hi = next(((a, b) for a, b in BANDS if a <= c <= b), (0, 0))
    return f"{lo}" if lo == hi else f"{lo}-{hi}" if hi < 1 << 30 else f">{lo - 1}"


def lookup(table: dict[str, ErrorBand], engine: str, gpu: str, band: str) -> ErrorBand | None:
    """The closest group's interval (None: not even the whole table has one)."""
    return next((table[k] for k in group_keys(engine, gpu, band) if k in table), None)


@lru_cache(maxsize=4)
def load_table(path: Path = TABLE) -> dict[str, ErrorBand]:
    """The shipped table (``serving/data/error_bars.json``)."""
    doc = json.loads(path.read_text())
    return {b["group"]: ErrorBand(**b) for b in doc["groups"]}


def measured_band(
    table: dict[str, ErrorBand], engine: str, gpu: str, concurrency: int | None
) -> tuple[ErrorBand | None, str | None]:
    """The group measured at exactly (``engine``, ``gpu``, the band of ``concurrency``), else
    (None, why): a prediction's interval never borrows a neighbour's band, another GPU's or the
    pooled rows (``lookup``'s fallbacks are for the ``estimate --concurrency`` report only)."""
    if not concurrency:
        return None, (
            "no interval: the measurements are closed-loop runs (a concurrency); "
            "none was measured at a Poisson request rate"
        )
    band = band_of(concurrency)
    exact = table.get(f"{engine}|{gpu}|{band}")
    if exact is not None:
        return exact, None
    parts = [k.split("|") for k in table]
    gpus = sorted({g for e, g, _ in parts if e == engine and g != ANY})
    if not gpus:
        return None, f"no interval: no measured {engine} rows"
    if gpu not in gpus:
        return (
            None,
            f"no interval: {engine} was not measured on {gpu} (measured: {', '.join(gpus)})",
        )
    bands = sorted({b for e, g, b in parts if e == engine and g == gpu and b != ANY})
    return None, (
        f"no interval: {engine} on {gpu} has no measured group of ≥{MIN_ROWS} rows at "
        f"concurrency {band} (measured: {', '.join(bands) or 'none'}; a neighbour's band is "
        "not used)"
    )


@dataclass(frozen=True)
class Propagated:
    """A band carried into derived figures: each ``(low, high)`` in the figure's own units.

    Tokens/s at a fixed batch is one token per sequence per TPOT, so it scales as 1 / TPOT
    (``tps ÷ tpot_high`` .. ``tps ÷ tpot_low``); $ per million output tokens is GPU time per
    token, so it scales as TPOT (``usd × tpot_low`` .. ``usd × tpot_high``)."""

    ttft: tuple[float, float]
    tpot: tuple[float, float]
    tps: tuple[float, float] | None
    usd_per_mtok: tuple[float, float] | None


def propagate(
    band: ErrorBand, ttft: float, tpot: float, tps: float | None, usd_per_mtok: float | None
) -> Propagated:
    """``band`` applied to predicted TTFT and TPOT (any one time unit) and carried to tokens/s
    and $/Mtok (None stays None)."""
    return Propagated(
        (ttft * band.ttft_low, ttft * band.ttft_high),
        (tpot * band.tpot_low, tpot * band.tpot_high),
        None if tps is None else (tps / band.tpot_high, tps / band.tpot_low),
        None
        if usd_per_mtok is None
        else (usd_per_mtok * band.tpot_low, usd_per_mtok * band.tpot_high),
    )
