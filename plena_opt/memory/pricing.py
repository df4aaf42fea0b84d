"""Stage pricing and per-phase totals (analytic-model §3.3).

A stage is priced from its compute cycles and its DRAM traffic: each positive component of the
reads and of the writes is quantised separately by the memory, then summed in insertion order;
compute time = cycles / compute_hz; memory time = bytes / usable bandwidth; the stage takes the
longer of the two (``stage-roofline``) or their sum (``serial``). The operation order follows the
reference so that results agree to the last bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from plena_opt.errors import PlenaInputError
from plena_opt.memory.interface import Memory
from plena_opt.vocabulary import OVERLAP_POLICIES


@dataclass(frozen=True, slots=True)
class PhaseEstimate:
    """One priced stage or a phase total: seconds, bytes (after quantisation), pJ (or None)."""

    seconds: float
    compute_seconds: float
    memory_seconds: float
    memory_bound_seconds: float
    read_bytes: float
    write_bytes: float
    dram_energy_pj: float | None

    def to_dict(self) -> dict[str, float | None]:
        """The golden phase dict (same keys, same order)."""
        return asdict(self)


def check_overlap_policy(overlap_policy: str) -> str:
    """Return ``overlap_policy`` if known; raise naming the field otherwise."""
    if overlap_policy not in OVERLAP_POLICIES:
        raise PlenaInputError(
            "overlap_policy",
            f"unsupported overlap policy {overlap_policy!r}; expected one of "
            + ", ".join(OVERLAP_POLICIES),
        )
    return overlap_policy


def quantized_total(traffic: Mapping[str, float], memory: Memory) -> float:
    """Σ quantize_bytes(component) over the positive components, in insertion order (bytes)."""
    total = 0
    quantize = memory.quantize_bytes
    for value in traffic.values():
        if value > 0:
            total += quantize(value)
    return total


def price_stage(
    cycles: float,
    reads: Mapping[str, float],
    writes: Mapping[str, float],
    memory: Memory,
    compute_hz: float,
    overlap_policy: str = "stage-roofline",
) -> PhaseEstimate:
    """Price one stage: ``cycles`` at ``compute_hz`` (Hz) against ``reads``/``writes`` (bytes)."""
    roofline = check_overlap_policy(overlap_policy) == "stage-roofline"
    read_bytes = quantized_total(reads, memory)
    write_bytes = quantized_total(writes, memory)
    compute_s = cycles / compute_hz
    memory_s = (read_bytes + write_bytes) / memory.usable_bandwidth_bytes_per_s
    seconds = max(compute_s, memory_s) if roofline else compute_s + memory_s
    return PhaseEstimate(
        seconds=seconds,
        compute_seconds=compute_s,
        memory_seconds=memory_s,
        memory_bound_seconds=seconds if memory_s > compute_s else 0.0,
        read_bytes=read_bytes,
        write_bytes=write_bytes,
        dram_energy_pj=memory.energy_pj(read_bytes, write_bytes),
    )


class PhaseTotals:
    """Running sum of stage estimates; ``freeze()`` returns the total as a PhaseEstimate.

    Energy is summed only when ``track_energy`` (``memory.energy_pj(0, 0) is not None``) and the
    stage carries one; otherwise the total's ``dram_energy_pj`` is None.
    """

    __slots__ = (
        "seconds",
        "compute_seconds",
        "memory_seconds",
        "memory_bound_seconds",
        "read_bytes",
        "write_bytes",
        "energy_pj",
    )

    def __init__(self, track_energy: bool) -> None:
        self.seconds = 0.0
        self.compute_seconds = 0.0
        self.memory_seconds = 0.0
        self.memory_bound_seconds = 0.0
        self.read_bytes = 0.0
        self.write_bytes = 0.0
        self.energy_pj: float | None = 0.0 if track_energy else None

    @classmethod
    def for_memory(cls, memory: Memory) -> PhaseTotals:
        """Totals that track energy exactly when ``memory`` has an energy model."""
        return cls(memory.energy_pj(0.0, 0.0) is not None)

    def add(self, stage: PhaseEstimate, repeat: int = 1) -> None:
        """Add ``repeat`` × every field of ``stage``."""
        self.seconds += repeat * stage.seconds
        self.compute_seconds += repeat * stage.compute_seconds
        self.memory_seconds += repeat * stage.memory_seconds
        self.memory_bound_seconds += repeat * stage.memory_bound_seconds
        self.read_bytes += repeat * stage.read_bytes
        self.write_bytes += repeat * stage.write_bytes
        if self.energy_pj is not None and stage.dram_energy_pj is not None:
            self.energy_pj += repeat * stage.dram_energy_pj

    def freeze(self) -> PhaseEstimate:
        """The totals so far as an immutable :class:`PhaseEstimate`."""
        return PhaseEstimate(
            self.seconds,
            self.compute_seconds,
            self.memory_seconds,
            self.memory_bound_seconds,
            self.read_bytes,
            self.write_bytes,
            self.energy_pj,
        )
