"""What a collective costs: the chosen algorithm's seconds and NoC energy, every candidate's cost,
and the pipeline point-to-point breakdown per boundary (network-model §7.1, §8.1).

Units: seconds and pJ. :class:`deepstack.collectives.Network` returns these.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class AlgorithmCost:
    """Cost of one candidate algorithm: seconds (hop, link, total) and NoC energy in pJ."""

    hop_seconds: float
    link_seconds: float
    seconds: float
    noc_energy_pj: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the golden ``candidates`` entry shape)."""
        return {
            "hop_seconds": self.hop_seconds,
            "link_seconds": self.link_seconds,
            "seconds": self.seconds,
            "noc_energy_pj": self.noc_energy_pj,
        }


@dataclass(frozen=True)
class CollectiveCost:
    """Result of one collective: the chosen algorithm's hop/link/total seconds and energy (pJ).

    ``candidates`` maps every evaluated algorithm to its :class:`AlgorithmCost` (``None`` where an
    algorithm needs a power-of-two group); ``busiest_link`` names the bottleneck link.
    ``noc_energy_pj`` is ``None`` when the profile has no energy coefficients. ``warnings``
    reports traffic that landed on links the profile does not model (not timed, §4.1).
    """

    hop_seconds: float
    link_seconds: float
    seconds: float
    algorithm: str | None
    noc_energy_pj: float | None
    candidates: dict[str, AlgorithmCost | None] = field(default_factory=dict)
    busiest_link: str | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form: chosen cost plus every candidate's cost."""
        return {
            "algorithm": self.algorithm,
            "hop_seconds": self.hop_seconds,
            "link_seconds": self.link_seconds,
            "seconds": self.seconds,
            "noc_energy_pj": self.noc_energy_pj,
            "busiest_link": self.busiest_link,
            "warnings": list(self.warnings),
            "candidates": {
                k: (None if v is None else v.to_dict()) for k, v in self.candidates.items()
            },
        }


@dataclass(frozen=True)
class BoundaryCost:
    """One pipeline boundary ``from_stage → from_stage+1``."""

    from_stage: int
    hop_seconds: float
    link_seconds: float
    seconds: float
    noc_energy_pj: float | None


@dataclass(frozen=True)
class PipelineCost(CollectiveCost):
    """Pipeline point-to-point: the slowest boundary's cost plus every boundary (§8.1).

    ``noc_energy_pj`` and ``noc_energy_pj_all_boundaries`` both hold the traffic of all pp−1
    boundaries.
    """

    noc_energy_pj_all_boundaries: float | None = None
    boundaries: tuple[BoundaryCost, ...] = ()


def measured_cost(modelled: CollectiveCost, seconds: float, floor: float) -> CollectiveCost:
    """A measured all-reduce time in place of the modelled one: ``hop_seconds`` is the table's
    latency floor (its smallest size), ``link_seconds`` the rest; energy and the modelled
    candidates stay as the links price them."""
    hop = min(floor, seconds)
    return replace(
        modelled,
        hop_seconds=hop,
        link_seconds=seconds - hop,
        seconds=seconds,
        algorithm="measured",
    )
