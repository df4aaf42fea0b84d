"""Pydantic models of the web API (``/api/…``): requests with their bounds, and responses.

Requests forbid unknown fields; every size is bounded (:mod:`plena_opt.web.limits`). Times in
responses are milliseconds. A timeline is sent column-wise (one list per quantity, indexed by op
id) because a page with 10,000+ ops reads arrays far faster than objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from plena_opt.web import limits

Schedule = Literal["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "bigmac-vpp"]
Sample = Literal["deterministic", "p50", "p99"]
Name = Field(min_length=1, max_length=limits.MAX_NAME_CHARS)
Durations = dict[str, float]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainingIn(_In):
    """A training schedule; ``durations_ms`` per pipeline stage (chunk ops take F/v)."""

    schedule: Schedule = "1f1b"
    pp: int = Field(4, ge=1, le=limits.MAX_PP)
    vpp: int = Field(1, ge=1, le=limits.MAX_VPP)
    microbatches: int = Field(8, ge=1, le=limits.MAX_MICROBATCHES)
    durations_ms: Durations = Field(
        default_factory=lambda: {"F": 1.0, "B": 2.0}, max_length=limits.MAX_DURATION_KEYS
    )


class ServingIn(_In):
    """A serving plan on built-in profiles; ``durations_ms`` overrides the estimate's stage times
    (keys ``P_s{r}``, ``D0_s{r}``, ``D_s{r}``, ``XP``, ``XD``)."""

    model: str = Field("llama-3.1-70b", min_length=1, max_length=limits.MAX_NAME_CHARS)
    noc: str = Field("illustrative_gpu_cluster_32", min_length=1, max_length=limits.MAX_NAME_CHARS)
    memory: str = Field("fictional_stacked_dram", min_length=1, max_length=limits.MAX_NAME_CHARS)
    # a chip profile name (None: the default PLENA chip); a GPU chip carries its own HBM, so
    # ``memory`` is then not used
    chip: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_CHARS)
    tp: int = Field(8, ge=1, le=limits.MAX_DEGREE)
    ep: int = Field(1, ge=1, le=limits.MAX_DEGREE)
    dp: int = Field(1, ge=1, le=limits.MAX_DEGREE)
    pp: int = Field(4, ge=1, le=limits.MAX_DEGREE)
    cp: int = Field(1, ge=1, le=limits.MAX_DEGREE)
    moe_tp_mode: Literal["replace", "keep"] = "replace"
    moe_tp: int = Field(0, ge=0, le=limits.MAX_DEGREE)  # explicit MoE split; 0: by the mode
    comm_overlap: Literal["none", "full"] = "none"
    batch_size: int = Field(16, ge=1, le=limits.MAX_BATCH)
    input_seq: int = Field(2048, ge=1, le=limits.MAX_INPUT_SEQ)
    output_seq: int = Field(1024, ge=1, le=limits.MAX_OUTPUT_SEQ)
    max_window_steps: int = Field(16, ge=1, le=limits.MAX_WINDOW_STEPS)
    durations_ms: Durations | None = Field(None, max_length=limits.MAX_DURATION_KEYS)


class SimulateIn(_In):
    """``mode`` picks ``training`` or ``serving``; ``simulate_comm`` None = the CLI default (off
    for training, on for serving)."""

    mode: Literal["training", "serving"] = "training"
    training: TrainingIn | None = None
    serving: ServingIn | None = None
    noise: str | dict = Field("sigma=0.05")
    samples: int = Field(1000, ge=0, le=limits.MAX_SAMPLES)
    seed: int = Field(0, ge=0, lt=2**32)
    simulate_comm: bool | None = None

    @model_validator(mode="after")
    def _fill(self) -> SimulateIn:
        if self.mode == "training" and self.training is None:
            self.training = TrainingIn()
        if self.mode == "serving" and self.serving is None:
            self.serving = ServingIn()
        return self

    @field_validator("noise")
    @classmethod
    def _noise_text(cls, v: str | dict) -> str | dict:
        if isinstance(v, str) and len(v) > limits.MAX_NOISE_CHARS:
            raise ValueError(f"noise: at most {limits.MAX_NOISE_CHARS} characters")
        return v

    @property
    def comm(self) -> bool:
        if self.simulate_comm is not None:
            return self.simulate_comm
        return self.mode == "serving"


class TraceIn(SimulateIn):
    """The simulation whose timeline ``sample`` is exported as a Chrome/Perfetto trace."""

    sample: Sample = "deterministic"


class EstimateIn(ServingIn):
    """A serving plan to estimate (``durations_ms`` is ignored)."""


class QuantileOut(BaseModel):
    metric: str
    unit: str
    n: int
    mean: float
    mean_ci: tuple[float, float]
    p50: float
    p50_ci: tuple[float, float]
    p90: float
    p90_ci: tuple[float, float]
    p99: float
    p99_ci: tuple[float, float]


class OpsOut(BaseModel):
    """Static op data (index = op id). ``deps[j]`` = ``[src, reason index]`` pairs into
    ``reasons``; ``lane`` is ``compute`` or ``comm``."""

    name: list[str]
    label: list[str]
    rank: list[int]
    chunk: list[int]
    microbatch: list[int]
    step: list[int]
    op_type: list[str]
    kind: list[str]
    component: list[str]
    lane: list[str]
    deps: list[list[tuple[int, int]]]
    reasons: list[str]
    reason_text: dict[str, str]


class TimelineOut(BaseModel):
    """One sample's timeline (ms). ``binding[j]`` = index into ``ops.deps[j]`` (−1: none);
    ``rank_bubble_ratio[r]`` = idle / busy of rank ``r``."""

    sample: str
    makespan: float
    rank_busy: list[float]
    rank_idle: list[float]
    rank_bubble_ratio: list[float]
    bubble_ratio: float
    bubble_share: float
    critical_path: list[int]
    start: list[float]
    end: list[float]
    ready_at: list[float]
    rank_free_at: list[float]
    binding: list[int]
    n_waits: int


class MonteCarloOut(BaseModel):
    n_samples: int
    seed: int
    quantiles: list[QuantileOut]
    criticality_by_type: dict[str, float]
    rank_idle_mean_ms: list[float]


class SimulateOut(BaseModel):
    result_id: str
    mode: str
    title: str
    time_unit: Literal["ms"] = "ms"
    pp: int
    vpp: int
    microbatches: int
    n_ops: int
    simulate_comm: bool
    durations_ms: dict[str, float]
    ops: OpsOut
    timelines: dict[str, TimelineOut]
    monte_carlo: MonteCarloOut | None
    analytic: dict[str, float] | None
    notes: list[str]
    bubble_definition: str


class StudyOut(BaseModel):
    """``kind``: ``plans`` (a search study: ``/front``) or ``serving`` (a serving comparison:
    ``/serving``)."""

    name: str
    kind: Literal["plans", "serving"]
    n_trials: int
    metric_names: list[str] | None
    directions: list[str]
    trials_by_state: dict[str, int]
    problem: dict | None


class FrontTrialOut(BaseModel):
    number: int
    label: str
    plan: dict
    values: list[float]
    feasible: bool
    on_front: bool
    ttft_ms: float
    tps: float
    #: decode tokens/s ÷ devices (None when the plan's device count is unknown)
    tps_per_device: float | None
    #: one sequence's decode tokens/s (= 1 / TPOT in seconds)
    tps_per_user: float
    energy_j_per_token: float | None


class FrontOut(BaseModel):
    """``view``: the axes the page draws, as ``plena-opt search --plot``: TTFT vs TPS, or with
    an SLA (``sla_constraints``) or a tokens/s-per-device objective, tokens/s per user (x) vs
    tokens/s per device (y)."""

    name: str
    view: Literal["ttft-tps", "per-user-per-device"]
    sla_constraints: list[str]
    metric_names: list[str]
    directions: list[str]
    problem: dict | None
    #: problem fields the serving form cannot show (non-default chip, precision, profile files…);
    #: when any, the page does not open the study's plans in the simulator
    not_in_form: list[str]
    trials: list[FrontTrialOut]


class ServingSlaOut(BaseModel):
    """The SLA a serving comparison was judged on (None: no limit)."""

    max_ttft_seconds: float | None
    max_tpot_seconds: float | None
    min_tps_per_seq: float | None


class ServingPoolOut(BaseModel):
    """One pool of a deployment: ``workers`` copies of a ``devices_per_worker``-device plan."""

    role: Literal["aggregated", "prefill", "decode"]
    label: str
    tp: int
    ep: int
    dp: int
    pp: int
    cp: int
    moe_tp_mode: Literal["replace", "keep"]
    moe_tp: int = 0  # an explicit MoE split (``Plan.moe_tp``); 0: by moe_tp_mode
    comm_overlap: Literal["none", "full"]
    batch_size: int
    workers: int
    precision: str | None
    devices_per_worker: int


class ServingTrialOut(BaseModel):
    """A stored deployment. ``constraints``: relative excess over each SLA limit (≤ 0 meets
    it); ``on_front``: on its mode's Pareto front of the SLA-meeting deployments; ``plan``: what
    the simulator form opens (aggregated only); ``simulate_commands``: one ``plena-opt simulate``
    per pool of a disaggregated deployment (the simulator form has no disaggregated plan)."""

    number: int
    serving: Literal["aggregated", "disaggregated"]
    label: str
    devices: int
    ttft_seconds: float
    tpot_seconds: float
    tps_per_device: float
    tps_per_user: float
    energy_j_per_token: float | None
    kv_transfer_seconds: float | None
    constraints: dict[str, float]
    meets_sla: bool
    on_front: bool
    pools: list[ServingPoolOut]
    plan: dict | None
    simulate_commands: list[str]


class ServingModeOut(BaseModel):
    """A mode's deployments: counts and goodput (best tokens/s/device meeting the SLA)."""

    mode: Literal["aggregated", "disaggregated"]
    n_trials: int
    n_meeting_sla: int
    goodput_tps_per_device: float | None
    goodput_label: str | None


class ServingStudyOut(BaseModel):
    """A serving comparison study (``<search>-serving``). ``verdict``: the search's sentence;
    ``winner`` and ``goodput_ratio`` (winner's goodput ÷ the other's) recomputed from the
    stored deployments."""

    name: str
    serving_comparison_of: str
    metric_names: list[str]
    directions: list[str]
    sla: ServingSlaOut
    verdict: str | None
    winner: Literal["aggregated", "disaggregated"] | None
    goodput_ratio: float | None
    modes: list[ServingModeOut]
    problem: dict | None
    not_in_form: list[str]
    trials: list[ServingTrialOut]


class MetricOut(BaseModel):
    """One declaration of the metric registry (``plena_opt.metrics``): the page's table
    headings, units and tooltips come from these. A cell shows SI × ``display_scale`` in
    ``display_unit``; ``percentile``: under load the figure is at the search's percentile."""

    name: str
    unit: str
    direction: Literal["minimize", "maximize"]
    description: str
    interval: bool
    objective: str | None
    label: str
    display_unit: str
    display_scale: float
    percentile: bool
