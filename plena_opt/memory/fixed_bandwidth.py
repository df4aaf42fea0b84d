"""A memory described only by a sustained bandwidth (analytic-model §3.1, §3.4, §3.5).

``fixed_bandwidth`` builds one from the CLI units (decimal GB/s, binary GiB) with the reference
naming (``fixed-1000GBps``, ``fixed-1000GBps-64GiB``); ``unbounded`` is the 1e30 B/s memory
that reproduces the compute-only model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import ValidationError

from plena_opt.bounds import (
    MAX_BANDWIDTH_BYTES_PER_S,
    MAX_BYTES,
    MIN_BANDWIDTH_BYTES_PER_S,
    Bytes,
    range_rule,
    ranged,
)
from plena_opt.errors import PlenaInputError
from plena_opt.memory._validation import StrictModel, input_error
from plena_opt.memory.base import MemoryBase
from plena_opt.memory.config import DramEnergyConfig

UNBOUNDED_BANDWIDTH_BYTES_PER_S = 1e30
# 1 MB/s – 100 PB/s (plena_opt.bounds), or exactly the unbounded memory's 1e30 B/s
FixedBandwidth = ranged(
    MIN_BANDWIDTH_BYTES_PER_S,
    MAX_BANDWIDTH_BYTES_PER_S,
    "B/s",
    also=(UNBOUNDED_BANDWIDTH_BYTES_PER_S,),
)


class FixedBandwidthFields(StrictModel):
    """Validated fields of a fixed-bandwidth memory (B/s, bytes)."""

    section: ClassVar[str] = ""

    bandwidth_bytes_per_s: FixedBandwidth
    capacity_bytes: Bytes | None
    transaction_bytes: ranged(1, 2**30, "bytes", integer=True) | None = None
    energy: DramEnergyConfig | None = None


class FixedBandwidthMemory(MemoryBase):
    """Sustains ``bandwidth_bytes_per_s`` (B/s) for any access pattern; clock scale 1.

    ``capacity_bytes`` (bytes) may be None when capacity is not studied; with
    ``transaction_bytes`` every transfer is rounded up to whole transactions.
    """

    kind = "fixed_bandwidth"
    compute_frequency_scale = 1.0
    __slots__ = (
        "name",
        "bandwidth_bytes_per_s",
        "capacity_bytes",
        "transaction_bytes",
        "energy",
        "provenance",
    )

    def __init__(
        self,
        bandwidth_bytes_per_s: float,
        capacity_bytes: int | None = None,
        transaction_bytes: int | None = None,
        energy: DramEnergyConfig | Mapping[str, float] | None = None,
        name: str = "fixed-bandwidth",
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise PlenaInputError("name", "name must be a non-empty string")
        try:
            fields = FixedBandwidthFields.model_validate(
                {
                    "bandwidth_bytes_per_s": bandwidth_bytes_per_s,
                    "capacity_bytes": capacity_bytes,
                    "transaction_bytes": transaction_bytes,
                    "energy": energy,
                }
            )
        except ValidationError as exc:
            raise input_error(exc) from None
        values = {
            "name": name,
            "bandwidth_bytes_per_s": float(fields.bandwidth_bytes_per_s),
            "capacity_bytes": fields.capacity_bytes,
            "transaction_bytes": fields.transaction_bytes,
            "_quantum": fields.transaction_bytes,  # transfers round up to whole transactions
            "energy": fields.energy,
            "provenance": MappingProxyType(dict(provenance or {})),
        }
        self._freeze(values)

    def __repr__(self) -> str:
        return (
            f"FixedBandwidthMemory(name={self.name!r}, "
            f"bandwidth_bytes_per_s={self.bandwidth_bytes_per_s!r}, "
            f"capacity_bytes={self.capacity_bytes!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FixedBandwidthMemory):
            return NotImplemented
        return self.describe() == other.describe()

    __hash__ = None  # type: ignore[assignment]

    @property
    def usable_bandwidth_bytes_per_s(self) -> float:
        """Usable bandwidth (B/s) = the given bandwidth."""
        return self.bandwidth_bytes_per_s

    def warnings(self) -> list[str]:
        """A fixed-bandwidth memory has no policy that could warn."""
        return []

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary (same keys as the reference ``describe``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "usable_bandwidth_bytes_per_s": self.usable_bandwidth_bytes_per_s,
            "capacity_bytes": self.capacity_bytes,
            "transaction_bytes": self.transaction_bytes,
            "compute_frequency_scale": self.compute_frequency_scale,
            "energy": None if self.energy is None else self.energy.to_dict(),
            "provenance": dict(self.provenance),
        }


def _number_label(value: float) -> str:
    return f"{value:g}"


MAX_CAPACITY_BYTES = MAX_BYTES  # bytes (16 EiB, plena_opt.bounds)
# CLI units of the plausible ranges: GB/s (decimal) and GiB (binary), down to one KiB
GBS_RANGE = (MIN_BANDWIDTH_BYTES_PER_S / 1e9, MAX_BANDWIDTH_BYTES_PER_S / 1e9)
GIB_RANGE = (2.0**-20, MAX_CAPACITY_BYTES / 2**30)


def fixed_bandwidth(gbs: float, capacity_gib: float | None = None) -> FixedBandwidthMemory:
    """A fixed-bandwidth memory from CLI units: ``gbs`` decimal GB/s (×1e9), ``capacity_gib``
    binary GiB (×2^30, rounded to whole bytes). Named ``fixed-<gbs>GBps[-<cap>GiB]``."""
    for field, value in (("fixed_bandwidth_gbs", gbs), ("fixed_capacity_gib", capacity_gib)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PlenaInputError(field, f"{field} must be a number (got {value!r})")
        if not math.isfinite(value) or value <= 0:
            raise PlenaInputError(field, f"{field} must be a finite number > 0 (got {value!r})")
    lo, hi = GBS_RANGE
    if not lo <= gbs <= hi:
        raise PlenaInputError(
            "fixed_bandwidth_gbs",
            f"fixed_bandwidth_gbs {range_rule(lo, hi, 'GB/s')} (got {gbs!r})",
        )
    name = f"fixed-{_number_label(gbs)}GBps"
    capacity = None
    if capacity_gib is not None:
        lo, hi = GIB_RANGE
        if not lo <= capacity_gib <= hi:
            raise PlenaInputError(
                "fixed_capacity_gib",
                f"fixed_capacity_gib {range_rule(lo, hi, 'GiB')}: 1 KiB to at most "
                f"{hi:.0f} GiB (got {capacity_gib!r})",
            )
        capacity = round(capacity_gib * 2**30)
        name += f"-{_number_label(capacity_gib)}GiB"
    return FixedBandwidthMemory(gbs * 1e9, capacity, name=name)


def unbounded() -> FixedBandwidthMemory:
    """The 1e30 B/s memory without capacity that reproduces the compute-only model (§3.4)."""
    return FixedBandwidthMemory(UNBOUNDED_BANDWIDTH_BYTES_PER_S, None, name="unbounded")
