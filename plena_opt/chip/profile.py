"""PLENA chip profile: hardware configuration, latency constants and ISA cost table.

A profile holds the `[ANALYTIC]` values of ``plena_settings.toml`` (analytic-model §1.1) and the
pipelined instruction-cost expressions of ``customISA_lib.json`` (§1.2). Built-in profiles live in
``plena_opt/chip/profiles/*.json``; a user profile is a JSON object that overrides any subset of a
built-in one (``base``, default ``plena-default``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

import plena_opt.jsonio as jsonio
from plena_opt.bounds import Bytes, ranged, strip_value_error
from plena_opt.chip.expression import ExpressionError, evaluate
from plena_opt.errors import PlenaInputError, PlenaNotFoundError, PlenaTypeError, echo, name_list

DEFAULT_CHIP = "plena-default"

PositiveInt = Annotated[int, Field(strict=True, gt=0)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]
# Plausible ranges (plena_opt.bounds): lengths up to 65,536 elements, SRAM up to 2**32 rows,
# HBM up to 16 EiB and 65,536 bits wide, a million cycles per operation.
Length = ranged(1, 2**16, "elements", integer=True)
Rows = ranged(1, 2**32, "rows", integer=True)
Count = ranged(1, 2**24, integer=True)
LatencyCycles = ranged(0, 2**20, "cycles", integer=True)
Expression = Annotated[str, Field(strict=True, min_length=1)] | Annotated[int, Field(strict=True)]

# Every instruction of the reference ISA table (§1.2); all must have a cost after merging.
INSTRUCTIONS: tuple[str, ...] = (
    "M_MM", "M_TMM", "M_BMM", "M_BTMM", "M_MM_WO", "M_BMM_WO", "M_MV_WO", "M_BMV_WO",
    "M_MV", "M_TMV", "M_BMV", "M_BTMV",
    "V_BASIC", "V_ADD_VV", "V_ADD_VF", "V_SUB_VV", "V_SUB_VF", "V_MUL_VV", "V_MUL_VF",
    "V_EXP_V", "V_RECI_V", "V_RED_SUM", "V_RED_MAX", "V_TOPK",
    "S_BASIC", "S_ADD_FP", "S_SUB_FP", "S_MAX_FP", "S_MUL_FP", "S_EXP_FP", "S_RECI_FP",
    "S_SQRT_FP", "S_LD_FP", "S_ST_FP", "S_MAP_V_FP", "S_LD_INT", "S_ST_INT",
    "S_ADD_INT", "S_ADDI_INT", "S_SUB_INT", "S_MUL_INT", "S_LUI_INT",
    "H_PREFETCH_M", "H_PREFETCH_V", "H_STORE_V",
    "C_SET_ADDR_REG", "C_SET_SCALE_REG", "C_SET_STRIDE_REG", "C_SET_V_MASK_REG",
    "C_LOOP_START", "C_LOOP_END", "C_BREAK",
)  # fmt: skip

_PROFILE_KEYS = (
    "name", "base", "description", "provenance", "config", "latency", "instructions", "kind",
    "power",
)  # fmt: skip
_MERGED_SECTIONS = ("config", "latency", "instructions")


class ChipConfig(BaseModel):
    """``[ANALYTIC.CONFIG]`` values (§1.1). Lengths in elements, sizes as noted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    DC_EN: ranged(0, 1, integer=True)
    MAX_LOOP_INSTRUCTIONS: Count
    MLEN: Length  # systolic tile edge (elements)
    BLEN: Length  # matrix-unit block edge (elements)
    VLEN: Length  # vector width (elements)
    HLEN: Length  # head-dim lane width (elements)
    BROADCAST_AMOUNT: Length
    HBM_SIZE: Bytes  # bytes
    HBM_WIDTH: ranged(1, 2**16, "bits", integer=True)  # bits
    MATRIX_SRAM_SIZE: Rows
    VECTOR_SRAM_SIZE: Rows  # rows of VLEN elements
    HBM_M_Prefetch_Amount: Count
    HBM_V_Prefetch_Amount: Count  # VLEN-rows per vector prefetch
    HBM_V_Writeback_Amount: Count

    @model_validator(mode="after")
    def _shape_rules(self) -> ChipConfig:
        if self.MLEN % self.BLEN:
            raise PlenaInputError("config.MLEN", "config.MLEN must be a multiple of config.BLEN")
        if self.VLEN < self.BLEN:
            raise PlenaInputError("config.VLEN", "config.VLEN must be at least config.BLEN")
        if self.HLEN > self.MLEN:  # flash attention packs MLEN // HLEN heads per tile (§1.4)
            raise PlenaInputError("config.HLEN", "config.HLEN must not exceed config.MLEN")
        return self


