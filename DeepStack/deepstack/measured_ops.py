"""Measured all-gather, reduce-scatter and all-to-all tables of a NoC profile
(``measured_collectives``), the companions of ``measured_allreduce`` (``deepstack.measured``).

On a GPU node the all-reduce has its own table because NVLink SHARP (NVLS) reduces inside the
switch, which no link carries; the links are fitted on these three collectives
(``plena_opt.validate.calibrate_links``), but one link per node cannot follow NCCL's bus
bandwidth across sizes and group sizes (H100, 8 GPUs, 512 MiB: all-gather 335 GB/s,
reduce-scatter 336, all-to-all 315; 2 GPUs: 258, 249, 280). A profile may therefore ship their
own times measured inside one L1 switch; a group of a tabulated size whose ranks all sit on one
L1 switch is priced from them (same interpolation as the all-reduce tables), every other group
keeps the links.

Sizes are nccl-tests' ``size`` (bytes per device): the output an all-gather assembles, the input a
reduce-scatter splits (both ``nbytes`` of ``Network``), and for the all-to-all the whole send
buffer of one rank, ``bytes_per_pair · group`` (its own chunk included).

JSON (under the profile's top level)::

    "measured_collectives": {
      "source": "where the times were measured",
      "all_gather": [{"devices": 8, "bytes": [...], "microseconds": [...]}],
      "reduce_scatter": [...], "all_to_all": [...]
    }
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ProfileError, ProfileTypeError
from .measured import MAX_GROUPS, MeasuredTable, _parse_table

OPS = ("all_gather", "reduce_scatter", "all_to_all")


@dataclass(frozen=True)
class MeasuredCollectives:
    """Measured tables per collective (``OPS``; one table per group size) and their source."""

    source: str
    ops: tuple[tuple[str, tuple[MeasuredTable, ...]], ...]

    def table(self, op: str, devices: int) -> MeasuredTable | None:
        """The ``op`` table of groups of ``devices`` ranks, or None when not measured."""
        tables = dict(self.ops).get(op, ())
        return next((t for t in tables if t.devices == devices), None)

    def up_to(self, devices: int) -> MeasuredCollectives | None:
        """The tables of groups of at most ``devices`` ranks (None when none is left)."""
        kept = tuple((op, tuple(t for t in ts if t.devices <= devices)) for op, ts in self.ops)
        kept = tuple((op, ts) for op, ts in kept if ts)
        return MeasuredCollectives(self.source, kept) if kept else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        for op, tables in self.ops:
            out[op] = [t.to_dict() for t in tables]
        return out

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, **{op: [t.devices for t in ts] for op, ts in self.ops}}


def parse_measured_collectives(raw: Any, l1_kind: str, l1_ports: int) -> MeasuredCollectives:
    """Validate the ``measured_collectives`` object of a profile whose L1 level is given."""
    fld = "measured_collectives"
    if not isinstance(raw, dict):
        raise ProfileTypeError(fld, "measured_collectives must be a JSON object")
    unknown = sorted(k for k in raw if k not in ("source", *OPS))
    if "source" not in raw or unknown or not any(op in raw for op in OPS):
        raise ProfileError(
            fld,
            f"measured_collectives needs source and at least one of {', '.join(OPS)} "
            f"(unknown {unknown})",
        )
    if l1_kind != "switch":
        raise ProfileError(fld, "measured_collectives needs an L1 level of kind 'switch'")
    src = raw["source"]
    if not isinstance(src, str) or not src.strip():
        raise ProfileTypeError(f"{fld}.source", "source must be a non-empty string")
    ops = []
    for op in OPS:
        if op not in raw:
            continue
        groups, name = raw[op], f"{fld}.{op}"
        if not isinstance(groups, list) or not 1 <= len(groups) <= MAX_GROUPS:
            raise ProfileTypeError(name, f"{op} must be a list of 1 to {MAX_GROUPS} groups")
        tables = tuple(_parse_table(g, f"{name}[{i}]", l1_ports) for i, g in enumerate(groups))
        if len({t.devices for t in tables}) != len(tables):
            raise ProfileError(name, "each group size (devices) may appear only once")
        ops.append((op, tables))
    return MeasuredCollectives(src, tuple(ops))
