"""Vectorised roofline pricing of stages over many decode steps.

Analytic-model §3.3 ``price_stage``.

Same rules as :func:`plena_opt.memory.price_stage`, applied to numpy arrays so that a whole decode
(one entry per generated token) is priced in a handful of array operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StageArrays:
    """Per-step fields of one priced stage (arrays of equal length; bytes include quantisation)."""

    seconds: np.ndarray
    compute_seconds: np.ndarray
    memory_seconds: np.ndarray
    memory_bound_seconds: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    dram_energy_pj: np.ndarray | None


def _quantised_total(parts: Mapping[str, np.ndarray | float], memory, n: int) -> np.ndarray:
    total = np.zeros(n)
    for value in parts.values():
        arr = np.broadcast_to(np.asarray(value, dtype=float), (n,))
        if np.any(arr > 0):
            total = total + memory.quantize_array(np.where(arr > 0, arr, 0.0))
    return total


def price_arrays(
    cycles: np.ndarray | float,
    reads: Mapping[str, np.ndarray | float],
    writes: Mapping[str, np.ndarray | float],
    memory,
    compute_hz: float,
    overlap_policy: str,
    n: int,
) -> StageArrays:
    """Price ``n`` stages at once; every positive traffic component is quantised separately."""
    r = _quantised_total(reads, memory, n)
    w = _quantised_total(writes, memory, n)
    t_c = np.broadcast_to(np.asarray(cycles, dtype=float), (n,)) / compute_hz
    t_m = (r + w) / memory.usable_bandwidth_bytes_per_s
    seconds = np.maximum(t_c, t_m) if overlap_policy == "stage-roofline" else t_c + t_m
    bound = np.where(t_m > t_c, seconds, 0.0)
    energy = None if memory.energy_pj(0.0, 0.0) is None else _energy_linear(memory, r, w)
    return StageArrays(seconds, t_c, t_m, bound, r, w, energy)


def _energy_linear(memory, r: np.ndarray, w: np.ndarray) -> np.ndarray:
    """DRAM energy is linear in the bytes: 8·(R·read_pJ + W·write_pJ) (§3.1)."""
    per_read = memory.energy_pj(1.0, 0.0)
    per_write = memory.energy_pj(0.0, 1.0)
    return r * per_read + w * per_write
