"""deepstack: hierarchical network-on-chip cost model (profiles, routing, collectives, MoE).

Spec: ../shared/spec/network-model.md. Depends on numpy only; never imports ``plena_opt``.
"""

from . import moe
from .collectives import (
    AlgorithmCost,
    BoundaryCost,
    CollectiveCost,
    Network,
    PipelineCost,
)
from .errors import ProfileError, ProfileTypeError
from .placement import DIMS, ParallelScheme, groups
from .presets import (
    h200x32,
    make_hierarchy,
    ring_switch_32,
    scaled_profile,
    switch_noc,
    torus_mesh_switch,
    torus_mesh_switch_64,
)
from .profile import EnergyConfig, NocProfile
from .profile_load import list_noc_profiles, load_noc_profile
from .routing import Router
from .topology import KINDS, Level

__all__ = [
    "DIMS",
    "KINDS",
    "AlgorithmCost",
    "BoundaryCost",
    "CollectiveCost",
    "EnergyConfig",
    "Level",
    "Network",
    "NocProfile",
    "ParallelScheme",
    "PipelineCost",
    "ProfileError",
    "ProfileTypeError",
    "Router",
    "groups",
    "h200x32",
    "list_noc_profiles",
    "load_noc_profile",
    "make_hierarchy",
    "moe",
    "ring_switch_32",
    "scaled_profile",
    "switch_noc",
    "torus_mesh_switch",
    "torus_mesh_switch_64",
]
