"""The metric registry: each figure a plan is judged by, declared once.

A ``Metric`` names a figure of a scored plan as ``--json``, ``--csv`` and gRPC spell it (SI),
its unit, whether smaller or larger is better, what it means, and whether it carries a measured
interval (``<name>_low``/``<name>_high``, issue 30 item 4). The search objectives
(``search.space.objectives``), the CSV columns of a front (``search.run.output``), the SI names of
``--json`` (``search.run.output``), the interval fields of a front and a recommendation
(``api.robust``), the units a study records for optuna-dashboard (``search.run.session``) and the
front's gRPC mapping (``api.wire``), an estimate's (``api.wire.metrics_to_proto``: every
declared figure the estimate and its cost carry, by name), the summary a trial stores
(``search.record``: every declared figure the priced metrics carry), the web UI (``GET
/api/metrics``: the planner's front and compare tables take their headings, display units and
tooltips from it; a planner point's ``figures``, ``api.planner_figures``) and the E2E column of
``plena-opt search``'s text table read this table. The proto cannot be generated from
Python at run time: ``tests/test_metrics.py`` fails when a declared metric (or its
``_low``/``_high``) has no ``PlanMetrics`` or ``FrontEntry`` field (or, for the interval ends, no
``Recommendation`` field).

Adding a metric: one ``Metric`` here, its formula where the plan's figures are priced (an
attribute of that name on the metrics the evaluator returns), its ``FrontEntry`` field
(``search/result.py``) and its proto field (``proto/plena_opt/v1/plena_opt.proto``, then
``python -m plena_proto.codegen``). E2E latency under load was added so.

A leaf module (imports nothing of ``plena_opt``), so every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass

MINIMIZE = "minimize"
MAXIMIZE = "maximize"


@dataclass(frozen=True)
class Metric:
    """One figure of a scored plan.

    ``name``: the SI name of ``--json``, ``--csv`` and gRPC; ``unit``: its SI unit;
    ``direction``: ``minimize`` or ``maximize`` (Optuna's words); ``interval``: it carries
    ``<name>_low``/``<name>_high``; ``objective``: the ``--objectives`` key when it is a search
    objective. ``field``/``scale``: the key of a stored trial summary and a ``FrontEntry`` when
    it differs from ``name`` (older studies keep display units: ``ttft_ms`` = SI × 1000), with
    ``field_unit`` its unit there; the Optuna metric name of an objective is ``field``.
    ``label``/``display_unit``/``display_scale``: a table's heading and the unit its cells show
    (cell = SI × ``display_scale``; the web UI's front table, ``plena-opt search``'s E2E
    column); ``percentile``: under load a search reads it at its SLA percentile (the heading
    names it).
    """

    name: str
    unit: str
    direction: str
    description: str
    interval: bool = False
    objective: str | None = None
    field: str = ""
    scale: float = 1.0
    field_unit: str = ""
    label: str = ""
    display_unit: str = ""
    display_scale: float = 1.0
    percentile: bool = False

    def __post_init__(self) -> None:
        if self.direction not in (MINIMIZE, MAXIMIZE):
            raise ValueError(f"{self.name}: direction must be {MINIMIZE} or {MAXIMIZE}")
        if not self.field:
            object.__setattr__(self, "field", self.name)
        if not self.field_unit:
            object.__setattr__(self, "field_unit", self.unit)
        if not self.label:
            object.__setattr__(self, "label", self.name)
        if not self.display_unit:
            object.__setattr__(self, "display_unit", self.unit)

    @property
    def heading(self) -> str:
        """A table's column heading: ``label`` and ``display_unit`` (``E2E ms``)."""
        return f"{self.label} {self.display_unit}"

    def to_display(self, si: float | None) -> float | None:
        """An SI value in ``display_unit`` (None stays None)."""
        return None if si is None else si * self.display_scale

    @property
    def interval_names(self) -> tuple[str, ...]:
        """``(<name>_low, <name>_high)`` when the metric carries an interval, else ``()``."""
        return (f"{self.name}_low", f"{self.name}_high") if self.interval else ()

    def to_si(self, stored: float | None) -> float | None:
        """A value under ``field`` (its ``field_unit``) in SI (None stays None)."""
        if stored is None or self.scale == 1.0:
            return stored
        return stored / self.scale


METRICS: tuple[Metric, ...] = (
    Metric(
        "ttft_seconds",
        "s",
        MINIMIZE,
        "time to first token (under load: at the search's percentile)",
        interval=True,
        objective="ttft",
        field="ttft_ms",
        scale=1e3,
        field_unit="ms",
        label="TTFT",
        percentile=True,
        display_unit="ms",
        display_scale=1e3,
    ),
    Metric(
        "tps",
        "tokens/s",
        MAXIMIZE,
        "decode tokens/s of the whole system",
        objective="tps",
        label="TPS",
        display_unit="tok/s",
    ),
    Metric(
        "tps_per_sequence",
        "tokens/s",
        MAXIMIZE,
        "decode tokens/s one sequence sees (1 / TPOT)",
        objective="tps-per-seq",
        label="TPS/user",
        display_unit="tok/s",
    ),
    Metric(
        "tpot_seconds",
        "s",
        MINIMIZE,
        "time per output token of one sequence (1 / tps_per_sequence; under load: at the "
        "search's percentile)",
        interval=True,
        label="TPOT",
        percentile=True,
        display_unit="ms",
        display_scale=1e3,
    ),
    Metric(
        "energy_per_token_joules",
        "J/token",
        MINIMIZE,
        "energy per generated token",
        objective="energy",
        field="energy_j_per_token",
        label="energy",
    ),
    Metric(
        "tps_per_device",
        "tokens/s",
        MAXIMIZE,
        "system decode tokens/s per device",
        interval=True,
        objective="tps-per-device",
        label="TPS/device",
        display_unit="tok/s",
    ),
    Metric(
        "usd_per_million_output_tokens",
        "USD",
        MINIMIZE,
        "USD per million output tokens (price file)",
        interval=True,
        objective="cost-per-mtok",
        label="output cost",
        display_unit="$/Mtok",
    ),
    Metric(
        "usd_per_million_input_tokens",
        "USD",
        MINIMIZE,
        "USD per million prompt tokens",
        label="input cost",
        display_unit="$/Mtok",
    ),
    Metric(
        "tps_per_kilowatt",
        "tokens/s/kW",
        MAXIMIZE,
        "decode tokens/s per kW of device power",
        label="TPS/kW",
        display_unit="tok/s/kW",
    ),
    Metric(
        "power_watts_per_device",
        "W",
        MINIMIZE,
        "mean device power over the decode",
        label="power/device",
    ),
    Metric(
        "e2e_seconds",
        "s",
        MINIMIZE,
        "mean request end-to-end latency under load, TTFT + (output − 1)·TPOT (steady state; "
        "none without a serving workload)",
        label="E2E",
        display_unit="ms",
        display_scale=1e3,
    ),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
"""The declarations by SI name."""
# What an interval stands on, beside the ``*_low``/``*_high`` (``api.robust``): the measured group,
# its nominal coverage, why there is none, and the robust verdict with its reason and basis.
INTERVAL_BASIS = (
    "interval_group",
    "interval_level",
    "interval_note",
    "robust",
    "robust_reason",
    "robust_basis",
)


def interval_fields() -> tuple[str, ...]:
    """Every ``*_low``/``*_high`` name, in registry order."""
    return tuple(n for m in METRICS for n in m.interval_names)


def columns() -> tuple[str, ...]:
    """The metric columns of a table (CSV): each metric, then its interval ends."""
    return tuple(n for m in METRICS for n in (m.name, *m.interval_names))
