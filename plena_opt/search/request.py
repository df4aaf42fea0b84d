"""``SearchRequest``: everything a search needs, validated at the boundary (CLI and gRPC)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from plena_opt.bounds import (
    MAX_CONCURRENCY,
    MAX_MEMORY_FRACTION,
    MAX_REQUEST_RATE,
    MAX_SEARCH_SECONDS,
    MAX_SLA,
    MAX_TRIALS,
)
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.space.objectives import DEFAULT_OBJECTIVES, OBJECTIVES
from plena_opt.vocabulary import Percentile, Sampler, ServingMode, ServingSampler

MEMORY_STORAGE = ":memory:"
# Serving options that change what the study's trials hold (constraints, batches); the
# percentile and the serving comparison are judged after the search and leave the study as is.
SERVING_DEFAULTS = {
    "max_tpot_ms": None,
    "memory_fraction": None,
    "auto_batch": False,
    "precisions": None,
    "max_cost_per_mtok": None,
    "prices": None,
    # serving under load (issue 23): the workload every plan is priced under
    "concurrency": None,
    "request_rate": None,
    "engine": None,
    "engine_version": None,
    "range_ratio": 0.0,
}


def _in_range(v: float | None, hi: float, what: str) -> float | None:
    """``v`` if None or ``0 < v <= hi`` (so finite); else a ValueError saying the range."""
    if v is not None and not 0 < v <= hi:
        raise ValueError(f"must be {what} above 0 and at most {hi:,.0f}, got {v!r}")
    return v


class SearchRequest(BaseModel):
    """A multi-objective plan search.

    ``batch_sizes`` (sequences) replaces ``problem.batch_size`` by a searched list; ``objectives``
    are keys of ``OBJECTIVES``; ``max_ttft_ms`` (ms) / ``min_tps_per_seq`` (tokens/s) are SLAs;
    ``trials`` caps the distinct plans a sampler's study holds in all (an earlier run of the same
    search counts: a re-run with the same ``trials`` scores nothing, a larger one the difference);
    ``timeout`` and ``deadline`` (seconds from the start) stop the search early (a deadline marks
    the result partial); ``storage`` is a journal path, an RDB URL or ``":memory:"``; ``study``
    names the study (default: derived from the problem, so the same search resumes);
    ``compare_exact`` scores the whole space to report the hypervolume ratio of a sampled front
    (None: only when the space is small).
    """

    model_config = ConfigDict(extra="forbid", use_enum_values=True, allow_inf_nan=False)

    problem: ProblemSpec = Field(default_factory=ProblemSpec)
    batch_sizes: list[int] | None = None
    objectives: list[str] = Field(default_factory=lambda: list(DEFAULT_OBJECTIVES))
    # ranges checked by the validators below, which say them (inf and nan included)
    max_ttft_ms: float | None = Field(default=None, allow_inf_nan=True)
    min_tps_per_seq: float | None = Field(default=None, allow_inf_nan=True)
    sampler: Sampler = Sampler.AUTO
    trials: int = 200
    timeout: float | None = Field(default=None, allow_inf_nan=True)
    deadline: float | None = Field(default=None, allow_inf_nan=True)
    # a fixed default: the same request gives the same front (None asks for a random seed)
    seed: int | None = Field(default=0, ge=0, lt=2**32)
    study: str | None = None
    storage: str | None = None
    compare_exact: bool | None = None
    auto_budget_s: float = Field(default=10.0, gt=0)
    # Serving (issue 16): TPOT SLA (ms per output token), the percentile the re-check judges the
    # SLA at, the memory budget (fraction of capacity, like vLLM's gpu_memory_utilization),
    # ``auto_batch`` (search batches up to each plan's KV-capacity bound) and the serving mode.
    max_tpot_ms: float | None = Field(default=None, allow_inf_nan=True)
    percentile: Percentile = Percentile.P50
    memory_fraction: float | None = Field(default=None, gt=0, le=MAX_MEMORY_FRACTION)
    auto_batch: bool = False
    serving: ServingMode = ServingMode.AGGREGATED
    # How the ``serving`` comparison searches disaggregated deployments; ``optuna`` scores at
    # most ``trials`` deployments in all and resumes the ``<study>-serving`` study.
    serving_sampler: ServingSampler = ServingSampler.AUTO
    # Precision as a knob: the weight/activation formats searched with the plan (each a
    # ``plena_opt.chip.precision.FORMATS`` name the chip supports); None: ``problem.precision``.
    precisions: list[str] | None = Field(default=None, max_length=6)
    # Cost (issue 30): the price file (a path; None: the shipped ``estimate/prices.json``) and
    # the cost SLA, USD per million output tokens (``estimate.cost``).
    prices: str | None = Field(default=None, min_length=1, max_length=4096)
    max_cost_per_mtok: float | None = Field(default=None, allow_inf_nan=True)
    # Serving under load (issue 23): with a closed loop of ``concurrency`` clients or a Poisson
    # ``request_rate`` (requests/s), every plan is also priced under ``engine``'s scheduler
    # (steady state) and the objectives and SLAs read those figures at ``percentile``. Without a
    # load, ``engine`` prices the static plans with its kernels (``problem.engine``).
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    request_rate: float | None = Field(default=None, gt=0, le=MAX_REQUEST_RATE)
    engine: str | None = Field(default=None, max_length=64)
    engine_version: str | None = Field(default=None, max_length=64)
    range_ratio: float = Field(default=0.0, ge=0, lt=1)

    @field_validator("trials")
    @classmethod
    def _trials(cls, v: int) -> int:
        if not 1 <= v <= MAX_TRIALS:
            raise ValueError(f"trials must be between 1 and {MAX_TRIALS:,}, got {v}")
        return v

    @field_validator("timeout", "deadline", "auto_budget_s")
    @classmethod
    def _seconds(cls, v: float | None) -> float | None:
        return _in_range(v, MAX_SEARCH_SECONDS, "a number of seconds")

    @field_validator("max_ttft_ms", "min_tps_per_seq", "max_tpot_ms", "max_cost_per_mtok")
    @classmethod
    def _sla(cls, v: float | None) -> float | None:
        return _in_range(v, MAX_SLA, "a finite number")

    @field_validator("precisions")
    @classmethod
    def _precisions(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        from plena_opt.chip.precision import FORMATS

        if not v:
            raise ValueError("precisions must not be empty")
        for name in v:
            if name not in FORMATS:
                raise ValueError(f"unknown format {name!r}; choose from {', '.join(FORMATS)}")
        if len(set(v)) != len(v):
            raise ValueError("precisions must not repeat")
        return list(v)

    @model_validator(mode="after")
    def _one_precision_source(self) -> SearchRequest:
        if self.precisions and self.problem.precision is not None:
            raise ValueError("--precision and --precisions exclude each other; give one")
        if self.concurrency is not None and self.request_rate is not None:
            raise ValueError("give --concurrency or --request-rate, not both")
        if not self.under_load:
            for flag, value in (("--engine-version", self.engine_version),
                                ("--range-ratio", self.range_ratio)):  # fmt: skip
                if value:
                    raise ValueError(f"{flag} needs --concurrency or --request-rate")
            self._static_engine()
        return self

    def _static_engine(self) -> None:
        """Without a load, ``engine`` E prices the static plans with E's kernels (its MoE kernel,
        its fused input quantisation), as ``estimate --engine E`` does: ``problem.engine`` = E,
        so the study fingerprint names E (issue 23 item 4)."""
        if self.engine is None or self.problem.engine == self.engine:
            return
        if self.problem.engine is not None:
            raise ValueError(f"engine {self.engine[:64]!r} and problem.engine "
                             f"{self.problem.engine[:64]!r} differ: give one")  # fmt: skip
        self.problem = self.problem.model_copy(update={"engine": self.engine})

    @field_validator("batch_sizes")
    @classmethod
    def _batches(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("batch_sizes must not be empty")
        if any(b < 1 for b in v):
            raise ValueError("batch sizes must be positive integers")
        if len(set(v)) != len(v):
            raise ValueError("batch sizes must not repeat")
        return sorted(v)

    @field_validator("objectives")
    @classmethod
    def _objectives(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("objectives must name at least one objective")
        for k in v:
            if k not in OBJECTIVES:
                raise ValueError(f"unknown objective {k!r}; choose from {', '.join(OBJECTIVES)}")
        if len(set(v)) != len(v):
            raise ValueError("objectives must not repeat")
        return v

    def serving_key(self) -> dict:
        """The serving options that differ from their defaults (part of the study fingerprint,
        so studies made before these options keep their names)."""
        out: dict = {}
        for name, default in SERVING_DEFAULTS.items():
            if name == "engine" and not self.under_load:
                continue  # a static search's engine is the problem's (its fingerprint)
            if getattr(self, name) != default:
                out[name] = getattr(self, name)
        if self.under_load:  # the percentile then changes the trials' values
            out["percentile"] = self.percentile
        return out

    @property
    def under_load(self) -> bool:
        """Whether plans are priced under a serving workload (issue 23)."""
        return self.concurrency is not None or self.request_rate is not None

    def batch_list(self) -> list[int]:
        """The searched global batch sizes. Under ``concurrency`` C it is C alone: a plan's batch
        is its engine's cap on running requests (the launch files' ``max_num_seqs``), and the
        serving model admits every client, as a benchmark at that concurrency runs."""
        if self.concurrency is not None:
            return [self.concurrency]
        return self.batch_sizes or [self.problem.batch_size]


def budget_left(req: SearchRequest, unscored: int, space: int) -> int:
    """New plans a sampler may still score: ``trials`` counts the distinct plans the study holds
    in all (``space - unscored`` stored already, by this search or an earlier run of it), so a
    re-run with the same ``trials`` scores nothing and a larger one scores the difference."""
    return max(0, min(req.trials - (space - unscored), unscored))
