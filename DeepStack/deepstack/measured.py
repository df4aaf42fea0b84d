"""Measured all-reduce tables carried by a NoC profile (``measured_allreduce``).

A GPU node profile may ship the all-reduce times measured inside one L1 switch (one NVLink /
xGMI node) for some group sizes. ``Network.all_reduce`` prices a group from the table when the
group's size is tabulated and all its ranks sit on one L1 switch; every other group keeps the
profile's fitted links and deepstack's algorithms.

Between measured sizes the time is interpolated linearly in log(bytes)–log(seconds); below the
smallest size it is the smallest size's time (the latency floor); above the largest it grows in
proportion to the bytes from the largest size (the bandwidth regime).

``MeasuredAllReduce.lower_envelope()`` is the same tables with each time replaced by the least
time measured at that size or any larger one: the all-reduce of an engine that runs a message
as a larger one (padded) whenever that is faster, so that time never falls as the message grows.

JSON (under the profile's top level)::

    "measured_allreduce": {
      "source": "where the times were measured",
      "groups": [{"devices": 8, "bytes": [256, 512, ...], "microseconds": [7.5, 7.4, ...]}]
    }
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ProfileError, ProfileTypeError

MAX_GROUPS = 16
ENVELOPE_NOTE = "each time the least measured at that size or a larger one (lower envelope)"
MAX_POINTS = 256
_KEYS = ("source", "groups")
_GROUP_KEYS = ("devices", "bytes", "microseconds")
# Plausible ranges (bounds of what a table is meant for, not measured values).
BYTES_RANGE = (1.0, 1e15)
MICROSECONDS_RANGE = (1e-3, 1e9)


@dataclass(frozen=True)
class MeasuredTable:
    """All-reduce seconds of one group size at increasing message sizes (bytes per device)."""

    devices: int
    nbytes: tuple[float, ...]
    seconds: tuple[float, ...]

    def seconds_at(self, nbytes: float) -> float:
        """Interpolated time (s) of an all-reduce of ``nbytes`` per device (module docstring)."""
        x = np.log(np.asarray(self.nbytes))
        y = np.log(np.asarray(self.seconds))
        if nbytes <= self.nbytes[0]:
            return self.seconds[0]
        if nbytes >= self.nbytes[-1]:
            return self.seconds[-1] * nbytes / self.nbytes[-1]
        return float(np.exp(np.interp(math.log(nbytes), x, y)))

    def lower_envelope(self) -> MeasuredTable:
        """This table with each time the least measured at that size or a larger one."""
        least = tuple(itertools.accumulate(reversed(self.seconds), min))[::-1]
        return MeasuredTable(self.devices, self.nbytes, least)

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": self.devices,
            "bytes": [_int_if_whole(b) for b in self.nbytes],
            "microseconds": [float(f"{s * 1e6:.12g}") for s in self.seconds],
        }


@dataclass(frozen=True)
class MeasuredAllReduce:
    """Measured all-reduce tables (one per group size) and where they were measured."""

    source: str
    tables: tuple[MeasuredTable, ...]

    def table(self, devices: int) -> MeasuredTable | None:
        """The table of groups of ``devices`` ranks, or None when that size was not measured."""
        return next((t for t in self.tables if t.devices == devices), None)

    def up_to(self, devices: int) -> MeasuredAllReduce | None:
        """The tables of groups of at most ``devices`` ranks (None when none is left)."""
        kept = tuple(t for t in self.tables if t.devices <= devices)
        return MeasuredAllReduce(self.source, kept) if kept else None

    def lower_envelope(self) -> MeasuredAllReduce:
        """Every table's lower envelope from above (module docstring); the source says so."""
        tables = tuple(t.lower_envelope() for t in self.tables)
        return MeasuredAllReduce(f"{self.source}; {ENVELOPE_NOTE}", tables)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "groups": [t.to_dict() for t in self.tables]}


def _int_if_whole(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _numbers(raw: Any, fld: str, bounds: tuple[float, float]) -> tuple[float, ...]:
    if not isinstance(raw, list) or not 2 <= len(raw) <= MAX_POINTS:
        raise ProfileTypeError(fld, f"{fld.rsplit('.', 1)[-1]} must be a list of 2 to "
                               f"{MAX_POINTS} numbers")  # fmt: skip
    out = []
    lo, hi = bounds
    for v in raw:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ProfileTypeError(fld, f"{fld.rsplit('.', 1)[-1]} must hold finite numbers")
        if not lo <= v <= hi:
            raise ProfileError(fld, f"{fld.rsplit('.', 1)[-1]} values must be between {lo:g} "
                               f"and {hi:g} (got {v:g})")  # fmt: skip
        out.append(float(v))
    return tuple(out)


def _parse_table(raw: Any, fld: str, max_devices: int) -> MeasuredTable:
    if not isinstance(raw, dict):
        raise ProfileTypeError(fld, "a measured group must be a JSON object")
    missing = [k for k in _GROUP_KEYS if k not in raw]
    unknown = sorted(k for k in raw if k not in _GROUP_KEYS)
    if missing or unknown:
        raise ProfileError(fld, f"measured group: missing {missing}, unknown {unknown}")
    dev = raw["devices"]
    if isinstance(dev, bool) or not isinstance(dev, int) or not 2 <= dev <= max_devices:
        raise ProfileError(
            f"{fld}.devices",
            f"devices must be an integer from 2 to the {max_devices} ports of the L1 switch",
        )
    nb = _numbers(raw["bytes"], f"{fld}.bytes", BYTES_RANGE)
    us = _numbers(raw["microseconds"], f"{fld}.microseconds", MICROSECONDS_RANGE)
    if len(nb) != len(us):
        raise ProfileError(f"{fld}.microseconds", "bytes and microseconds must have equal length")
    if any(b <= a for a, b in zip(nb, nb[1:], strict=False)):
        raise ProfileError(f"{fld}.bytes", "bytes must be strictly increasing")
    return MeasuredTable(dev, nb, tuple(u * 1e-6 for u in us))


def parse_measured_allreduce(raw: Any, l1_kind: str, l1_ports: int) -> MeasuredAllReduce:
    """Validate the ``measured_allreduce`` object of a profile whose L1 level is given."""
    fld = "measured_allreduce"
    if not isinstance(raw, dict):
        raise ProfileTypeError(fld, "measured_allreduce must be a JSON object")
    missing = [k for k in _KEYS if k not in raw]
    unknown = sorted(k for k in raw if k not in _KEYS)
    if missing or unknown:
        raise ProfileError(fld, f"measured_allreduce: missing {missing}, unknown {unknown}")
    if l1_kind != "switch":
        raise ProfileError(fld, "measured_allreduce needs an L1 level of kind 'switch'")
    src = raw["source"]
    if not isinstance(src, str) or not src.strip():
        raise ProfileTypeError(f"{fld}.source", "source must be a non-empty string")
    groups = raw["groups"]
    if not isinstance(groups, list) or not 1 <= len(groups) <= MAX_GROUPS:
        raise ProfileTypeError(f"{fld}.groups", f"groups must be a list of 1 to {MAX_GROUPS}")
    tables = tuple(_parse_table(g, f"{fld}.groups[{i}]", l1_ports) for i, g in enumerate(groups))
    if len({t.devices for t in tables}) != len(tables):
        raise ProfileError(f"{fld}.groups", "each group size (devices) may appear only once")
    return MeasuredAllReduce(src, tables)
