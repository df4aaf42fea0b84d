"""Sample statistics with confidence intervals (pipeline-simulator §3).

Mean: CLT interval ``mean ± z·s/√N``. Quantiles: distribution-free order-statistic (binomial)
intervals via ``scipy.stats.quantile_test(...).confidence_interval`` (Hahn & Meeker).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class QuantileStats:
    """Mean, p50, p90, p99 of a sample with 95 % confidence intervals (same unit as the data)."""

    n: int
    mean: float
    mean_ci: tuple[float, float]
    p50: float
    p50_ci: tuple[float, float]
    p90: float
    p90_ci: tuple[float, float]
    p99: float
    p99_ci: tuple[float, float]

    def to_dict(self) -> dict:
        return asdict(self)


def _quantile_ci(x: np.ndarray, q: float, level: float) -> tuple[float, float]:
    value = float(np.quantile(x, q))
    if x.size < 2 or float(x.min()) == float(x.max()):
        return (value, value)
    ci = stats.quantile_test(x, q=value, p=q).confidence_interval(confidence_level=level)
    lo = float(ci.low) if np.isfinite(ci.low) else float(x.min())
    hi = float(ci.high) if np.isfinite(ci.high) else float(x.max())
    return (min(lo, value), max(hi, value))


def summarize(samples: np.ndarray, level: float = 0.95) -> QuantileStats:
    """Summarise a 1-D sample (NaNs are not allowed)."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = int(x.size)
    mean = float(x.mean())
    half = float(stats.norm.ppf(0.5 + level / 2) * x.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    qs = {q: (float(np.quantile(x, q)), _quantile_ci(x, q, level)) for q in QUANTILES}
    return QuantileStats(
        n=n,
        mean=mean,
        mean_ci=(mean - half, mean + half),
        p50=qs[0.5][0],
        p50_ci=qs[0.5][1],
        p90=qs[0.9][0],
        p90_ci=qs[0.9][1],
        p99=qs[0.99][0],
        p99_ci=qs[0.99][1],
    )
