"""Pipeline scheduler: legal per-rank op plans and their labels (pipeline-simulator §1, §5).

Never imports the simulator (design rule 2).
"""

from __future__ import annotations

from plena_opt.bounds import MAX_SCHEDULE_OPS, SCHEDULE_OPS_PER_SLOT
from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.simulator.scheduler.bigmac import unified_bigmac_vpp
from plena_opt.simulator.scheduler.comm import (
    TRAINING_COMM_OP_TYPES,
    apply_comm,
    has_comm,
    with_training_p2p,
    without_comm,
)
from plena_opt.simulator.scheduler.inference import (
    InferenceStageTimes,
    serving_window,
    stage_times_from_estimate,
)
from plena_opt.simulator.scheduler.ops import (
    Component,
    Op,
    OpKind,
    PipelinePlan,
    check_positive_int,
    chunk_letter,
)
from plena_opt.simulator.scheduler.training import gpipe, interleaved_1f1b, one_f_one_b, zb_h1

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "bigmac-vpp")

#: Op types (duration keys) each training schedule uses.
SCHEDULE_OP_TYPES = {
    "gpipe": ("F", "B"),
    "1f1b": ("F", "B"),
    "interleaved-1f1b": ("F", "B"),
    "zb-h1": ("F", "I", "W"),
    "bigmac-vpp": ("F", "B", "VF", "VB", "GF", "GB"),
}


def schedule_op_types(name: str, simulate_comm: bool = False) -> tuple[str, ...]:
    """Duration keys of schedule ``name``; with ``simulate_comm`` also the sends ``XF``, ``XB``."""
    base = SCHEDULE_OP_TYPES.get(name, ())
    return base + TRAINING_COMM_OP_TYPES if simulate_comm and base else base


def check_schedule_shape(pp: int, microbatches: int, vpp: int = 1) -> None:
    """Refuse a schedule shape before building it: each size >= 1 and at most
    ``MAX_SCHEDULE_OPS`` ops (``pp × vpp × microbatches ×`` :data:`SCHEDULE_OPS_PER_SLOT`, the
    bound every front end shares), so a typo never builds a schedule of millions of ops."""
    for name, value in (("pp", pp), ("microbatches", microbatches), ("vpp", vpp)):
        check_positive_int(name, value)
    ops = pp * vpp * microbatches * SCHEDULE_OPS_PER_SLOT
    if ops > MAX_SCHEDULE_OPS:
        raise PlenaInputError(
            "pp",
            f"the schedule is too large: pp × vpp × microbatches × {SCHEDULE_OPS_PER_SLOT} = "
            f"{ops:,} ops (pp={pp}, vpp={vpp}, microbatches={microbatches}) is above the limit "
            f"of {MAX_SCHEDULE_OPS:,} ops per schedule",
        )


def build_schedule(
    name: str, pp: int, microbatches: int, vpp: int = 1, simulate_comm: bool = False
) -> PipelinePlan:
    """Build a training schedule by name (see :data:`SCHEDULES`); with ``simulate_comm`` the
    plan carries explicit point-to-point sends (:func:`with_training_p2p`).

    Raises :class:`PlenaNotFoundError` for an unknown name and :class:`PlenaInputError` for an
    impossible or too large shape (``vpp`` on a schedule without chunks, too few micro-batches for
    VPP, :func:`check_schedule_shape`).
    """
    if name not in SCHEDULES:
        raise PlenaNotFoundError(
            "schedule", f"unknown schedule {name!r}; valid: {', '.join(SCHEDULES)}"
        )
    check_schedule_shape(pp, microbatches, vpp)
    if name in ("interleaved-1f1b", "bigmac-vpp"):
        fn = interleaved_1f1b if name == "interleaved-1f1b" else unified_bigmac_vpp
        plan = fn(pp, vpp, microbatches)
    elif vpp != 1:
        raise PlenaInputError("vpp", f"schedule {name!r} has one chunk per rank; vpp must be 1")
    else:
        plan = {"gpipe": gpipe, "1f1b": one_f_one_b, "zb-h1": zb_h1}[name](pp, microbatches)
    return with_training_p2p(plan) if simulate_comm else plan


__all__ = [
    "SCHEDULES",
    "SCHEDULE_OP_TYPES",
    "TRAINING_COMM_OP_TYPES",
    "apply_comm",
    "has_comm",
    "schedule_op_types",
    "with_training_p2p",
    "without_comm",
    "Component",
    "InferenceStageTimes",
    "Op",
    "OpKind",
    "PipelinePlan",
    "build_schedule",
    "check_schedule_shape",
    "chunk_letter",
    "gpipe",
    "interleaved_1f1b",
    "one_f_one_b",
    "serving_window",
    "stage_times_from_estimate",
    "unified_bigmac_vpp",
    "zb_h1",
]