class ChipLatency(BaseModel):
    """``[ANALYTIC.LATENCY]`` ``dc_lib_en`` values (§1.1), in cycles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    SYSTOLIC_PROCESSING_OVERHEAD: LatencyCycles
    VECTOR_LONGEST_OPERATE_CYCLES: LatencyCycles
    VECTOR_BASIC_CYCLES: LatencyCycles
    VECTOR_ADD_CYCLES: LatencyCycles
    VECTOR_MUL_CYCLES: LatencyCycles
    VECTOR_EXP_CYCLES: LatencyCycles
    VECTOR_PREFIX_SCAN_CYCLES: LatencyCycles
    VECTOR_SHIFT_CYCLES: LatencyCycles
    VECTOR_RECI_CYCLES: LatencyCycles
    VECTOR_MAX_CYCLES: LatencyCycles
    VECTOR_SUM_CYCLES: LatencyCycles
    SCALAR_FP_LONGEST_OPERATE_CYCLES: LatencyCycles
    SCALAR_FP_BASIC_CYCLES: LatencyCycles
    SCALAR_FP_EXP_CYCLES: LatencyCycles
    SCALAR_FP_SQRT_CYCLES: LatencyCycles
    SCALAR_FP_RECI_CYCLES: LatencyCycles
    SCALAR_INT_BASIC_CYCLES: LatencyCycles


class ChipPower(BaseModel):
    """Optional power of one PLENA chip (W): ``busy_watts`` while its compute units run,
    ``idle_watts`` otherwise, with the ``source`` of both (synthesis report, measurement).
    Memory access energy is the memory profile's (pJ/bit), so these exclude DRAM. No shipped
    PLENA profile has one: without it PLENA compute energy is not modelled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    busy_watts: Annotated[float, Field(gt=0, le=1e5, allow_inf_nan=False)]
    idle_watts: Annotated[float, Field(ge=0, le=1e5, allow_inf_nan=False)]
    source: Annotated[str, Field(min_length=1, max_length=500)]

    @model_validator(mode="after")
    def _idle_below_busy(self) -> ChipPower:
        if self.idle_watts > self.busy_watts:
            raise PlenaInputError("power.idle_watts", "power.idle_watts must not exceed busy_watts")
        return self


