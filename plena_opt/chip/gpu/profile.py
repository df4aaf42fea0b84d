"""GPU chip profile: datasheet peaks, HBM, fitted efficiency constants and power, each sourced.

A GPU profile is a JSON object with ``"kind": "gpu"``. Every number is a ``{"value", "source"}``
pair: a public datasheet for peaks, HBM and power; for efficiencies and fixed times, the
kernel-level measurements they were fitted on (``plena_opt/validate/calibrate.py``). Built-in
profiles live in ``plena_opt/chip/gpu/profiles/*.json``; a user profile is a complete JSON object
of the same shape (copy ``plena_opt/chip/gpu/profiles/b200.json`` to start).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from plena_opt.chip.precision import FORMATS
from plena_opt.errors import PlenaInputError, PlenaNotFoundError, PlenaTypeError

# Formats a GPU profile may list (weights and activations); see ``plena_opt.chip.precision``.
GPU_FORMATS = FORMATS
MAX_VALUE = 1e18  # bound on every profile number (FLOP/s, bytes, B/s, W, s): far beyond any chip
PositiveFloat = Annotated[float, Field(gt=0, le=MAX_VALUE, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Source = Annotated[str, Field(min_length=3)]


class Sourced(BaseModel):
    """One constant and where it comes from (datasheet URL or the data it was fitted on)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: PositiveFloat
    source: Source


class SourcedSeconds(Sourced):
    value: Annotated[float, Field(ge=0, le=MAX_VALUE, allow_inf_nan=False)]


class SourcedCount(BaseModel):
    """A whole number (tokens, ops) and where it comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: Annotated[int, Field(ge=0, le=1 << 30)]
    source: Source


class SourcedFraction(Sourced):
    value: Fraction


class GemmCurve(BaseModel):
    """Achieved GEMM time ``t0 + (c^p + m^p)^(1/p)``: ``c`` = FLOPs / (peak · compute_efficiency),
    ``m`` = bytes / (HBM bandwidth · bandwidth_efficiency); ``blend`` is ``p`` (a sharp roofline
    as p → ∞), ``fixed_seconds`` is ``t0`` (launch, prologue, epilogue)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    compute_efficiency: SourcedFraction
    bandwidth_efficiency: SourcedFraction
    blend: Sourced
    fixed_seconds: Sourced


class MoeCurve(GemmCurve):
    """Fused MoE layer: the ``GemmCurve`` plus ``seconds_per_active_expert`` (each expert that
    receives tokens costs one more tile schedule and weight-stream start)."""

    seconds_per_active_expert: SourcedSeconds
    # prefill-range curves: time per token-expert pair (routing sort, gather/scatter, top-k sum)
    seconds_per_pair: SourcedSeconds | None = None


class AttentionCurve(BaseModel):
    """Attention kernel time, same form as ``GemmCurve`` (decode: KV bytes; prefill: FLOPs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    compute_efficiency: SourcedFraction
    bandwidth_efficiency: SourcedFraction
    blend: Sourced
    fixed_seconds: Sourced


class DecodeAttentionCurve(BaseModel):
    """Decode attention ``t0 + ((s·b·H + u·b·KV)^p + m^p)^(1/p)``: ``m`` = KV bytes / (HBM
    bandwidth · bandwidth_efficiency); ``s`` = ``seconds_per_sequence_head`` (softmax
    finalisation per sequence and query head), ``u`` = ``seconds_per_sequence_kv_head`` (one
    work tile per sequence and KV head: page-table walk, split-KV reduction); ``t0`` =
    ``fixed_seconds``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    bandwidth_efficiency: SourcedFraction
    seconds_per_sequence_head: SourcedSeconds
    seconds_per_sequence_kv_head: SourcedSeconds
    blend: Sourced
    fixed_seconds: Sourced
    # the local-attention kernel's extra time once the KV is longer than the window (a sliding
    # layer past its window; ``calibrate_window``); absent where no table times it
    window_seconds: SourcedSeconds | None = None


