"""Bytes per element of the tensors kept in HBM (analytic-model §1.1 PRECISION, §3.3).

Element bits: ``Fp`` = sign + exponent + mantissa; ``Int`` = width; ``Mx`` = ELEM bits + SCALE
bits / block; ``Plain`` = DATA_TYPE bits. Bytes = bits / 8. The default (MXFP8: e4m3 elements
sharing one e8m0 scale per block of 8) is 9 bits = 1.125 bytes for all four tensors.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from plena_opt.errors import PlenaInputError, PlenaTypeError

# [ANALYTIC.PRECISION] keys feeding each HbmStoragePrecision field (§3.3).
PRECISION_KEYS = {
    "weight_bytes": "HBM_M_WEIGHT_TYPE",
    "kv_read_bytes": "HBM_M_KV_TYPE",
    "kv_write_bytes": "HBM_V_KV_TYPE",
    "activation_bytes": "HBM_V_ACT_TYPE",
}

MXFP8 = {
    "format": "Mx",
    "block": 8,
    "ELEM": {"type": "Fp", "sign": True, "exponent": 4, "mantissa": 3},
    "SCALE": {"type": "Fp", "sign": False, "exponent": 8, "mantissa": 0},
}


def _count(spec: Mapping[str, Any], key: str, where: str, *, minimum: int) -> int:
    field = f"{where}.{key}"
    if key not in spec:
        raise PlenaInputError(field, f"{field} is required")
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlenaTypeError(field, f"{field} must be an integer (got {value!r})")
    if value < minimum:
        raise PlenaInputError(field, f"{field} must be ≥ {minimum} (got {value})")
    return value


def _scalar_bits(spec: Mapping[str, Any], where: str) -> int:
    if not isinstance(spec, Mapping):
        raise PlenaTypeError(where, f"{where} must be a table")
    kind = spec.get("type")
    if kind == "Fp":
        sign = spec.get("sign")
        if not isinstance(sign, bool):
            raise PlenaTypeError(f"{where}.sign", f"{where}.sign must be true or false")
        exponent = _count(spec, "exponent", where, minimum=0)
        return int(sign) + exponent + _count(spec, "mantissa", where, minimum=0)
    if kind == "Int":
        return _count(spec, "width", where, minimum=1)
    raise PlenaInputError(f"{where}.type", f"{where}.type must be Fp or Int (got {kind!r})")


def element_bits(spec: Mapping[str, Any], where: str = "precision") -> float:
    """Stored bits per element of one ``[*.PRECISION.*]`` table (``Mx``, ``Plain`` or a scalar)."""
    if not isinstance(spec, Mapping):
        raise PlenaTypeError(where, f"{where} must be a table")
    fmt = spec.get("format")
    if fmt == "Mx":
        block = _count(spec, "block", where, minimum=1)
        elem = _scalar_bits(spec.get("ELEM"), f"{where}.ELEM")
        return elem + _scalar_bits(spec.get("SCALE"), f"{where}.SCALE") / block
    if fmt == "Plain":
        return _scalar_bits(spec.get("DATA_TYPE"), f"{where}.DATA_TYPE")
    if fmt is None and "type" in spec:
        return _scalar_bits(spec, where)
    raise PlenaInputError(f"{where}.format", f"{where}.format must be Mx or Plain (got {fmt!r})")


@dataclass(frozen=True, slots=True)
class HbmStoragePrecision:
    """Bytes per element stored in HBM: weights, KV reads, KV writes, activations."""

    weight_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    activation_bytes: float

    def __post_init__(self) -> None:
        for name in PRECISION_KEYS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise PlenaTypeError(name, f"{name} must be a number (got {value!r})")
            if not math.isfinite(value) or value <= 0:
                raise PlenaInputError(name, f"{name} must be a finite number > 0 (got {value!r})")

    @classmethod
    def default(cls) -> HbmStoragePrecision:
        """MXFP8 (1.125 bytes) for every tensor, the shipped ``[ANALYTIC.PRECISION]``."""
        nbytes = element_bits(MXFP8, "MXFP8") / 8.0
        return cls(nbytes, nbytes, nbytes, nbytes)

    @classmethod
    def from_precision_tables(
        cls, tables: Mapping[str, Any], where: str = "ANALYTIC.PRECISION"
    ) -> HbmStoragePrecision:
        """From the ``[ANALYTIC.PRECISION]`` tables (HBM_M_WEIGHT_TYPE, … as parsed TOML)."""
        if not isinstance(tables, Mapping):
            raise PlenaTypeError(where, f"{where} must be a table")
        values: dict[str, float] = {}
        for name, key in PRECISION_KEYS.items():
            if key not in tables:
                raise PlenaInputError(f"{where}.{key}", f"{where}.{key} is required")
            values[name] = element_bits(tables[key], f"{where}.{key}") / 8.0
        return cls(**values)

    @classmethod
    def from_settings(cls, path: str | Path, section: str = "ANALYTIC") -> HbmStoragePrecision:
        """From a ``plena_settings.toml`` file's ``[<section>.PRECISION]`` tables."""
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise PlenaInputError("settings", f"cannot read settings {path}: {exc}") from None
        tables = data.get(section, {}).get("PRECISION")
        if tables is None:
            raise PlenaInputError(f"{section}.PRECISION", f"{path} has no [{section}.PRECISION]")
        return cls.from_precision_tables(tables, f"{section}.PRECISION")

    def to_dict(self) -> dict[str, float]:
        """The golden ``precision`` dict (bytes per element)."""
        return asdict(self)
