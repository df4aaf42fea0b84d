"""Caller-owned configuration of a 3D-stacked DRAM and the policies that bound its use.

Analytic-model §3.1–§3.2. No field has a hardware default: every value describes the caller's
design. Each class validates itself (strict pydantic) and names offending fields by their dotted
profile key (``dram.connected_layers``).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import model_validator

from plena_opt.bounds import Bandwidth, Bytes, ClockHz, PjPerBit, ranged
from plena_opt.errors import PlenaInputError
from plena_opt.memory._validation import Fraction, StrictModel

# Plausible ranges (plena_opt.bounds): stacks of up to 100,000 layers, rows and transactions up to
# 1 GiB, a million cycles per sector or recharge, 1e9 cycles of round-trip latency.
MAX_LAYERS = 100_000
LayerCount = ranged(1, MAX_LAYERS, "layers", integer=True)
SmallBytes = ranged(1, 2**30, "bytes", integer=True)
Cycles = ranged(1, 2**20, "cycles", integer=True)
CyclesOrZero = ranged(0, 2**20, "cycles", integer=True)
LatencyCycles = ranged(0, 1e9, "cycles")

_COMPOSITION = ("bytes_per_channel_transfer", "transfers_per_memory_clock", "memory_frequency_hz")
_DIRECT = "direct_peak_bandwidth_per_connected_layer_bytes_per_s"


class DramTimingConfig(StrictModel):
    """Row service and round-trip latency of one DRAM bank (bytes, DRAM cycles, Hz)."""

    section: ClassVar[str] = "dram.bank_timing"

    row_bytes: SmallBytes
    sector_bytes: SmallBytes
    sector_cycles: Cycles
    recharge_cycles: CyclesOrZero
    round_trip_latency_cycles: LatencyCycles
    latency_clock_hz: ClockHz

    @model_validator(mode="after")
    def _row_is_whole_sectors(self) -> DramTimingConfig:
        if self.row_bytes % self.sector_bytes:
            field = self.field_name("row_bytes")
            raise PlenaInputError(
                field,
                f"{field} must be a multiple of {self.field_name('sector_bytes')} "
                f"(got {self.row_bytes} and {self.sector_bytes})",
            )
        return self

    @property
    def sectors_per_row(self) -> int:
        """Sectors in one row (count)."""
        return self.row_bytes // self.sector_bytes

    @property
    def row_read_cycles(self) -> int:
        """DRAM cycles to stream one row: sectors × sector_cycles."""
        return self.sectors_per_row * self.sector_cycles

    @property
    def full_row_cycles(self) -> int:
        """Row read plus recharge (DRAM cycles)."""
        return self.row_read_cycles + self.recharge_cycles

    @property
    def fully_connected_efficiency(self) -> float:
        """Efficiency of a fully connected stack: row_read / (row_read + recharge)."""
        return self.row_read_cycles / self.full_row_cycles

    @property
    def round_trip_latency_seconds(self) -> float:
        """Round-trip latency (s) = cycles / latency clock."""
        return self.round_trip_latency_cycles / self.latency_clock_hz


class StackedDramConfig(StrictModel):
    """Interface of a stack of ``total_layers`` DRAM layers, ``connected_layers`` of them streaming.

    Peak bandwidth (B/s) comes from exactly one of the transfer composition
    (``bytes_per_channel_transfer``, ``transfers_per_memory_clock``, ``memory_frequency_hz``) or
    ``direct_peak_bandwidth_per_connected_layer_bytes_per_s``; the fully connected efficiency
    from exactly one of ``fully_connected_efficiency`` or ``bank_timing``.
    """

    section: ClassVar[str] = "dram"

    total_layers: LayerCount
    connected_layers: LayerCount
    channels_per_connected_layer: ranged(1, 2**20, "channels", integer=True)
    capacity_per_layer_bytes: Bytes
    transaction_bytes: SmallBytes
    bytes_per_channel_transfer: ranged(0.125, 2**20, "bytes") | None = None
    transfers_per_memory_clock: ranged(1e-3, 1024, "transfers") | None = None
    memory_frequency_hz: ClockHz | None = None
    direct_peak_bandwidth_per_connected_layer_bytes_per_s: Bandwidth | None = None
    fully_connected_efficiency: Fraction | None = None
    bank_timing: DramTimingConfig | None = None
    apply_wave_quantization: bool = False

    @model_validator(mode="after")
    def _cross_field_rules(self) -> StackedDramConfig:
        name = self.field_name
        if self.connected_layers > self.total_layers:
            raise PlenaInputError(
                name("connected_layers"),
                f"{name('connected_layers')} must be ≤ {name('total_layers')} "
                f"(got {self.connected_layers} > {self.total_layers})",
            )
        given = [key for key in _COMPOSITION if getattr(self, key) is not None]
        if getattr(self, _DIRECT) is None:
            missing = [key for key in _COMPOSITION if key not in given]
            if missing:
                raise PlenaInputError(
                    name(missing[0]),
                    "the transfer composition requires "
                    + ", ".join(name(key) for key in missing)
                    + f" (or give {name(_DIRECT)} instead): exactly one bandwidth form is needed",
                )
        elif given:
            raise PlenaInputError(
                name(_DIRECT),
                f"{name(_DIRECT)} and the transfer composition are mutually exclusive "
                f"(also given: {', '.join(name(key) for key in given)})",
            )
        if self.bank_timing is None and self.fully_connected_efficiency is None:
            raise PlenaInputError(
                name("fully_connected_efficiency"),
                f"supply exactly one of {name('fully_connected_efficiency')} or "
                f"{name('bank_timing')} (neither is given)",
            )
        if self.bank_timing is not None and self.fully_connected_efficiency is not None:
            raise PlenaInputError(
                name("fully_connected_efficiency"),
                f"{name('fully_connected_efficiency')} and {name('bank_timing')} are mutually "
                "exclusive: supply exactly one",
            )
        return self

    @property
    def resolved_fully_connected_efficiency(self) -> float:
        """``e_fc``: the given fraction or the bank-timing ratio (§3.1)."""
        if self.bank_timing is not None:
            return self.bank_timing.fully_connected_efficiency
        return float(self.fully_connected_efficiency)  # type: ignore[arg-type]

    @property
    def capacity_bytes(self) -> int:
        """Stack capacity (bytes) = total_layers × capacity_per_layer_bytes."""
        return self.total_layers * self.capacity_per_layer_bytes

    @property
    def wave_bytes(self) -> int:
        """DRAM wave (bytes) = transaction_bytes × channels_per_connected_layer."""
        return self.transaction_bytes * self.channels_per_connected_layer

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        """Peak bandwidth (B/s) of the connected layers, in the reference operation order."""
        direct = self.direct_peak_bandwidth_per_connected_layer_bytes_per_s
        if direct is not None:
            return self.connected_layers * float(direct)
        return (
            self.connected_layers
            * self.channels_per_connected_layer
            * float(self.bytes_per_channel_transfer)  # type: ignore[arg-type]
            * float(self.transfers_per_memory_clock)  # type: ignore[arg-type]
            * float(self.memory_frequency_hz)  # type: ignore[arg-type]
        )

    def with_layers(
        self, total_layers: int, connected_layers: int | None = None
    ) -> StackedDramConfig:
        """The same interface at another height; ``connected_layers`` defaults to all layers."""
        connected = total_layers if connected_layers is None else connected_layers
        values = {key: getattr(self, key) for key in type(self).model_fields}
        values.update(total_layers=total_layers, connected_layers=connected)
        return StackedDramConfig(**values)


class BufferingPolicy(StrictModel):
    """Little's-law bound of finite landing buffers (count, bytes, factor, cycles, Hz).

    The round-trip latency comes from this policy when both ``round_trip_latency_cycles`` and
    ``round_trip_latency_clock_hz`` are given, otherwise from the DRAM's ``bank_timing``.
    """

    section: ClassVar[str] = "buffering"

    requesters: ranged(1, 2**24, "requesters", integer=True)
    buffer_bytes_per_requester: ranged(1, 2**40, "bytes", integer=True)
    buffering_factor: ranged(1e-3, 1e6)
    round_trip_latency_cycles: LatencyCycles | None = None
    round_trip_latency_clock_hz: ClockHz | None = None

    @model_validator(mode="after")
    def _latency_pair(self) -> BufferingPolicy:
        if (self.round_trip_latency_cycles is None) != (self.round_trip_latency_clock_hz is None):
            cycles = self.field_name("round_trip_latency_cycles")
            clock = self.field_name("round_trip_latency_clock_hz")
            field = cycles if self.round_trip_latency_cycles is None else clock
            raise PlenaInputError(field, f"{cycles} and {clock} must be given together")
        return self

    def round_trip_latency_seconds(self, bank_timing: DramTimingConfig | None) -> float:
        """Round-trip latency (s): from this policy, else from ``bank_timing``."""
        if self.round_trip_latency_cycles is not None:
            return float(self.round_trip_latency_cycles) / float(
                self.round_trip_latency_clock_hz  # type: ignore[arg-type]
            )
        if bank_timing is not None:
            return bank_timing.round_trip_latency_seconds
        field = self.field_name("round_trip_latency_cycles")
        raise PlenaInputError(
            field,
            f"buffering needs {field}/{self.field_name('round_trip_latency_clock_hz')} "
            "or a dram.bank_timing section for its round-trip latency",
        )


class ThermalPolicy(StrictModel):
    """Compute-clock derating as the stack grows (°C/W, count, W, dimensionless exponent)."""

    section: ClassVar[str] = "thermal"

    resistance_base_c_per_w: ranged(1e-6, 1e4, "°C/W")
    resistance_per_layer_c_per_w: ranged(0, 1e4, "°C/W")
    baseline_layers: LayerCount
    design_power_w: ranged(1e-6, 1e6, "W")
    static_power_w: ranged(0, 1e6, "W")
    dynamic_power_exponent: ranged(1e-2, 100)

    @model_validator(mode="after")
    def _static_below_design(self) -> ThermalPolicy:
        if self.static_power_w >= self.design_power_w:
            field = self.field_name("static_power_w")
            raise PlenaInputError(
                field,
                f"{field} must be < {self.field_name('design_power_w')} "
                f"(got {self.static_power_w} ≥ {self.design_power_w})",
            )
        return self

    def frequency_scale(self, total_layers: int) -> float:
        """Compute-clock scale at ``total_layers`` (§3.1 thermal; > 1 below the baseline)."""
        resistance = self.resistance_base_c_per_w + self.resistance_per_layer_c_per_w * total_layers
        baseline_resistance = (
            self.resistance_base_c_per_w + self.resistance_per_layer_c_per_w * self.baseline_layers
        )
        max_power = self.design_power_w * baseline_resistance / resistance
        dynamic_available = max_power - self.static_power_w
        dynamic_budget = self.design_power_w - self.static_power_w
        if dynamic_available <= 0.0:
            raise PlenaInputError(
                "dram.total_layers",
                f"thermal policy leaves no dynamic-power budget at {total_layers} layers "
                f"(allowed power {max_power:.4g} W ≤ thermal.static_power_w "
                f"{self.static_power_w} W)",
            )
        return (dynamic_available / dynamic_budget) ** (1.0 / self.dynamic_power_exponent)


class DramEnergyConfig(StrictModel):
    """DRAM access energy in picojoules per transferred bit."""

    section: ClassVar[str] = "energy"

    read_pj_per_bit: PjPerBit
    write_pj_per_bit: PjPerBit

    def energy_pj(self, read_bytes: float, write_bytes: float) -> float:
        """Energy (pJ) = 8 · (read_bytes · read_pj_per_bit + write_bytes · write_pj_per_bit)."""
        return 8.0 * (read_bytes * self.read_pj_per_bit + write_bytes * self.write_pj_per_bit)

    def to_dict(self) -> dict[str, float]:
        """``{"read_pj_per_bit", "write_pj_per_bit"}`` as in ``describe()``."""
        return {"read_pj_per_bit": self.read_pj_per_bit, "write_pj_per_bit": self.write_pj_per_bit}


# Access energy of a memory whose profile gives none (a fixed-bandwidth memory without an
# ``energy`` section): HBM2, "approximately 3.97 pJ/bit" to access a bit (activation 1.21 +
# on-die movement 2.24 + I/O 0.30 pJ/bit, 28 nm DRAM model), O'Connor et al., "Fine-Grained
# DRAM: Energy-Efficient DRAM for Extreme Bandwidth Systems", MICRO-50, 2017,
# doi:10.1145/3123939.3124545. Used for the energy-per-token metric only (the reference report's
# ``dram_energy_pj`` stays None, analytic-model §4.8); read and write alike (the paper gives one
# figure per accessed bit).
DEFAULT_MEMORY_PJ_PER_BIT = 3.97
DEFAULT_MEMORY_ENERGY = DramEnergyConfig(
    read_pj_per_bit=DEFAULT_MEMORY_PJ_PER_BIT, write_pj_per_bit=DEFAULT_MEMORY_PJ_PER_BIT
)
