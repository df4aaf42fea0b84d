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
