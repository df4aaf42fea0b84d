"""Design space files (issue 17): hardware knobs searched together with the parallelism plan.

A design space (JSON or TOML, validated here; schema in ``design_spaces/README.md``) lists
*knobs*, each pointing at one number of the problem:

* ``problem.<field>`` — a ``ProblemSpec`` field: ``total_layers``, ``connected_layers``,
  ``devices``, ``frequency_hz``, ``fixed_bandwidth_gbs``, ``fixed_capacity_gib``;
* ``memory.<path>``, ``noc.<path>``, ``chip.<path>`` — a number inside the problem's memory,
  NoC or chip profile document (dot-separated keys, list items by index, e.g.
  ``noc.layers.L1.link_bandwidth_gbytes_per_s``, ``noc.layers.L2.shape.1`` (devices per level),
  ``memory.dram.memory_frequency_hz``, ``chip.config.MLEN``); the path must exist in the
  profile (a knob never invents a field), and the edited document is passed inline.

Each knob takes ``values`` (a list) or a ``range`` (``start``, ``stop`` inclusive, ``step``), and
an optional ``cost_per_unit``: a point's ``cost`` is the sum of value × cost_per_unit over knobs
(units are the file's own, e.g. $ or mm²; the file says which in ``cost_unit``).
"""

from __future__ import annotations

import copy
import itertools
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import plena_opt.jsonio as jsonio
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.problem import InlineDocument, ProblemSpec

PROBLEM_KNOBS = (
    "total_layers",
    "connected_layers",
    "devices",
    "frequency_hz",
    "fixed_bandwidth_gbs",
    "fixed_capacity_gib",
)
DOCUMENT_KINDS = {  # knob prefix → package of the shipped profiles of that kind
    "memory": "plena_opt.memory.profiles",
    "noc": "deepstack.profiles",
    "chip": "plena_opt.chip.profiles",
}
MAX_POINTS = 100_000  # hardware points one design space may hold
MAX_KNOBS = 16
SHIPPED = "plena_opt.search.codesign.design_spaces"


class Range(BaseModel):
    """``start``, ``start + step``, … up to ``stop`` (inclusive)."""

    model_config = ConfigDict(extra="forbid")
    start: float
    stop: float
    step: float = Field(gt=0)

    def values(self) -> list[float]:
        n = int((self.stop - self.start) / self.step + 1e-9) + 1
        if n < 1:
            raise ValueError("range: stop must be at least start")
        return [self.start + i * self.step for i in range(n)]


class Knob(BaseModel):
    """One hardware knob: where it points, the values it takes, what a unit costs."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    target: str
    values: list[float] | None = Field(default=None, min_length=1, max_length=1000)
    range: Range | None = None
    cost_per_unit: float = 0.0
    description: str = ""

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        kind, _, rest = v.partition(".")
        if kind == "problem" and rest in PROBLEM_KNOBS:
            return v
        if kind in DOCUMENT_KINDS and rest:
            return v
        raise ValueError(
            f"unknown target {v!r}: use problem.<{'|'.join(PROBLEM_KNOBS)}> or "
            "memory.<path>, noc.<path>, chip.<path> into the profile document"
        )

    @model_validator(mode="after")
    def _one_source(self) -> Knob:
        if (self.values is None) == (self.range is None):
            raise ValueError(f"knob {self.name!r}: give exactly one of values or range")
        return self

    def grid(self) -> list[float | int]:
        vals = self.values if self.values is not None else self.range.values()  # type: ignore[union-attr]
        return [int(v) if float(v).is_integer() else v for v in vals]


class DesignSpace(BaseModel):
    """A set of knobs; its hardware points are every combination of their values."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    description: str = ""
    cost_unit: str = "cost"
    knobs: list[Knob] = Field(min_length=1, max_length=MAX_KNOBS)

    @model_validator(mode="after")
    def _check(self) -> DesignSpace:
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise ValueError("knob names must not repeat")
        if len({k.target for k in self.knobs}) != len(self.knobs):
            raise ValueError("two knobs point at the same target")
        if self.size() > MAX_POINTS:
            raise ValueError(f"{self.size()} hardware points; at most {MAX_POINTS}")
        return self

    def size(self) -> int:
        n = 1
        for k in self.knobs:
            n *= len(k.grid())
        return n

    def points(self) -> list[dict[str, float | int]]:
        """Every hardware point, ``{knob name: value}``, in a fixed order."""
        names = [k.name for k in self.knobs]
        return [
            dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(k.grid() for k in self.knobs))
        ]

    def cost(self, point: dict[str, float | int]) -> float:
        return float(sum(point[k.name] * k.cost_per_unit for k in self.knobs))

    @property
    def has_cost(self) -> bool:
        return any(k.cost_per_unit for k in self.knobs)

    def apply(self, base: ProblemSpec, point: dict[str, float | int]) -> ProblemSpec:
        """``base`` with the point's knob values set (profile documents edited inline)."""
        update: dict[str, Any] = {}
        docs: dict[str, dict] = {}
        for k in self.knobs:
            kind, _, path = k.target.partition(".")
            if kind == "problem":
                update[path] = point[k.name]
                continue
            if kind not in docs:
                docs[kind] = _document(kind, getattr(base, kind), k.name)
            _set_path(docs[kind], path.split("."), point[k.name], k)
        for kind, doc in docs.items():
            update[kind] = InlineDocument(document=doc, name=str(doc.get("name", kind)))
        try:
            return ProblemSpec.model_validate({**base.model_dump(), **update})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise PlenaInputError(
                "design_space", f"hardware point {point}: {first['loc']}: {first['msg']}"
            ) from None


