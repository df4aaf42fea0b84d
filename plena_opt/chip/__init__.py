"""PLENA chip profile (config + ISA cost table) and operator cycle formulas (analytic-model §1)."""

from plena_opt.chip.perf_model import PerfModel
from plena_opt.chip.profile import (
    DEFAULT_CHIP,
    INSTRUCTIONS,
    ChipConfig,
    ChipLatency,
    ChipProfile,
    list_chip_profiles,
    load_chip,
)

__all__ = [
    "DEFAULT_CHIP",
    "INSTRUCTIONS",
    "ChipConfig",
    "ChipLatency",
    "ChipProfile",
    "PerfModel",
    "list_chip_profiles",
    "load_chip",
]
