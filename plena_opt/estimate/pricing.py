"""Vectorised roofline pricing of stages over many decode steps.

Analytic-model §3.3 ``price_stage``.

Same rules as :func:`plena_opt.memory.price_stage`, applied to numpy arrays so that a whole decode
(one entry per generated token) is priced in a handful of array operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property

import numpy as np

from plena_opt.memory import Memory


class StageArrays:
    """Per-step fields of one priced stage (arrays over steps; bytes include quantisation).

    ``seconds`` is computed up front; the other fields only when a report or a total asks for
    them, so a batch evaluation prices long decodes with few array operations.
    """

    def __init__(self, t_c, t_m, r, w, n: int, policy: str, memory: Memory) -> None:
        self._t_c, self._t_m, self._r, self._w, self._n = t_c, t_m, r, w, n
        self._memory = memory
        self.seconds = np.maximum(t_c, t_m) if policy == "stage-roofline" else t_c + t_m
        if np.ndim(self.seconds) == 0:
            self.seconds = np.full(n, float(self.seconds))

    def _full(self, x) -> np.ndarray:
        return np.full(self._n, float(x)) if np.ndim(x) == 0 else x

    @cached_property
    def compute_seconds(self) -> np.ndarray:
        return self._full(self._t_c)

    @cached_property
    def memory_seconds(self) -> np.ndarray:
        return self._full(self._t_m)

    @cached_property
    def memory_bound_seconds(self) -> np.ndarray:
        return np.where(self.memory_seconds > self.compute_seconds, self.seconds, 0.0)

    @cached_property
    def read_bytes(self) -> np.ndarray:
        return self._full(self._r)

    @cached_property
    def write_bytes(self) -> np.ndarray:
        return self._full(self._w)

    def split_means(self, policy: str) -> tuple[float, float]:
        """Mean over steps of the (compute, DRAM) share of ``seconds``: under the roofline the
        bound side takes all of it; ``serial`` adds both."""
        if policy == "serial":
            return float(np.mean(self._t_c)), float(np.mean(self._t_m))
        total = float(self.seconds.mean())
        mask = np.broadcast_to(np.asarray(self._t_m > self._t_c), self.seconds.shape)
        dram = float(self.seconds[mask].sum()) / self._n if mask.any() else 0.0
        return total - dram, dram

    def field_sum(self, name: str, steps: slice = slice(None)) -> float | None:
        """Σ of one field over the selected steps (scalar fields without building arrays)."""
        raw = {
            "compute_seconds": self._t_c,
            "memory_seconds": self._t_m,
            "read_bytes": self._r,
            "write_bytes": self._w,
        }.get(name)
        if raw is not None and np.ndim(raw) == 0:
            return float(raw) * len(range(*steps.indices(self._n)))
        if name == "dram_energy_pj":
            mem = self._memory
            if mem.energy_pj(0.0, 0.0) is None:
                return None
            r, w = self.field_sum("read_bytes", steps), self.field_sum("write_bytes", steps)
            return r * mem.energy_pj(1.0, 0.0) + w * mem.energy_pj(0.0, 1.0)
        return float(np.sum(getattr(self, name)[steps]))

    @cached_property
    def dram_energy_pj(self) -> np.ndarray | None:
        """DRAM energy is linear in the bytes: 8·(R·read_pJ + W·write_pJ) (§3.1)."""
        mem = self._memory
        if mem.energy_pj(0.0, 0.0) is None:
            return None
        return self.read_bytes * mem.energy_pj(1.0, 0.0) + self.write_bytes * mem.energy_pj(
            0.0, 1.0
        )


def _quantised_total(parts: Mapping[str, np.ndarray | float], memory: Memory) -> np.ndarray | float:
    """Σ of the positive components, each quantised separately (scalars priced once)."""
    scalar = 0.0
    total = None
    for value in parts.values():
        if np.ndim(value) == 0:
            if value > 0:
                scalar += memory.quantize_bytes(float(value))
            continue
        q = memory.quantize_array(np.maximum(value, 0.0))
        if total is None:
            total = q
        else:
            total += q
    if total is None:
        return scalar
    if scalar:
        total += scalar
    return total


def price_arrays(
    cycles: np.ndarray | float,
    reads: Mapping[str, np.ndarray | float],
    writes: Mapping[str, np.ndarray | float],
    memory: Memory,
    compute_hz: float,
    overlap_policy: str,
    n: int,
) -> StageArrays:
    """Price ``n`` stages at once; every positive traffic component is quantised separately."""
    r = _quantised_total(reads, memory)
    w = _quantised_total(writes, memory)
    t_c = cycles / compute_hz
    t_m = r + w
    t_m /= memory.usable_bandwidth_bytes_per_s
    return StageArrays(t_c, t_m, r, w, n, overlap_policy, memory)
