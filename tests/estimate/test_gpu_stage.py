"""``stage_of`` sums kernels into the same floats as the plain ``np.where`` formula (issue 26).

The fast path adds a kernel whose compute-bound flag is one value to its own side only; the
formula also adds 0.0 to the other side, which leaves a non-negative time as it is. Each field
must be the same bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from plena_opt.chip.gpu import KernelTime
from plena_opt.estimate.gpu_stage import stage_of
from plena_opt.estimate.pricing import StepWeights
from plena_opt.memory import load_memory


def _formula(kernels: list[KernelTime], n: int, fixed: float):
    """The sum before the fast path: scalar kernels first, then every per-step kernel through
    ``np.where`` on both sides."""
    c, m, r, w = fixed, 0.0, 0.0, 0.0
    arrays = []
    for k in kernels:
        if np.ndim(k.seconds) == 0 and np.ndim(k.compute_bound) == 0:
            if k.compute_bound:
                c += float(k.seconds)
            else:
                m += float(k.seconds)
        else:
            arrays.append(k)
        r, w = r + k.read_bytes, w + k.write_bytes
    t_c, t_m = np.full(n, c), np.full(n, m)
    for k in arrays:
        s = np.broadcast_to(np.asarray(k.seconds, dtype=float), (n,))
        cb = np.broadcast_to(np.asarray(k.compute_bound), (n,))
        t_c += np.where(cb, s, 0.0)
        t_m += np.where(cb, 0.0, s)
    return t_c, t_m, np.broadcast_to(r, (n,)).astype(float), np.broadcast_to(w, (n,)).astype(float)


def _kernels(rng: np.random.Generator, n: int, count: int) -> list[KernelTime]:
    out = []
    for i in range(count):
        array = i % 3 == 0
        s = rng.uniform(1e-7, 1e-3, n) if array else float(rng.uniform(1e-7, 1e-3))
        cb = rng.uniform(size=n) < 0.5 if array and i % 2 else bool(i % 4 < 2)
        rb = rng.uniform(1e3, 1e9, n) if i == 4 else int(rng.integers(1, 10**9))
        out.append(KernelTime(s, 1.0, rb, float(rng.uniform(0, 1e6)), cb))
    return out


@pytest.mark.parametrize("n, count, seed", [(1, 3, 0), (5, 7, 1), (33, 12, 2), (2, 1, 3)])
def test_stage_of_is_the_where_formula_bit_for_bit(n: int, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    kernels = _kernels(rng, n, count)
    steps = StepWeights(np.arange(1.0, n + 1.0), int(n * (n + 1) / 2))
    fixed = 2.5e-6
    stage = stage_of(kernels, steps, load_memory("fictional_stacked_dram"), fixed=fixed)
    want = _formula(kernels, n, fixed)
    got = (stage.compute_seconds, stage.memory_seconds, stage.read_bytes, stage.write_bytes)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    for name, values in (("read_bytes", want[2]), ("write_bytes", want[3])):
        assert stage.field_sum(name) == steps.total(values)  # the dot product, as before
        assert stage.field_sum(name, first_step=True) == float(values[0])


@pytest.mark.parametrize("n", [1, 2, 7, 128, 129, 1024, 1025, 8193])
def test_the_kernels_mean_is_np_mean(n: int) -> None:
    from plena_opt.chip.gpu.perf import _mean

    rng = np.random.default_rng(n)
    for x in (rng.uniform(0, 1e12, n), np.arange(1024.0, 1024.0 + n) * 4.0 * 64 * 128 * 3.0):
        assert _mean(x) == float(np.mean(x))
    assert _mean(np.arange(n)) == float(np.mean(np.arange(n)))  # other dtypes: np.mean itself
