"""Memory model: profiles (fixed bandwidth, stacked DRAM), HBM storage precision, stage pricing.

Analytic-model §3. Bandwidths in B/s, capacities and traffic in bytes, energy in pJ.
"""

from plena_opt.memory.config import (
    DEFAULT_MEMORY_ENERGY,
    BufferingPolicy,
    DramEnergyConfig,
    DramTimingConfig,
    StackedDramConfig,
    ThermalPolicy,
)
from plena_opt.memory.fixed_bandwidth import (
    UNBOUNDED_BANDWIDTH_BYTES_PER_S,
    FixedBandwidthMemory,
    fixed_bandwidth,
    unbounded,
)
from plena_opt.memory.interface import Memory
from plena_opt.memory.precision import HbmStoragePrecision, element_bits
from plena_opt.memory.pricing import (
    OVERLAP_POLICIES,
    PhaseEstimate,
    PhaseTotals,
    check_overlap_policy,
    price_stage,
    quantized_total,
)
from plena_opt.memory.profile import (
    MEMORY_KINDS,
    SCHEMA_VERSION,
    list_memory_profiles,
    load_memory,
    load_memory_profile,
    memory_from_dict,
)
from plena_opt.memory.stacked_dram import (
    LittlesLawResult,
    StackedDramModel,
    dram_connectivity_efficiency,
    littles_law_bound,
)

__all__ = [
    "BufferingPolicy",
    "DEFAULT_MEMORY_ENERGY",
    "DramEnergyConfig",
    "DramTimingConfig",
    "FixedBandwidthMemory",
    "HbmStoragePrecision",
    "LittlesLawResult",
    "MEMORY_KINDS",
    "Memory",
    "OVERLAP_POLICIES",
    "PhaseEstimate",
    "PhaseTotals",
    "SCHEMA_VERSION",
    "StackedDramConfig",
    "StackedDramModel",
    "ThermalPolicy",
    "UNBOUNDED_BANDWIDTH_BYTES_PER_S",
    "check_overlap_policy",
    "dram_connectivity_efficiency",
    "element_bits",
    "fixed_bandwidth",
    "list_memory_profiles",
    "littles_law_bound",
    "load_memory",
    "load_memory_profile",
    "memory_from_dict",
    "price_stage",
    "quantized_total",
    "unbounded",
]
