"""The GH100 same-die decode-attention fit (``validate.calibrate_die``) on synthetic tables: it
recovers each table's HBM efficiency from its bandwidth-bound rows and the die's constants from
both tables, where a per-table fit on every row is pulled by the rows no bandwidth sets."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy")

from plena_opt.validate.calibrate import decode_curve, fit_decode  # noqa: E402
from plena_opt.validate.calibrate_die import die_fit, streaming_efficiency  # noqa: E402

DIE = [0.25, 9.0, 2.0, 22.0]  # s ns, t0 µs, p, u ns
BW = {"slow": 3.35e12, "fast": 4.8e12}
E = {"slow": 0.9, "fast": 0.88}


def _table(system: str, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    b = rng.choice([1, 8, 64, 256], 3000).astype(float)
    kv_heads = rng.choice([1, 8], 3000).astype(float)
    kv = rng.choice([128, 1024, 8192, 32768], 3000).astype(float)
    nbytes = 2 * b * kv * kv_heads * 128 * 2
    heads = rng.choice([8, 32, 64], 3000).astype(float)
    seq_heads = (b * heads, b * kv_heads)
    t = decode_curve([E[system], *DIE], seq_heads, nbytes, BW[system])
    return seq_heads, nbytes, t * np.exp(rng.normal(0, 0.02, t.size)), system


def test_each_table_keeps_its_hbm_efficiency_and_the_die_constants_are_shared() -> None:
    arrays = {s: _table(s, i) for i, s in enumerate(BW)}
    e = {s: streaming_efficiency(*arrays[s][:3], BW[s]) for s in BW}
    for s in BW:
        assert e[s] == pytest.approx(E[s], rel=0.03)
    die = die_fit(arrays, BW, e)
    assert die[1] == pytest.approx(DIE[1], rel=0.1)  # t0
    assert die[3] == pytest.approx(DIE[3], rel=0.1)  # u
    for s, (seq_heads, nbytes, t, _) in arrays.items():
        ape = np.abs(decode_curve([e[s], *die], seq_heads, nbytes, BW[s]) / t - 1)
        assert ape.mean() < 0.03


def test_a_table_whose_short_rows_are_slower_than_its_bandwidth_keeps_its_streaming_rate() -> None:
    """The H200 table's case: its shorter rows run no faster than the H100's. A
    per-table fit on every row lowers the HBM efficiency to match them; the bandwidth-bound rows
    alone give the efficiency the long rows stream at."""
    seq_heads, nbytes, t, _ = _table("fast", 3)
    mid = (nbytes > np.quantile(nbytes, 0.3)) & (nbytes < np.quantile(nbytes, 0.85))
    t = np.where(mid, t * 1.3, t)  # the shorter rows 30 % slower than the curve
    every_row = fit_decode(seq_heads, nbytes, t, BW["fast"], "synthetic")
    assert streaming_efficiency(seq_heads, nbytes, t, BW["fast"]) == pytest.approx(0.88, rel=0.03)
    assert every_row.values["bandwidth_efficiency"] < 0.85