class Hbm(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    capacity_bytes: Sourced
    bandwidth_bytes_per_s: Sourced


class Power(BaseModel):
    """Board power: ``busy_watts`` while a kernel runs (TDP), ``idle_watts`` otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    busy_watts: Sourced
    idle_watts: Sourced


class Overheads(BaseModel):
    """Fixed times outside the kernel curves: every small kernel (norm, RoPE, activation, KV
    write) pays ``kernel_seconds``; every decode or prefill step pays ``step_seconds`` (graph
    launch, sampling, scheduling)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kernel_seconds: Sourced
    step_seconds: SourcedSeconds
    elementwise_bandwidth_efficiency: SourcedFraction


class EagerHost(BaseModel):
    """Host time of a step vLLM runs without CUDA graphs (``estimate.gpu_host``): every launched
    op costs ``seconds_per_op``, every vLLM Triton kernel call ``seconds_per_triton_op``; steps
    of at most ``cuda_graph_max_tokens`` tokens with no prefill tokens run as one CUDA graph and
    pay none of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    seconds_per_op: SourcedSeconds
    seconds_per_triton_op: SourcedSeconds
    cuda_graph_max_tokens: SourcedCount


class GpuChipProfile(BaseModel):
    """A validated GPU chip: peaks per format, HBM, efficiency curves, overheads, power."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["gpu"]
    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    peak_flops: dict[str, Sourced]  # dense FLOP/s per compute format
    formats: dict[str, str]  # precision name → compute format it runs at (a peak_flops key)
    kv_formats: list[str]
    hbm: Hbm
    gemm: dict[str, GemmCurve]  # per compute format
    # the same GEMMs on decode row counts (m ≤ ``gemm_decode_max_tokens``, memory-bound), per
    # format, where the full-range fit misprices them (``plena_opt.validate.calibrate``)
    gemm_decode: dict[str, GemmCurve] = Field(default_factory=dict)
    gemm_decode_max_tokens: int = Field(default=128, ge=1, le=1 << 20)
    moe: dict[str, MoeCurve] = Field(default_factory=dict)  # fused MoE layer, per format
    # the same layer on prefill token counts (above the ``moe`` fit's range), per format
    moe_prefill: dict[str, MoeCurve] = Field(default_factory=dict)
    moe_prefill_min_tokens: int = 1024  # tokens per step from which ``moe_prefill`` applies
    attention_decode: DecodeAttentionCurve
    attention_prefill: AttentionCurve
    overheads: Overheads
    # host time of eager (non-CUDA-graph) steps; absent: no host time is priced
    eager_host: EagerHost | None = None
    power: Power

    @model_validator(mode="after")
    def _check(self) -> GpuChipProfile:
        for fmt, compute in self.formats.items():
            if fmt not in GPU_FORMATS:
                raise PlenaInputError(
                    f"formats.{fmt}", f"unknown format {fmt!r}; known: {', '.join(GPU_FORMATS)}"
                )
            if compute not in self.peak_flops:
                raise PlenaInputError(
                    f"formats.{fmt}", f"formats.{fmt} runs at {compute!r}, which has no peak_flops"
                )
            if compute not in self.gemm:
                raise PlenaInputError(f"gemm.{compute}", f"gemm.{compute} curve is required")
        for fmt in self.gemm_decode:
            if fmt not in self.gemm:
                raise PlenaInputError(
                    f"gemm_decode.{fmt}", f"gemm_decode.{fmt} needs a gemm.{fmt} curve"
                )
        for fmt in self.kv_formats:
            if fmt not in GPU_FORMATS:
                raise PlenaInputError("kv_formats", f"unknown KV format {fmt!r}")
        if "bf16" not in self.formats:
            raise PlenaInputError("formats.bf16", "a GPU profile must support bf16")
        return self

    def describe(self) -> dict[str, Any]:
        return self.model_dump()

    def compute_format(self, precision: str) -> str:
        """The peak-FLOP format ``precision`` runs at; raises naming ``precision`` if absent."""
        try:
            return self.formats[precision]
        except KeyError:
            raise PlenaInputError(
                "precision",
                f"chip {self.name} has no {precision!r} support; it offers "
                + ", ".join(self.formats),
            ) from None


def profiles_dir() -> Path:
    """The folder of the built-in GPU profile JSON files."""
    return Path(str(resources.files("plena_opt.chip.gpu") / "profiles"))


@cache
def gpu_profile_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in profiles_dir().glob("*.json")))


@cache
def _builtin(name: str) -> GpuChipProfile:
    return validate_gpu_profile(json.loads((profiles_dir() / f"{name}.json").read_text()))


def validate_gpu_profile(data: Mapping[str, Any]) -> GpuChipProfile:
    """Validate a GPU profile dict; the first error names its field (``hbm.capacity_bytes``)."""
    try:
        return GpuChipProfile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, PlenaInputError):
            raise original from None
        field = ".".join(str(p) for p in err["loc"]) or "chip"
        msg = f"GPU chip profile {field}: {err['msg']}"
        if err["type"].endswith("_type") or err["type"].endswith("_parsing"):
            raise PlenaTypeError(field, msg) from None
        raise PlenaInputError(field, msg) from None


def load_gpu_chip(name: str) -> GpuChipProfile:
    """A built-in GPU profile by name."""
    if name not in gpu_profile_names():
        raise PlenaNotFoundError(
            "chip", f"unknown GPU chip {name!r}; choose one of: {', '.join(gpu_profile_names())}"
        )
    return _builtin(name)
