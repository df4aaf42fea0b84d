"""Issue 26: the search's re-check path imports no ``scipy.stats``, and the simulator's
statistics computed without it are the ones scipy gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from plena_opt.simulator.engine.statistics import binomial_ci_indices, summarize

SEARCH_AND_RECHECK = """
import json, sys
from plena_opt.cli.main import main
code = main(["search", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8",
             "--fixed-bandwidth-gbs", "1000", "--batch-size", "8", "--input-seq", "256",
             "--output-seq", "8", "--storage", ":memory:", "--seed", "1", "--quiet", "--json",
             "--recheck", "2", "--samples", "200"])
print(json.dumps({"code": code, "scipy_stats": "scipy.stats" in sys.modules}), file=sys.stderr)
"""


def test_search_with_recheck_does_not_import_scipy_stats() -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run(
        [sys.executable, "-c", SEARCH_AND_RECHECK], capture_output=True, text=True, env=env
    )
    last = json.loads(out.stderr.strip().splitlines()[-1])
    assert last["code"] == 0
    doc = json.loads(out.stdout)
    assert doc["recheck"] and doc["recheck"][0]["ttft_p99_seconds"] > 0  # the re-check ran
    assert last["scipy_stats"] is False


@pytest.mark.parametrize("n", [2, 3, 7, 50, 200, 999, 1000, 4096])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_binomial_ci_indices_equal_scipy(n: int, q: float) -> None:
    stats = pytest.importorskip("scipy.stats")
    bd = stats.binom(n, q)
    assert binomial_ci_indices(n, q, 0.95) == (int(bd.ppf(0.025)) - 1, int(bd.isf(0.025)))


@pytest.mark.parametrize("n", [2, 5, 40, 1000])
def test_summarize_equals_the_scipy_computation(n: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(n).lognormal(0.0, 0.3, n)
    got = summarize(x)
    half = float(stats.norm.ppf(0.975) * x.std(ddof=1) / np.sqrt(n))
    assert got.mean_ci == (x.mean() - half, x.mean() + half)  # bit-equal
    for q, value, ci in (
        (0.5, got.p50, got.p50_ci),
        (0.9, got.p90, got.p90_ci),
        (0.99, got.p99, got.p99_ci),
    ):
        ref = stats.quantile_test(x, q=value, p=q).confidence_interval(confidence_level=0.95)
        lo = float(ref.low) if np.isfinite(ref.low) else float(x.min())
        hi = float(ref.high) if np.isfinite(ref.high) else float(x.max())
        assert ci == (min(lo, value), max(hi, value))


def test_other_levels_still_answer() -> None:
    pytest.importorskip("scipy.stats")
    x = np.linspace(1.0, 2.0, 101)
    s90, s95 = summarize(x, 0.9), summarize(x, 0.95)
    assert s90.mean_ci[1] - s90.mean_ci[0] < s95.mean_ci[1] - s95.mean_ci[0]
