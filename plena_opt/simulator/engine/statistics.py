"""Sample statistics with confidence intervals (pipeline-simulator §3).

Mean: CLT interval ``mean ± z·s/√N``. Quantiles: distribution-free order-statistic (binomial)
intervals (Hahn & Meeker), the same order statistics ``scipy.stats.quantile_test(...)
.confidence_interval`` picks: low = x₍ppf(α/2)−1₎, high = x₍isf(α/2)₎ of Binomial(N, q).

Computed with numpy and ``math`` only, so importing the simulator (the search's re-check) does not
import ``scipy.stats`` (2.9–4.4 s under load, issue 26). The binomial indices were checked equal
to scipy 1.17's ``binom.ppf``/``binom.isf`` for N = 2…1,199, 2,000, 5,000 and 10,000 at
q = 0.5, 0.9, 0.99 (``tests/simulator/test_pipeline_montecarlo.py`` compares them where scipy is
installed); a confidence level other than ``Z_BY_LEVEL``'s asks scipy for its z, lazily.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

QUANTILES = (0.5, 0.9, 0.99)
# Two-sided normal quantile z = Φ⁻¹(0.5 + level/2) by confidence level, bit-equal to
# ``scipy.stats.norm.ppf`` (scipy 1.17.1; ``statistics.NormalDist`` differs in the last bit).
Z_BY_LEVEL = {0.95: 1.959963984540054}


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


def _z(level: float) -> float:
    z = Z_BY_LEVEL.get(level)
    if z is None:  # an unusual level: scipy's normal quantile, imported only here
        from scipy import stats

        z = float(stats.norm.ppf(0.5 + level / 2))
    return z


@lru_cache(maxsize=256)
def binomial_ci_indices(n: int, q: float, level: float) -> tuple[int, int]:
    """(ppf(α/2) − 1, isf(α/2)) of Binomial(``n``, ``q``) with α = 1 − ``level``: the order
    statistics (0-based, may fall outside 0…n−1) bounding the ``q`` quantile's interval.
    ppf(a) is the smallest k with P(X ≤ k) ≥ a, isf(a) the smallest k with P(X > k) ≤ a."""
    a = (1.0 - level) / 2
    k = np.arange(n + 1)
    lg = np.array([math.lgamma(i + 1) for i in range(n + 1)])
    pmf = np.exp(lg[n] - lg - lg[::-1] + k * math.log(q) + (n - k) * math.log1p(-q))
    cdf = np.cumsum(pmf)
    above = np.append(np.cumsum(pmf[::-1])[::-1][1:], 0.0)  # P(X > k)
    hit = cdf >= a
    ppf = int(np.argmax(hit)) if hit.any() else n
    isf = int(np.argmax(above <= a))
    return ppf - 1, isf


def _quantile_ci(x: np.ndarray, q: float, level: float) -> tuple[float, float]:
    value = float(np.quantile(x, q))
    if x.size < 2 or float(x.min()) == float(x.max()):
        return (value, value)
    lo_i, hi_i = binomial_ci_indices(int(x.size), q, level)
    xs = np.sort(x)
    lo = float(xs[lo_i]) if lo_i >= 0 else float(x.min())
    hi = float(xs[hi_i]) if hi_i < x.size else float(x.max())
    return (min(lo, value), max(hi, value))


def summarize(samples: np.ndarray, level: float = 0.95) -> QuantileStats:
    """Summarise a 1-D sample (NaNs are not allowed)."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = int(x.size)
    mean = float(x.mean())
    half = float(_z(level) * x.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
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
