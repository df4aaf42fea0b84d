"""What every memory model shares: transfer rounding, access energy and immutability (§3.1, §3.5).

A memory model subclasses ``MemoryBase`` and sets its slots once through ``_freeze``, among them
``_quantum`` (its transfer granularity in bytes, None: no rounding; read as
``transfer_quantum_bytes``) and ``energy`` (a ``DramEnergyConfig`` or None); the rounding of
transfers and the energy of an access are written here once.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np


class MemoryBase:
    """Base of the memory models (``Memory`` protocol): bytes, pJ."""

    __slots__ = ("_quantum",)  # whole bytes a transfer is rounded up to, or None
    kind: ClassVar[str]
    _immutable_hint: ClassVar[str] = ""  # appended to the immutability error

    def _freeze(self, values: dict[str, Any]) -> None:
        """Set every slot once (the model is immutable afterwards)."""
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable{self._immutable_hint}")

    @property
    def transfer_quantum_bytes(self) -> int | None:
        """Whole bytes every transfer is rounded up to a multiple of, or None (no rounding)."""
        return self._quantum

    def quantize_bytes(self, num_bytes: float) -> float:
        """One transfer (bytes) rounded up to whole quanta, if any; 0 (or less) unchanged."""
        size = self._quantum
        if size is None or num_bytes <= 0:
            return float(num_bytes)
        return math.ceil(num_bytes / size) * float(size)

    def quantize_array(self, num_bytes: np.ndarray, nonnegative: bool = False) -> np.ndarray:
        """Vectorised :meth:`quantize_bytes` over an array of transfers (bytes, float64);
        ``nonnegative``: the caller knows no entry is negative (skips that check)."""
        values = np.asarray(num_bytes, dtype=np.float64)
        size = self._quantum
        if size is None:
            return values.copy()
        size = float(size)
        # In place: ceil(0 / size) = 0 keeps empty transfers at zero; negatives pass through.
        out = values / size
        np.ceil(out, out=out)
        out *= size
        if nonnegative or not values.size or values.min() >= 0:
            return out
        return np.where(values < 0, values, out)

    def energy_pj(self, read_bytes: float, write_bytes: float) -> float | None:
        """DRAM access energy (pJ), or None without an energy model."""
        energy = self.energy  # type: ignore[attr-defined]  # a slot of every subclass
        if energy is None:
            return None
        return energy.energy_pj(read_bytes, write_bytes)
