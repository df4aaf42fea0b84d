"""Usable bandwidth, capacity, transfer granularity and clock scale of a stacked DRAM.

Analytic-model §3.1: connectivity efficiency, Little's-law buffering cap, wave quantisation,
thermal clock scale and access energy. Derived values are computed once at construction (the
model is immutable); a policy that cannot be evaluated (no latency source, no thermal budget)
is reported then, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.memory.base import MemoryBase
from plena_opt.memory.config import (
    BufferingPolicy,
    DramEnergyConfig,
    StackedDramConfig,
    ThermalPolicy,
)


def dram_connectivity_efficiency(
    total_layers: int, connected_layers: int, fully_connected_efficiency: float
) -> float:
    """Fraction of peak bandwidth sustained with ``connected_layers`` of ``total_layers`` streaming.

    1.0 while at most half the layers are connected, then linear down to
    ``fully_connected_efficiency`` when all are (§3.1).
    """
    if connected_layers > total_layers:
        raise PlenaInputError(
            "dram.connected_layers",
            f"dram.connected_layers must be ≤ dram.total_layers "
            f"(got {connected_layers} > {total_layers})",
        )
    half = total_layers / 2.0
    if connected_layers <= half:
        return 1.0
    if connected_layers >= total_layers:
        return fully_connected_efficiency
    position = (connected_layers - half) / (total_layers - half)
    return 1.0 + position * (fully_connected_efficiency - 1.0)


@dataclass(frozen=True, slots=True)
class LittlesLawResult:
    """Outcome of the buffering bound: latency (s), buffers (bytes), bandwidth (B/s)."""

    limited: bool
    round_trip_latency_seconds: float
    required_buffer_bytes_per_requester: float
    buffer_bytes_per_requester: int
    bandwidth_bytes_per_s: float

    def to_dict(self) -> dict[str, Any]:
        """The ``littles_law`` entry of ``describe()`` (bandwidth is reported separately)."""
        return {
            "limited": self.limited,
            "round_trip_latency_seconds": self.round_trip_latency_seconds,
            "required_buffer_bytes_per_requester": self.required_buffer_bytes_per_requester,
            "buffer_bytes_per_requester": self.buffer_bytes_per_requester,
        }


def littles_law_bound(
    policy: BufferingPolicy, config: StackedDramConfig, bandwidth: float
) -> LittlesLawResult:
    """Little's-law cap on ``bandwidth`` (B/s) with ``policy``'s buffers (§3.1)."""
    latency_s = policy.round_trip_latency_seconds(config.bank_timing)
    required = bandwidth / policy.requesters * latency_s * policy.buffering_factor
    available = policy.buffer_bytes_per_requester
    limited = available < required
    if limited:
        bandwidth *= available / required
    return LittlesLawResult(limited, latency_s, required, available, bandwidth)


class StackedDramModel(MemoryBase):
    """A :class:`StackedDramConfig` plus optional buffering, thermal and energy policies.

    Bandwidths in B/s, capacity in bytes, ``compute_frequency_scale`` dimensionless.
    """

    kind = "stacked_dram"
    _immutable_hint = "; use with_layers()"
    __slots__ = (
        "name",
        "config",
        "buffering",
        "thermal",
        "energy",
        "provenance",
        "peak_bandwidth_bytes_per_s",
        "connectivity_efficiency",
        "effective_bandwidth_bytes_per_s",
        "_bound",
        "usable_bandwidth_bytes_per_s",
        "capacity_bytes",
        "compute_frequency_scale",
    )

    def __init__(
        self,
        name: str,
        config: StackedDramConfig,
        buffering: BufferingPolicy | None = None,
        thermal: ThermalPolicy | None = None,
        energy: DramEnergyConfig | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise PlenaInputError("name", "name must be a non-empty string")
        for field, value, cls in (
            ("dram", config, StackedDramConfig),
            ("buffering", buffering, BufferingPolicy),
            ("thermal", thermal, ThermalPolicy),
            ("energy", energy, DramEnergyConfig),
        ):
            if (value is not None or field == "dram") and not isinstance(value, cls):
                raise PlenaTypeError(field, f"{field} must be a {cls.__name__}")
        efficiency = dram_connectivity_efficiency(
            config.total_layers, config.connected_layers, config.resolved_fully_connected_efficiency
        )
        peak = config.peak_bandwidth_bytes_per_s
        effective = peak * efficiency
        bound = None if buffering is None else littles_law_bound(buffering, config, effective)
        scale = 1.0 if thermal is None else thermal.frequency_scale(config.total_layers)
        values = {
            "name": name,
            "config": config,
            "buffering": buffering,
            "thermal": thermal,
            "energy": energy,
            "provenance": MappingProxyType(dict(provenance or {})),
            "peak_bandwidth_bytes_per_s": peak,
            "connectivity_efficiency": efficiency,
            "effective_bandwidth_bytes_per_s": effective,
            "_bound": bound,
            "usable_bandwidth_bytes_per_s": effective
            if bound is None
            else bound.bandwidth_bytes_per_s,
            "capacity_bytes": config.capacity_bytes,
            "compute_frequency_scale": scale,
            "_quantum": config.wave_bytes if config.apply_wave_quantization else None,
        }
        self._freeze(values)

    def __repr__(self) -> str:
        return (
            f"StackedDramModel(name={self.name!r}, total_layers={self.config.total_layers}, "
            f"connected_layers={self.config.connected_layers})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StackedDramModel):
            return NotImplemented
        return self.describe() == other.describe() and self.config == other.config

    __hash__ = None  # type: ignore[assignment]

    def littles_law(self) -> LittlesLawResult | None:
        """The buffering bound, or None without a buffering policy."""
        return self._bound

    @property
    def wave_bytes(self) -> int:
        """Transfer granularity (bytes) when wave quantisation applies."""
        return self.config.wave_bytes

    def with_layers(
        self, total_layers: int, connected_layers: int | None = None
    ) -> StackedDramModel:
        """The same design at another height (fully connected by default); policies kept."""
        return StackedDramModel(
            self.name,
            self.config.with_layers(total_layers, connected_layers),
            self.buffering,
            self.thermal,
            self.energy,
            self.provenance,
        )

    def warnings(self) -> list[str]:
        """Reference-worded warnings: Little's-law limit, thermal clock scale ≠ 1."""
        out: list[str] = []
        bound = self._bound
        if bound is not None and bound.limited:
            usable_gbs = bound.bandwidth_bytes_per_s / 1e9
            out.append(
                f"buffering limits usable bandwidth to {usable_gbs:.3f} GB/s "
                f"(needs {bound.required_buffer_bytes_per_requester:.0f} B per requester, "
                f"has {bound.buffer_bytes_per_requester})"
            )
        if self.compute_frequency_scale != 1.0:
            out.append(
                f"thermal policy scales the compute clock by {self.compute_frequency_scale:.4f}"
            )
        return out

    def describe(self) -> dict[str, Any]:
        """Derived figures as a JSON-ready dict (same keys as the reference ``describe``)."""
        config = self.config
        return {
            "name": self.name,
            "kind": self.kind,
            "total_layers": config.total_layers,
            "connected_layers": config.connected_layers,
            "peak_bandwidth_bytes_per_s": self.peak_bandwidth_bytes_per_s,
            "connectivity_efficiency": self.connectivity_efficiency,
            "effective_bandwidth_bytes_per_s": self.effective_bandwidth_bytes_per_s,
            "usable_bandwidth_bytes_per_s": self.usable_bandwidth_bytes_per_s,
            "littles_law": None if self._bound is None else self._bound.to_dict(),
            "capacity_bytes": self.capacity_bytes,
            "transaction_bytes": config.transaction_bytes,
            "wave_bytes": config.wave_bytes,
            "apply_wave_quantization": config.apply_wave_quantization,
            "compute_frequency_scale": self.compute_frequency_scale,
            "energy": None if self.energy is None else self.energy.to_dict(),
            "provenance": dict(self.provenance),
        }
