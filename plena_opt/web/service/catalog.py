"""Choices for the UI's forms: schedules with their op types, the shipped profiles, defaults."""

from __future__ import annotations

from typing import Any

from plena_opt.api.simulation_io import SCHEDULES, DepReason, schedule_op_types


def catalog() -> dict[str, Any]:
    """Choices for the forms: schedules with their op types, and the shipped profiles."""
    from plena_opt.api import names_gpu_chip
    from plena_opt.api.catalog import (
        DEFAULT_MEMORY,
        DEFAULT_MODEL,
        DEFAULT_NOC,
        list_chip_profiles,
        list_memory_profiles,
        list_models,
        list_noc_profiles,
    )

    return {
        "schedules": {
            name: {
                "op_types": list(schedule_op_types(name)),
                "comm_op_types": [
                    t for t in schedule_op_types(name, True) if t not in schedule_op_types(name)
                ],
                "chunked": name in ("interleaved-1f1b", "bigmac-vpp"),
            }
            for name in SCHEDULES
        },
        "models": list_models(),
        "nocs": list_noc_profiles(),
        "memories": list_memory_profiles(),
        "chips": list_chip_profiles(),
        "gpu_chips": [c for c in list_chip_profiles() if names_gpu_chip(c)],
        "defaults": {"model": DEFAULT_MODEL, "noc": DEFAULT_NOC, "memory": DEFAULT_MEMORY},
        "reasons": [r.value for r in DepReason],
    }