def _document(kind: str, source: Any, knob: str) -> dict:
    if isinstance(source, InlineDocument):
        return copy.deepcopy(source.document)
    if source is None:
        source = "plena-default" if kind == "chip" else None
    if source is None:
        raise PlenaInputError("design_space", f"knob {knob!r}: the problem has no {kind} profile")
    path = Path(str(source))
    what = f"knob {knob!r}: {kind} profile {str(source)!r}"
    if path.is_file():
        return jsonio.load_document(path.read_bytes(), "design_space", what)
    folder = resources.files(DOCUMENT_KINDS[kind])
    for name in (f"{source}.json", f"{str(source).replace('-', '_')}.json"):
        if folder.joinpath(name).is_file():
            return jsonio.load_document(folder.joinpath(name).read_bytes(), "design_space", what)
    raise PlenaInputError(
        "design_space",
        f"knob {knob!r}: {kind} profile {source!r} is not a JSON file or a shipped profile "
        "document (Python-built presets cannot be edited by a knob; pass a JSON file)",
    )


def _set_path(doc: dict, keys: list[str], value: float | int, knob: Knob) -> None:
    node: Any = doc
    for i, name in enumerate(keys):
        key: Any = name
        if isinstance(node, list) and name.isdigit() and int(name) < len(node):
            key = int(name)
        elif not isinstance(node, dict) or key not in node:
            raise PlenaInputError(
                "design_space",
                f"knob {knob.name!r}: target {knob.target!r} has no field "
                f"{'.'.join(keys[: i + 1])!r} in the profile (a knob never adds a field)",
            )
        if i == len(keys) - 1:
            if isinstance(node[key], bool) or not isinstance(node[key], int | float):
                raise PlenaInputError(
                    "design_space", f"knob {knob.name!r}: {knob.target!r} is not a number"
                )
            node[key] = value
        node = node[key]


def shipped_design_spaces() -> list[str]:
    folder = resources.files(SHIPPED)
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def _parse(data: bytes, toml: bool, what: str) -> Any:
    """A design-space document (JSON or TOML); not UTF-8, malformed or too deep: input error."""
    if not toml:
        return jsonio.load_document(data, "design_space", what)
    too_deep = f"{what} is nested deeper than {jsonio.MAX_NESTING} levels"
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PlenaInputError("design_space", f"{what} is not UTF-8 text") from None
    except RecursionError:
        raise PlenaInputError("design_space", too_deep) from None
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise PlenaInputError("design_space", f"{what}: {exc}") from None
    if jsonio.nesting_depth_exceeds(doc):
        raise PlenaInputError("design_space", too_deep)
    return doc


def load_design_space(source: str) -> DesignSpace:
    """A design space from a ``.json``/``.toml`` file or a shipped name; errors name the field."""
    path = Path(source)
    if path.is_file():
        text, toml = path.read_bytes(), path.suffix.lower() == ".toml"
    elif source in shipped_design_spaces():
        text, toml = resources.files(SHIPPED).joinpath(f"{source}.json").read_bytes(), False
    else:
        raise PlenaInputError(
            "design_space",
            f"--design-space {source!r} is not a file or a shipped design space "
            f"({', '.join(shipped_design_spaces())})",
        )
    data = _parse(text, toml, f"--design-space {source}")
    try:
        return DesignSpace.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = f"--design-space {source}: {where}: {e['msg']}"
        raise PlenaInputError("design_space", msg) from None
