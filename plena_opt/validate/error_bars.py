"""Fit the error-bar table (``plena_opt.serving.error_bars``) from measured error.

The table is computed once from the shipped serving measurements
(``data/serving/measured_serving_h100_b200.csv``, priced by ``validate --measurements``) and
shipped as ``plena_opt/serving/data/error_bars.json``; ``python -m
plena_opt.validate.error_bars`` rewrites it. A test checks it equals a fresh computation and that a
90 % interval fitted on half the rows covers >= 85 % of the other half.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from plena_opt.serving.error_bars import LEVEL, MIN_ROWS, TABLE, ErrorBand, group_keys

if TYPE_CHECKING:
    from plena_opt.validate.serving_score import RowResult


def _bound(values: list[float], level: float, upper: bool) -> float:
    """The split-conformal end of a ``level`` interval from a group's ratios: the order
    statistic ``ceil((n + 1)(1 + level) / 2)`` (upper) or ``floor((n + 1)(1 - level) / 2)``
    (lower), clipped to the sample. Unlike a plain sample quantile, it holds its stated
    coverage on new rows of the same group in a finite sample (a 20-row group gives its range);
    the linear-interpolation quantile covered 83.6-85.5 % of held-back rows at 90 %."""
    xs = sorted(values)
    n = len(xs)
    k = math.ceil((n + 1) * (1 + level) / 2) if upper else math.floor((n + 1) * (1 - level) / 2)
    return xs[min(max(k, 1), n) - 1]


def fit_error_table(rows: list[RowResult], level: float = LEVEL) -> dict[str, ErrorBand]:
    """The interval of every group with at least :data:`MIN_ROWS` priced aggregated rows that
    carry both measured means (rows of another status or mode are skipped)."""
    from plena_opt.validate.calibrate_serving import chip_of

    groups: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r.status != "priced" or not (r.ttft_ms and r.tpot_ms):
            continue
        if r.mode != "agg":  # the bars are those of one engine's estimate, not of pools
            continue
        if not (r.measured_ttft_ms and r.measured_tpot_ms):
            continue
        ratio = (r.measured_ttft_ms / r.ttft_ms, r.measured_tpot_ms / r.tpot_ms)
        gpu = chip_of(r.system)
        for key in group_keys(r.backend, gpu, r.band):
            groups.setdefault(key, []).append(ratio)
    table = {}
    for key, pairs in sorted(groups.items()):
        if len(pairs) < MIN_ROWS:
            continue
        ttft, tpot = [p[0] for p in pairs], [p[1] for p in pairs]
        table[key] = ErrorBand(
            key,
            len(pairs),
            _bound(ttft, level, upper=False),
            _bound(ttft, level, upper=True),
            _bound(tpot, level, upper=False),
            _bound(tpot, level, upper=True),
            level,
        )
    return table


def table_document(table: dict[str, ErrorBand]) -> dict[str, Any]:
    """What ``data/error_bars.json`` holds."""
    return {
        "source": "plena-opt validate --measurements shipped (measured / predicted mean ratios)",
        "level": LEVEL,
        "min_rows": MIN_ROWS,
        "groups": [asdict(b) for b in table.values()],
    }


def main() -> None:  # pragma: no cover - the regeneration script
    """Rewrite ``data/error_bars.json`` from the shipped measurements."""
    from plena_opt.validate.serving_score import score_serving, shipped_serving_csv

    table = fit_error_table(score_serving(shipped_serving_csv()).rows)
    TABLE.write_text(json.dumps(table_document(table), indent=1) + "\n")


if __name__ == "__main__":  # pragma: no cover
    main()