class ChipProfile(BaseModel):
    """A complete, validated chip profile; ``instruction_costs`` holds the evaluated table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(strict=True, min_length=1)]
    description: str = ""
    provenance: dict[str, Any] = Field(default_factory=dict)
    config: ChipConfig
    latency: ChipLatency
    instructions: dict[str, Expression]
    power: ChipPower | None = None

    _costs: dict[str, int] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _evaluate_instructions(self) -> ChipProfile:
        unknown = sorted(set(self.instructions) - set(INSTRUCTIONS))
        if unknown:
            raise PlenaInputError(
                f"instructions.{unknown[0]}",
                f"unknown instruction(s) {', '.join(unknown)} (plena-default lists the names)",
            )
        missing = [n for n in INSTRUCTIONS if n not in self.instructions]
        if missing:
            raise PlenaInputError(
                f"instructions.{missing[0]}", f"missing instruction cost(s): {', '.join(missing)}"
            )
        names = self.namespace()
        costs: dict[str, int] = {}
        for op in INSTRUCTIONS:
            field = f"instructions.{op}"
            try:
                value = evaluate(self.instructions[op], names)
            except ExpressionError as exc:
                raise PlenaInputError(field, f"{field} {exc}") from None
            if value <= 0:
                raise PlenaInputError(field, f"{field} must be greater than zero (got {value})")
            if value != int(value):
                raise PlenaInputError(
                    field, f"{field} must evaluate to a whole number of cycles (got {value})"
                )
            costs[op] = int(value)
        self._costs = costs
        return self

    def namespace(self) -> dict[str, int]:
        """Names visible to instruction expressions: config + latency + ``SA_ACC_CYCLES`` (§1.2)."""
        names = {**self.config.model_dump(), **self.latency.model_dump()}
        names["SA_ACC_CYCLES"] = int(math.log2(self.config.MLEN / self.config.BLEN) + 1)
        return names

    @property
    def instruction_costs(self) -> dict[str, int]:
        """Pipelined cycle cost of every instruction (a copy)."""
        return dict(self._costs)

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary: the profile values plus the evaluated instruction costs."""
        doc = self.model_dump(exclude={"power"} if self.power is None else None)
        return {**doc, "instruction_costs": self.instruction_costs}


def _profiles_dir() -> Path:
    return Path(str(resources.files("plena_opt.chip") / "profiles"))


@cache
def _builtin_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in _profiles_dir().glob("*.json")))


def list_chip_profiles() -> list[str]:
    """Names of the built-in chip profiles (PLENA ISA profiles, then GPU profiles)."""
    from plena_opt.chip.gpu.profile import gpu_profile_names

    return list(_builtin_names()) + list(gpu_profile_names())


