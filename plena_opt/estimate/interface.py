"""The evaluator's declared interface: what the search (and its test fakes) may rely on.

``plena_opt.estimate.Evaluator`` implements ``PlanEvaluator``; the search types against the
protocol only, so a stand-in (a fake in the tests, a remote evaluator) needs exactly these members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from plena_opt.estimate.plan import Plan


@runtime_checkable
class PlanScores(Protocol):
    """The figures of one scored plan the search reads (``PlanMetrics`` has them): seconds,
    tokens/s, joules per generated token (None: no energy data), bytes per device."""

    ttft_seconds: float
    tps: float
    tps_per_sequence: float
    energy_per_token_joules: float | None
    weight_bytes_per_device: float
    kv_cache_bytes_per_device: float
    fits_in_memory: bool | None
    bottleneck: str | None
    attribution: Mapping[str, float]
    warnings: Sequence[str]


@runtime_checkable
class PlanEvaluator(Protocol):
    """Scores plans of one fixed problem (model, cluster, memory, workload)."""

    @property
    def num_devices(self) -> int:
        """Devices of the cluster; every plan's tp·ep·dp·pp·cp equals it."""
        ...

    @property
    def memory_capacity_bytes(self) -> float | None:
        """One device's memory capacity (bytes; None: unbounded)."""
        ...

    def check(self, plan: Plan) -> None:
        """Raise ``PlenaInputError`` naming the rule when ``plan`` is illegal here."""
        ...

    def evaluate_batch(self, plans: Iterable[Plan]) -> Sequence[PlanScores]:
        """Score legal plans, in order."""
        ...
