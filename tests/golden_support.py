"""Build plena-opt inputs from the golden files' stored definitions and compare outputs.

Tolerance: relative 1e-9, the golden README's replay tolerance (the reference itself checks parity
at 1e-12; 1e-9 leaves room for summation order in our vectorised decode).
"""

from __future__ import annotations

import math

from deepstack import load_noc_profile

from plena_opt.memory import FixedBandwidthMemory, load_memory
from plena_opt.models import ModelSpec

REL = 1e-9


def golden_memory(defn: dict):
    if defn["kind"] == "fixed_bandwidth":
        return FixedBandwidthMemory(
            defn["bandwidth_bytes_per_s"], defn["capacity_bytes"], name=defn["name"]
        )
    return load_memory(defn["profile"])


def golden_noc(defn: dict):
    return load_noc_profile(defn["profile"])


def golden_model(name: str, cfg: dict) -> ModelSpec:
    return ModelSpec.from_hf_config(cfg, name)


def diff(expected, actual, path: str = "", skip: tuple[str, ...] = ("provenance",)) -> list[str]:
    """Every difference between two JSON-like values (floats to ``REL``), as readable lines."""
    out: list[str] = []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected dict, got {type(actual).__name__}"]
        for k in expected:
            if k in skip:
                continue
            if k not in actual:
                out.append(f"{path}.{k}: missing")
                continue
            out += diff(expected[k], actual[k], f"{path}.{k}", skip)
        for k in actual:
            if k not in expected and k not in skip:
                out.append(f"{path}.{k}: unexpected key")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out += diff(e, a, f"{path}[{i}]", skip)
        return out
    if (
        isinstance(expected, float)
        and isinstance(actual, int | float)
        and not isinstance(actual, bool)
    ):
        if not math.isclose(expected, actual, rel_tol=REL, abs_tol=0.0):
            if not (expected == 0 and abs(actual) < 1e-300):
                out.append(f"{path}: expected {expected!r}, got {actual!r}")
        return out
    if (
        expected != actual
        or type(expected) is not type(actual)
        and not (isinstance(expected, int | float) and isinstance(actual, int | float))
    ):
        out.append(f"{path}: expected {expected!r}, got {actual!r}")
    return out
