"""The interface every memory offers to stage pricing (analytic-model §3.1)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Memory(Protocol):
    """A memory system: bandwidth in B/s, capacity in bytes, energy in pJ."""

    name: str
    kind: str
    usable_bandwidth_bytes_per_s: float
    capacity_bytes: int | None
    compute_frequency_scale: float

    @property
    def transfer_quantum_bytes(self) -> int | None:
        """Whole bytes every transfer is rounded up to a multiple of, or None (no rounding)."""

    def quantize_bytes(self, num_bytes: float) -> float:
        """One transfer (bytes) after transfer-granularity rounding."""

    def quantize_array(self, num_bytes: np.ndarray, nonnegative: bool = False) -> np.ndarray:
        """Vectorised ``quantize_bytes`` (``nonnegative``: no entry is below zero)."""

    def energy_pj(self, read_bytes: float, write_bytes: float) -> float | None:
        """Access energy (pJ), or None without an energy model."""

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary."""

    def warnings(self) -> list[str]:
        """Reference-worded warnings about this memory."""
