"""Validation of simulation inputs shared by ``plena-opt simulate`` and the gRPC Simulate RPC:
the seed, per-op-type durations, and the per-stage → per-chunk-op conversion of training
durations (pipeline-simulator §1.3, §2)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.scheduler import Component, OpKind, PipelinePlan, schedule_op_types

#: Seeds are ``0 <= seed < SEED_LIMIT`` (a 32-bit unsigned integer, as numpy's ``SeedSequence``
#: entropy and the gRPC search seed).
SEED_LIMIT = 2**32
#: Largest accepted base duration (any unit; 1e15 ms ≈ 31,700 years). Far below float64 overflow
#: for any plan the limits allow (≤ 10⁶ ops), so makespans and sums stay finite.
MAX_DURATION = 1e15


def check_seed(seed: Any, field: str = "seed", shown: str | None = None) -> int:
    """``seed`` as an int; raises :class:`PlenaInputError` naming ``field`` (``shown`` in the
    message, e.g. ``--seed``) unless it is an integer with ``0 <= seed < 2**32``."""
    name = shown or field
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise PlenaInputError(field, f"{name} must be an integer, got {seed!r}")
    value = int(seed)
    if not 0 <= value < SEED_LIMIT:
        raise PlenaInputError(field, f"{name} must be 0 <= seed < 2**32 (4294967296), got {value}")
    return value


def check_duration(value: Any, field: str) -> float:
    """One base duration: finite, ``>= 0`` and ``<= MAX_DURATION``; errors name ``field``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PlenaInputError(field, f"{field} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise PlenaInputError(field, f"{field} must be finite, got {v}")
    if v < 0:
        raise PlenaInputError(field, f"{field} must be >= 0, got {v:g}")
    if v > MAX_DURATION:
        raise PlenaInputError(field, f"{field} must be <= {MAX_DURATION:g}, got {v:g}")
    return v


def check_schedule_durations(
    schedule: str,
    durations: Mapping[str, Any],
    field: str = "durations",
    simulate_comm: bool = False,
) -> dict[str, float]:
    """Validate a training schedule's ``op type → duration`` map: only the schedule's op types
    (:data:`SCHEDULE_OP_TYPES`), each value accepted by :func:`check_duration`. Missing types are
    reported by the simulator (it knows which types the built plan uses). Keys are checked and
    returned in the schedule's op-type order, so a proto map (unordered) and the CLI's text give
    the same error and the same document."""
    allowed = schedule_op_types(schedule, simulate_comm)
    unknown = sorted(k for k in durations if k not in allowed)
    if unknown:
        key = unknown[0]
        raise PlenaInputError(
            f"{field}.{key}",
            f"{field}.{key}: {key!r} is not an op type of schedule {schedule!r} "
            f"(allowed: {', '.join(allowed)})",
        )
    return {k: check_duration(durations[k], f"{field}.{k}") for k in allowed if k in durations}


def chunked_op_types(plan: PipelinePlan) -> tuple[str, ...]:
    """Op types whose ops are one of the ``vpp`` chunks of a stage: the LLM ops (F, B, I, W) of
    a plan with ``vpp > 1``; VE and generator ops are whole (pipeline-simulator §0.1, §5), and
    so are the sends (``XF``/``XB``: a chunk boundary carries a whole activation)."""
    if plan.vpp_size <= 1:
        return ()
    types = {
        o.op_type for o in plan.ops if o.component is Component.LLM and o.kind is not OpKind.COMM
    }
    return tuple(sorted(types, key=_type_order))


def _type_order(t: str) -> int:
    order = ("F", "B", "I", "W")
    return order.index(t) if t in order else len(order)


def per_op_durations(plan: PipelinePlan, stage: Mapping[str, float]) -> dict[str, float]:
    """Per-stage durations (an LLM op type's time for all of a rank's layers, the F and B of the
    §1.3 closed forms) → per-op durations of ``plan``: each of the ``v`` chunk ops takes ``F/v``
    (``interleaved-1f1b``, the LLM ops of ``bigmac-vpp``); other op types are unchanged."""
    chunked = set(chunked_op_types(plan))
    v = plan.vpp_size
    return {k: (float(x) / v if k in chunked else float(x)) for k, x in stage.items()}


def duration_note(plan: PipelinePlan) -> str:
    """One line for summaries: how the given durations map onto ops."""
    chunked = chunked_op_types(plan)
    if not chunked:
        return "per stage (one op per stage and micro-batch)"
    v = plan.vpp_size
    each = ", ".join(f"{t}/v" for t in chunked)
    return f"per stage; chunk ops take {each} (v={v})"
