"""Memory profile JSON (schema_version 1) and the loader (analytic-model §3.2).

A profile is a ``stacked_dram`` or a ``fixed_bandwidth`` memory in SI units. Unknown keys are
rejected, JSON booleans are not numbers, and loading a file stamps ``provenance.profile_path``
and ``provenance.profile_sha256`` (SHA-256 of the raw bytes). Built-in profiles ship in
``plena_opt/memory/profiles/``; ``unbounded`` is the 1e30 B/s memory of §3.4.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ValidationError

import plena_opt.jsonio as jsonio
from plena_opt.errors import PlenaInputError, PlenaNotFoundError, PlenaTypeError, echo, name_list
from plena_opt.memory._validation import Name, PositiveInt, PositiveNumber, StrictModel, input_error
from plena_opt.memory.config import (
    BufferingPolicy,
    DramEnergyConfig,
    StackedDramConfig,
    ThermalPolicy,
)
from plena_opt.memory.fixed_bandwidth import FixedBandwidthMemory, unbounded
from plena_opt.memory.stacked_dram import StackedDramModel

SCHEMA_VERSION = 1
MEMORY_KINDS = ("stacked_dram", "fixed_bandwidth")
UNBOUNDED_NAME = "unbounded"
_PACKAGE = "plena_opt.memory.profiles"

MemoryProfile = StackedDramModel | FixedBandwidthMemory


class _Header(StrictModel):
    section: ClassVar[str] = ""

    schema_version: int
    name: Name
    provenance: dict[str, Any] | None = None


class StackedDramProfile(_Header):
    """The ``stacked_dram`` profile: ``dram`` plus optional ``buffering``/``thermal``/``energy``."""

    kind: Literal["stacked_dram"]
    dram: StackedDramConfig
    buffering: BufferingPolicy | None = None
    thermal: ThermalPolicy | None = None
    energy: DramEnergyConfig | None = None


class FixedBandwidthProfile(_Header):
    """The ``fixed_bandwidth`` profile (B/s, bytes; ``capacity_bytes`` required, may be null)."""

    kind: Literal["fixed_bandwidth"]
    bandwidth_bytes_per_s: PositiveNumber
    capacity_bytes: PositiveInt | None
    transaction_bytes: PositiveInt | None = None
    energy: DramEnergyConfig | None = None


def _check_header(data: Mapping[str, Any]) -> str:
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise PlenaInputError("schema_version", "schema_version is required (must be 1)")
    if isinstance(version, bool) or version != SCHEMA_VERSION or not isinstance(version, int):
        raise PlenaInputError(
            "schema_version",
            f"schema_version must be {SCHEMA_VERSION} (got {version!r}): unsupported version",
        )
    kind = data.get("kind")
    if kind not in MEMORY_KINDS:
        raise PlenaInputError(
            "kind", f"kind must be one of {', '.join(MEMORY_KINDS)} (got {kind!r})"
        )
    provenance = data.get("provenance")
    if provenance is not None and not isinstance(provenance, Mapping):
        raise PlenaTypeError("provenance", "provenance must be a JSON object")
    return kind


def memory_from_dict(data: Mapping[str, Any]) -> MemoryProfile:
    """Build a memory from a parsed profile dict (no provenance stamping)."""
    if not isinstance(data, Mapping):
        raise PlenaTypeError("profile", "a memory profile must be a JSON object")
    kind = _check_header(data)
    try:
        if kind == "stacked_dram":
            profile = StackedDramProfile.model_validate(dict(data))
        else:
            fixed = FixedBandwidthProfile.model_validate(dict(data))
    except ValidationError as exc:
        raise input_error(exc) from None
    if kind == "stacked_dram":
        return StackedDramModel(
            profile.name,
            profile.dram,
            profile.buffering,
            profile.thermal,
            profile.energy,
            profile.provenance or {},
        )
    return FixedBandwidthMemory(
        fixed.bandwidth_bytes_per_s,
        fixed.capacity_bytes,
        fixed.transaction_bytes,
        fixed.energy,
        name=fixed.name,
        provenance=fixed.provenance or {},
    )


def _stamped(memory: MemoryProfile, raw: bytes, path: str) -> MemoryProfile:
    provenance = dict(memory.provenance)
    provenance["profile_path"] = path
    provenance["profile_sha256"] = hashlib.sha256(raw).hexdigest()
    if isinstance(memory, StackedDramModel):
        return StackedDramModel(
            memory.name, memory.config, memory.buffering, memory.thermal, memory.energy, provenance
        )
    return FixedBandwidthMemory(
        memory.bandwidth_bytes_per_s,
        memory.capacity_bytes,
        memory.transaction_bytes,
        memory.energy,
        name=memory.name,
        provenance=provenance,
    )


def _from_bytes(raw: bytes, path: str) -> MemoryProfile:
    data = jsonio.load_document(raw, "profile", f"memory profile {path}")
    return _stamped(memory_from_dict(data), raw, path)


def load_memory_profile(path: str | Path) -> MemoryProfile:
    """Load a profile file; ``provenance.profile_path`` is ``str(path)`` as given."""
    profile_path = Path(path)
    try:
        raw = profile_path.read_bytes()
    except FileNotFoundError:
        raise PlenaInputError("profile", f"memory profile file not found: {path}") from None
    except OSError as exc:
        raise PlenaInputError("profile", f"cannot read memory profile {path}: {exc}") from None
    return _from_bytes(raw, str(path))


@cache
def _builtin_files() -> dict[str, str]:
    """Built-in profile name (and file stem) -> file name in the package."""
    names: dict[str, str] = {}
    for entry in resources.files(_PACKAGE).iterdir():
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_bytes())
            names[data["name"]] = entry.name
            names.setdefault(entry.name.removesuffix(".json"), entry.name)
    return names


def list_memory_profiles() -> list[str]:
    """Names of the built-in memories: the shipped profiles and ``unbounded``."""
    files = _builtin_files()
    shipped = {name for name, file in files.items() if name != file.removesuffix(".json")}
    return sorted(shipped | {UNBOUNDED_NAME})


@cache
def _load_builtin(name: str) -> MemoryProfile:
    """Built-in memories are immutable, so one instance per name is shared."""
    if name == UNBOUNDED_NAME:
        return unbounded()
    file = _builtin_files()[name]
    raw = resources.files(_PACKAGE).joinpath(file).read_bytes()
    return _from_bytes(raw, f"plena_opt/memory/profiles/{file}")


def load_memory(source: str | Path | Mapping[str, Any]) -> MemoryProfile:
    """A memory from a built-in name, a JSON profile path or a profile dict.

    Names are those of :func:`list_memory_profiles` (the file stem also works); a built-in
    profile's ``profile_path`` is its package-relative path. Unknown names raise
    :class:`PlenaNotFoundError` listing the built-in ones.
    """
    if isinstance(source, Mapping):
        return memory_from_dict(source)
    if isinstance(source, Path):
        return load_memory_profile(source)
    if not isinstance(source, str):
        raise PlenaTypeError(
            "memory", f"memory must be a profile name, path or dict (got {type(source).__name__})"
        )
    if source == UNBOUNDED_NAME or source in _builtin_files():
        return _load_builtin(source)
    if Path(source).is_file() or source.endswith(".json") or "/" in source:
        return load_memory_profile(source)
    raise PlenaNotFoundError(
        "memory",
        f"unknown memory profile {echo(source)}; built-in profiles: "
        + name_list(list_memory_profiles())
        + " (or give a path to a profile JSON)",
    )
