"""Plan data model: ops, components and immutable per-rank orders (pipeline-simulator §5)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

from plena_opt.errors import PlenaInputError


class OpKind(StrEnum):
    """Operation kinds: training F/B/I/W, inference P (prefill) / D (decode step), COMM (p2p)."""

    F = "F"
    B = "B"
    I = "I"  # noqa: E741 - the spec's name for the input-gradient backward
    W = "W"
    P = "P"
    D = "D"
    COMM = "COMM"


class Component(StrEnum):
    """Model part an op belongs to: the LLM, the vision encoder (VE) or the generator (GEN)."""

    LLM = "LLM"
    VE = "VE"
    GEN = "GEN"


def chunk_letter(chunk: int) -> str:
    """Chunk 0 → ``a``, 1 → ``b``, … (spec §4.3: letters keep Perfetto colours apart)."""
    return chr(ord("a") + chunk) if chunk < 26 else f"z{chunk}"


@dataclass(frozen=True, slots=True)
class Op:
    """One scheduled op; ``op_type`` keys the duration inputs, ``label`` is the scheduler's."""

    id: int
    kind: OpKind
    rank: int
    microbatch: int
    chunk: int = 0
    component: Component = Component.LLM
    step: int = -1
    op_type: str = ""
    label: str = ""
    lane: str = "compute"
    code: str = ""

    def unit(self, pp_size: int) -> int:
        """BigMac unit of the op's micro-batch (``mb // pp_size``)."""
        return self.microbatch // pp_size

    @property
    def trace_name(self) -> str:
        """Perfetto-unique name ``rank{r}/{op}/chunk_{x}/mb{i}`` (+ ``/step{t}``), spec §0.2."""
        name = f"rank{self.rank}/{self.code}/chunk_{chunk_letter(self.chunk)}/mb{self.microbatch}"
        if self.step >= 0:
            name += f"/step{self.step}"
        return name


@dataclass(frozen=True)
class PipelinePlan:
    """A legal plan: ops plus the immutable op order of every rank (tuples of op ids)."""

    schedule_name: str
    pp_size: int
    vpp_size: int
    microbatches: int
    ops: tuple[Op, ...]
    ranks: tuple[tuple[int, ...], ...]
    meta: tuple[tuple[str, str], ...] = field(default=())

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def op_types(self) -> list[str]:
        """Distinct duration keys used by this plan, in first-use order."""
        return list(dict.fromkeys(op.op_type for op in self.ops))

    def fingerprint(self) -> str:
        """SHA-256 of the plan's full content (tests compare it before/after a simulation)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()


class PlanBuilder:
    """Appends ops to per-rank lists and freezes them into a :class:`PipelinePlan`."""

    def __init__(self, pp_size: int) -> None:
        self.ops: list[Op] = []
        self.ranks: list[list[int]] = [[] for _ in range(pp_size)]

    def add(self, rank: int, kind: OpKind, mb: int, **kw: object) -> Op:
        op = make_op(len(self.ops), rank, kind, mb, **kw)
        self.ops.append(op)
        self.ranks[rank].append(op.id)
        return op

    def build(
        self, name: str, pp: int, vpp: int, m: int, meta: dict[str, str] | None = None
    ) -> PipelinePlan:
        return PipelinePlan(
            schedule_name=name,
            pp_size=pp,
            vpp_size=vpp,
            microbatches=m,
            ops=tuple(self.ops),
            ranks=tuple(tuple(r) for r in self.ranks),
            meta=tuple(sorted((meta or {}).items())),
        )


_COMPONENT_PREFIX = {Component.LLM: "", Component.VE: "V", Component.GEN: "G"}


def make_op(
    op_id: int,
    rank: int,
    kind: OpKind,
    mb: int,
    chunk: int = 0,
    component: Component = Component.LLM,
    step: int = -1,
    op_type: str | None = None,
    code: str | None = None,
) -> Op:
    """Build an op with its default duration key, trace code and scheduler label.

    Labels follow the spec's ``F3-C0`` form (kind, micro-batch, chunk); VE/GEN ops are prefixed
    ``V``/``G`` (``VF3``), decode steps carry ``-T{step}``.
    """
    prefix = _COMPONENT_PREFIX[component]
    default_type = prefix + kind.value
    code = code or default_type
    if kind in (OpKind.P, OpKind.D, OpKind.COMM):
        label = f"{code}{mb}-S{rank}" + (f"-T{step}" if step >= 0 else "")
        if kind is OpKind.P and chunk:
            label += f"-K{chunk}"
    elif component is Component.LLM:
        label = f"{kind.value}{mb}-C{chunk}"
    else:
        label = f"{prefix}{kind.value}{mb}"
    return Op(
        id=op_id,
        kind=kind,
        rank=rank,
        microbatch=mb,
        chunk=chunk,
        component=component,
        step=step,
        op_type=op_type or default_type,
        label=label,
        lane="comm" if kind is OpKind.COMM else "compute",
        code=code,
    )


def check_positive_int(field_name: str, value: int, minimum: int = 1) -> None:
    """Raise :class:`PlenaInputError` unless ``value`` is an int ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlenaInputError(field_name, f"{field_name} must be an integer >= {minimum}")
