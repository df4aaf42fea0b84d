"""``SearchResult``: the Pareto front and how it was found (JSON-ready pydantic models)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, computed_field

from plena_opt.search.space.misses import NearestMiss


class FrontEntry(BaseModel):
    """One scored plan. Times in ms, rates in tokens/s, energy in J/token, memory in bytes."""

    plan: dict[str, Any]
    label: str
    ttft_ms: float
    tps: float
    tps_per_sequence: float
    energy_j_per_token: float | None
    weight_bytes_per_device: float
    kv_cache_bytes_per_device: float
    memory_bytes_per_device: float
    fits_in_memory: bool | None
    bottleneck: str | None
    constraints: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    trial_number: int | None = None
    # Serving figures (issue 16): system tokens/s per device; the largest batch whose weights +
    # KV + activations fit the memory budget (None: no capacity); whether this batch is bound by
    # it (the next larger batch searched would not fit).
    tps_per_device: float | None = None
    max_batch: int | None = None
    capacity_bound: bool | None = None
    # Error bars and robustness (issue 30 item 4, ``api.robust``): the measured group's interval
    # (seconds, tokens/s/device, USD per million output tokens; None: ``interval_note`` says
    # why) and whether the SLA holds at its pessimistic end with the chip's peaks × 0.9.
    ttft_seconds_low: float | None = None
    ttft_seconds_high: float | None = None
    tpot_seconds_low: float | None = None
    tpot_seconds_high: float | None = None
    tps_per_device_low: float | None = None
    tps_per_device_high: float | None = None
    usd_per_million_output_tokens_low: float | None = None
    usd_per_million_output_tokens_high: float | None = None
    interval_group: str | None = None
    interval_level: float | None = None
    interval_note: str | None = None
    robust: bool | None = None
    robust_reason: str | None = None
    robust_basis: str | None = None
    # Cost and power (issue 30, ``estimate.cost``): USD per million output / input tokens (None:
    # the chip has no price; ``cost_note`` says why), decode tokens/s per kW, W per device.
    usd_per_million_output_tokens: float | None = None
    usd_per_million_input_tokens: float | None = None
    tps_per_kilowatt: float | None = None
    power_watts_per_device: float | None = None
    cost_note: str | None = None
    e2e_seconds: float | None = None  # mean request end-to-end latency under load (s)
    # Serving under load (issue 23): with a search workload, ``ttft_ms``/``tps``/
    # ``tps_per_sequence`` are the under-load figures; the static batch's stay here (ms, tokens/s)
    # and ``under_load`` holds the steady state (means, the percentile judged, throughputs).
    static_ttft_ms: float | None = None
    static_tps: float | None = None
    static_tps_per_sequence: float | None = None
    under_load: dict[str, Any] | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def key(self) -> str:
        """The key ``plena-opt export`` takes (``tp8-ep1-dp1-pp4-cp1-replace-none-b16``)."""
        from plena_opt.search.space.space import Point

        return Point.from_dict(self.plan).key

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tpot_seconds(self) -> float | None:
        """Time per output token of one sequence (s) = 1 / per-sequence TPS (None: no decode).
        A registry metric (``plena_opt.metrics``) carrying ``tpot_seconds_low/high``."""
        x = self.tps_per_sequence
        return 1.0 / x if x > 0 and math.isfinite(x) else None

    @property
    def tpot_ms(self) -> float:
        """Time per output token of one sequence (ms) = 1000 / per-sequence TPS."""
        return 1e3 / self.tps_per_sequence if self.tps_per_sequence > 0 else float("inf")

    @property
    def feasible(self) -> bool:
        """Whether every constraint holds (value ≤ 0)."""
        return all(v <= 0 for v in self.constraints.values())


class SearchResult(BaseModel):
    """Outcome of ``run_search``.

    ``front`` is the feasible Pareto front ordered by TPS (highest first); ``hypervolume`` is on
    objectives normalised by ``hv_normalisation`` with reference point 1.1 per axis;
    ``exact_hypervolume``/``hv_ratio`` compare a sampled front with the exhaustive one when the
    space was scored; ``partial`` marks a search stopped before it finished (cancel, deadline,
    Ctrl-C); ``best_infeasible`` is the least-violating plan when no plan meets the constraints.
    ``trials`` counts every trial in the study; ``trials_completed`` the distinct plans scored and
    stored in it (``plena_opt.search.storage.trials.trials_completed``); ``front_recall`` and
    ``igd`` rate a front against the exact one (``plena_opt.search.fronts.quality``). ``scored``
    holds every plan scored or reused in this run (for ``--csv-all`` and ``--plot``; not
    serialised).
    """

    study_name: str
    storage: str
    sampler: str
    objectives: list[str]
    metric_names: list[str]
    directions: list[str]
    constraints: list[str]
    legal_points: int
    evaluated: int
    reused: int
    trials: int
    trials_completed: int = 0
    pruned_illegal: int
    repeats: int
    front: list[FrontEntry]
    hypervolume: float | None = None
    hv_normalisation: str | None = None
    exact_front_size: int | None = None
    exact_hypervolume: float | None = None
    hv_ratio: float | None = None
    front_recall: float | None = None
    igd: float | None = None
    partial: bool = False
    stop_reason: str | None = None
    best_infeasible: FrontEntry | None = None
    infeasible: dict[str, int] = Field(default_factory=dict)
    # per constraint broken: the plan closest to meeting it, its value vs the limit (issue 25)
    nearest_miss: dict[str, NearestMiss] = Field(default_factory=dict)
    elapsed_s: float = 0.0
    warnings: list[str] = Field(default_factory=list)
    # Serving (issue 16): the SLA and its percentile, goodput (the best tokens/s/device of a
    # plan meeting it, analytic and, after a re-check, at the percentile) and the side-by-side
    # comparison of aggregated and disaggregated serving.
    serving: dict[str, Any] = Field(default_factory=dict)
    # Serving under load (issue 23): the workload, engine, percentile and basis the front's
    # figures are priced under (None: static batch figures).
    under_load: dict[str, Any] | None = None
    scored: list[FrontEntry] = Field(default_factory=list, exclude=True)
