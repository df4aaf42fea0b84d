"""Use case: one knob of an opened plan changed — batch, tp, precision, or the load it is priced
under (concurrency or request rate) — and the plan re-estimated, without a new search
(``plena-opt ui``'s plan view).

``reestimate(spec, key, change, engine)`` validates each knob as the CLI validates its flag
(``--batch-size``, ``--tp``, ``--precision``, ``--concurrency``, ``--request-rate``; the CLI's
messages, ``PlenaInputError`` naming the field), builds the changed plan key (a tp that does not
fit the cluster is refused with ``estimate``'s message) and prices it with
``plan_detail.plan_detail``. Times in ms, memory in bytes, rates in requests/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.estimate.problem import ProblemSpec


@dataclass(frozen=True)
class KnobChange:
    """The knobs changed (None: as the plan has it; the load as the job priced it)."""

    batch_size: int | None = None
    tp: int | None = None
    precision: str | None = None
    concurrency: int | None = None
    request_rate: float | None = None


@dataclass(frozen=True)
class Reestimate:
    """The changed plan's key and its breakdown (``PlanDetail.to_dict()``), and what changed."""

    key: str
    changed: dict[str, Any]
    detail: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_change(change: KnobChange) -> None:
    """Each knob in the CLI's range (field-named ``PlenaInputError``, the CLI's message)."""
    from plena_opt.api.limits import MAX_BATCH, MAX_DEVICES
    from plena_opt.api.under_load import check_load
    from plena_opt.bounds import check_count
    from plena_opt.chip.precision import check_format

    if change.batch_size is not None:
        check_count(change.batch_size, "batch_size", "--batch-size", 1, MAX_BATCH)
    if change.tp is not None:
        check_count(change.tp, "tp", "--tp", 1, MAX_DEVICES)
    if change.precision is not None:
        check_format(change.precision, "precision")
    if change.concurrency is not None or change.request_rate is not None:
        check_load(change.concurrency, change.request_rate)


def changed_key(key: str, change: KnobChange, cluster_devices: int, noc_name: str) -> str:
    """``key`` (a plan key, not a deployment) with the batch, tp and precision changed; a plan
    needing more devices than the cluster has is refused as ``estimate`` refuses it."""
    from plena_opt.export.launch import parse_deployment_key, parse_point_key
    from plena_opt.search.space.space import Point

    if parse_deployment_key(key) is not None:
        raise PlenaInputError(
            "key", "a disaggregated deployment has two pools: open one of its plans to change it"
        )
    plan, batch, precision = parse_point_key(key)
    if change.tp is not None:
        plan = replace(plan, tp=change.tp)
    if plan.world_size > cluster_devices:
        raise PlenaInputError(
            "tp",
            f"the plan uses {plan.world_size} devices but NoC profile '{noc_name}' has "
            f"{cluster_devices}",
        )
    batch = batch if change.batch_size is None else change.batch_size
    precision = precision if change.precision is None else change.precision
    return Point(plan, batch, precision).key


def reestimate(
    spec: ProblemSpec,
    key: str,
    change: KnobChange,
    engine: str | None,
    load: tuple[int | None, float | None] = (None, None),
    cluster: tuple[int, str] | None = None,
    memory_fraction: float | None = None,
    extras: Any = None,
) -> Reestimate:
    """``key`` with ``change`` applied, priced on ``spec``; under ``engine`` at the changed load,
    else at ``load`` (the job's concurrency, request rate). ``cluster``: (devices, NoC name) of
    the job's cluster (None: loaded from ``spec``); ``memory_fraction``: the job's KV pool
    share (None: 0.9); ``extras``: its engine version, range ratio, speculative setting
    (``plan_detail.LoadExtras``; None: none)."""
    from plena_opt.api.plan_detail import check_key, plan_detail

    check_key(key)
    check_change(change)
    if cluster is None:
        noc = spec.load().noc
        cluster = (noc.num_devices, noc.name)
    new = changed_key(key, change, *cluster)
    if change.concurrency is not None or change.request_rate is not None:
        load = (change.concurrency, change.request_rate)
    detail = plan_detail(spec, new, engine, *load, memory_fraction, extras)
    changed = {k: v for k, v in asdict(change).items() if v is not None}
    return Reestimate(new, changed, detail.to_dict())