def _read_json(path: Path, what: str, field: str = "chip") -> dict[str, Any]:
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise PlenaInputError(field, f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    data = jsonio.load_document(text, field, f"{what} {str(path)!r}")
    if not isinstance(data, dict):
        raise PlenaTypeError(field, f"{what} {str(path)!r} must hold a JSON object")
    return data


def _builtin_dict(name: str) -> dict[str, Any]:
    names = list_chip_profiles()
    if name not in names:
        raise PlenaNotFoundError(
            "chip", f"unknown chip profile {echo(name)}; choose one of: {name_list(names)}"
        )
    return _read_json(_profiles_dir() / f"{name}.json", "chip profile")


@cache
def _builtin_profile(name: str) -> ChipProfile:
    """Built-in profiles are immutable, so each is read and validated once."""
    return _validate(_builtin_dict(name))


def _merge(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay a (partial) profile dict on its ``base`` built-in profile."""
    unknown = sorted(set(overrides) - set(_PROFILE_KEYS))
    if unknown:
        raise PlenaInputError(
            unknown[0],
            f"chip profile: unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(_PROFILE_KEYS)}",
        )
    if not any(key in overrides for key in ("base", *_MERGED_SECTIONS)):
        raise PlenaInputError(
            "chip",
            "chip profile names no base and overrides nothing: give 'base' (a built-in "
            f"profile such as {DEFAULT_CHIP}) or 'config', 'latency' or 'instructions' (an "
            "empty profile is not priced as the default chip)",
        )
    base_name = overrides.get("base", DEFAULT_CHIP)
    if not isinstance(base_name, str):
        raise PlenaTypeError("base", "chip profile base must be a built-in profile name")
    merged = _builtin_dict(base_name)
    for section in _MERGED_SECTIONS:
        if section in overrides:
            patch = overrides[section]
            if not isinstance(patch, Mapping):
                raise PlenaTypeError(section, f"chip profile {section} must be a JSON object")
            merged[section] = {**merged[section], **patch}
    for key in ("description", "provenance", "power"):
        if key in overrides:
            merged[key] = overrides[key]
    merged["name"] = overrides.get("name", f"{base_name}+custom")
    return merged


def _validate(data: Mapping[str, Any]) -> ChipProfile:
    try:
        return ChipProfile.model_validate(data)
    except ValidationError as exc:
        raise _input_error(exc) from None


def _input_error(exc: ValidationError) -> PlenaInputError:
    """First pydantic error → PlenaInputError naming the field (e.g. ``config.MLEN``)."""
    err = exc.errors()[0]
    original = (err.get("ctx") or {}).get("error")
    if isinstance(original, PlenaInputError):
        return original
    parts = [str(part) for part in err["loc"]]
    union_member = any("-" in part for part in parts)  # e.g. 'constrained-str' of a union
    field = ".".join(part for part in parts if "-" not in part and "[" not in part)
    kind = err["type"]
    if union_member and field.startswith("instructions."):
        return PlenaTypeError(
            field, f"chip profile {field}: must be a whole number or an expression string"
        )
    if kind == "extra_forbidden":
        return PlenaInputError(field, f"chip profile: unknown key {field!r}")
    if kind == "missing":
        return PlenaInputError(field, f"chip profile: missing {field!r}")
    message = f"chip profile {field}: {strip_value_error(err['msg'])}"
    if kind == "value_error":
        message += f" (got {err.get('input')!r})"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return PlenaTypeError(field, message)
    return PlenaInputError(field, message)


CHIP_KINDS = ("plena", "gpu")  # the profile formats ``load_chip`` reads (``kind``; default plena)


def _document_kind(data: Mapping[str, Any]) -> str:
    """A profile document's ``kind``; one this loader cannot read is refused naming ``kind``
    (never priced as another kind)."""
    kind = data.get("kind", "plena")
    if kind not in CHIP_KINDS:
        raise PlenaInputError(
            "kind", f"chip profile kind must be one of {', '.join(CHIP_KINDS)} (got {echo(kind)})"
        )
    return kind


def load_chip(source: str | Path | Mapping[str, Any] | ChipProfile | None = None) -> Any:
    """Load a chip profile: a PLENA ``ChipProfile`` or a ``GpuChipProfile`` (``kind: gpu``).

    ``source``: None (built-in ``plena-default``), a built-in name, a path to a JSON file or a dict.
    PLENA files and dicts override any subset of their ``base`` built-in profile (default
    ``plena-default``): ``config``/``latency``/``instructions`` entries are merged key by key.
    A GPU profile (``"kind": "gpu"``) is complete on its own (``plena_opt.chip.gpu.profile``).
    Raises PlenaInputError (bad values), PlenaNotFoundError (unknown name).
    """
    from plena_opt.chip.gpu.profile import (
        GpuChipProfile,
        gpu_profile_names,
        load_gpu_chip,
        validate_gpu_profile,
    )

    if source is None:
        source = DEFAULT_CHIP
    if isinstance(source, ChipProfile | GpuChipProfile):
        return source
    if isinstance(source, Mapping):
        if _document_kind(source) == "gpu":
            return validate_gpu_profile(source)
        return _validate(_merge(source))
    if isinstance(source, str) and source in _builtin_names():
        return _builtin_profile(source)
    if isinstance(source, str) and source in gpu_profile_names():
        return load_gpu_chip(source)
    if isinstance(source, Path) or (
        isinstance(source, str) and (source.endswith(".json") or Path(source).is_file())
    ):
        data = _read_json(Path(source), "chip profile")
        data.setdefault("name", Path(source).stem)
        if _document_kind(data) == "gpu":
            return validate_gpu_profile(data)
        return _validate(_merge(data))
    if isinstance(source, str):
        return _validate(_builtin_dict(source))  # raises PlenaNotFoundError listing the names
    raise PlenaTypeError("chip", "chip must be a profile name, a JSON path or a dict")
