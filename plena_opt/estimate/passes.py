"""One pipelined pass over every stage (prefill, or the decode at its evaluation points).

Stage times are linear in the per-kind layer costs, so a ``PassResult`` keeps the components
(one priced layer of each kind, kind counts per stage, extras per stage) and combines them on
demand; stages with equal counts are one row (analytic-model §4.6).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from plena_opt.estimate.cached import cached
from plena_opt.estimate.comm import Cost
from plena_opt.estimate.decode.checks import failed_pieces
from plena_opt.estimate.decode.plan_checks import plan_checks_hold
from plena_opt.estimate.decode.steps import DecodeGrid
from plena_opt.estimate.layer import LayerKind
from plena_opt.estimate.memo import StageLayouts
from plena_opt.estimate.point_pass import point_latency, point_values
from plena_opt.estimate.pricing import ONE_STEP, StageArrays, StepWeights


def weighted_sum(weights: Sequence[float], arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Σ wᵢ·aᵢ over a few equal-length arrays (faster than a matrix product for few rows)."""
    total = None
    for w, a in zip(weights, arrays, strict=True):
        if w:
            total = a * w if total is None else total + a * w
    return np.zeros(len(arrays[0])) if total is None else total


class StageGroups(NamedTuple):
    """Stages grouped by (layer counts by kind, own extras): stages of one group take the same
    time, so each group's row is computed once."""

    distinct: list[tuple[tuple[int, ...], int]]  # per group: layers of each kind, stage with
    # extras (or -1 for none)
    index: np.ndarray  # each stage's group
    mult: np.ndarray  # each group's number of stages (floats)
    mult_floats: list[float]  # ``mult`` as Python floats (no array call per use)


def stage_groups(
    counts: list[Counter], kinds: list[LayerKind], extras: dict[int, list]
) -> StageGroups:
    """The ``StageGroups`` of stages with layer ``counts`` and ``extras`` (by stage)."""
    keys: dict[tuple, int] = {}
    index = []
    for i, c in enumerate(counts):
        key = (tuple(c.get(k, 0) for k in kinds), i if i in extras else -1)
        index.append(keys.setdefault(key, len(keys)))
    idx = np.asarray(index)
    mult = np.bincount(idx, minlength=len(keys)).astype(float)
    return StageGroups(list(keys), idx, mult, mult.tolist())


def pass_groups(
    counts: list[Counter], layer: dict, extras: dict[int, list], row_groups: StageLayouts
) -> StageGroups:
    """``stage_groups`` of a pass's stage ``counts``, ``layer`` kinds and ``extras`` (by stage),
    memoised per stage layout in ``row_groups``."""
    kinds = tuple(layer)
    gkey = (len(counts), kinds, tuple(extras))
    memo = row_groups.groups
    hit = memo.get(gkey)
    if hit is None:
        hit = memo[gkey] = stage_groups(counts, list(kinds), extras)
    return hit


@dataclass
class PassFigures:
    """Figures of a pass that follow from its priced pieces alone, not from the comm overlap or
    the micro-batches in flight: shared by the passes of the plans that differ only in comm
    overlap (one ``PlanBase``). None: not computed yet."""

    comm_totals: dict[LayerKind, float] | None = None  # Σ of one layer's collectives (s)
    groups: StageGroups | None = None
    totals: dict[tuple[str, bool], float | None] = field(default_factory=dict)  # ``total``
    noc_energy: float | None = None  # ``PlanCost.noc_energy_pj_per_decode_token``
    base_metrics: tuple | None = None  # ``evaluator._base_metrics``
    attribution: dict[str, tuple] = field(default_factory=dict)  # ``evaluator._shared_parts``

    @classmethod
    def with_comm_totals(cls, comm_totals: dict[LayerKind, float]) -> PassFigures:
        """``PassFigures(comm_totals=comm_totals)`` without the generated ``__init__`` (one per
        plan base and pass on the cold path)."""
        figures = object.__new__(cls)
        figures.__dict__.update(
            comm_totals=comm_totals,
            groups=None,
            totals={},
            noc_energy=None,
            base_metrics=None,
            attribution={},
        )
        return figures


@dataclass
class PassResult:
    """One pipelined pass over every stage, for one or many steps (arrays over steps).

    Stage fields are linear in the per-kind layer costs, so they are kept as components
    (layer costs by kind, kind counts per stage, extras per stage) and combined on demand.
    """

    stage_layers: list[int]
    counts: list[Counter]  # per stage: layers of each kind
    layer: dict[LayerKind, StageArrays]  # one layer of each kind, priced
    comm: dict[LayerKind, dict[str, Cost]]  # one layer's collectives, by kind
    extras: dict[int, list[StageArrays]]  # embedding / LM head stages by pipeline stage
    transfer: Cost  # slowest stage-boundary transfer
    full_overlap: bool
    steps: StepWeights = ONE_STEP  # decode steps each evaluation point stands for
    row_groups: StageLayouts = field(default_factory=StageLayouts)  # per context
    # Micro-batches in flight when fewer than pp (0: pp of them, the reference's assumption).
    # A micro-batch's next token needs its last stage done, so the period is also bounded by
    # (Σ stages + pp·X) / in_flight (docs/deviations.md, "decode with fewer micro-batches").
    in_flight: int = 0
    # Figures that depend on the pieces above but not on the overlap or in-flight count
    # (field totals), shared by the passes of plans that differ only in comm overlap.
    shared: PassFigures = field(default_factory=PassFigures)

    @property
    def transfer_seconds(self) -> float:
        return self.transfer.seconds

    @cached
    def layers_per_kind(self) -> list[int]:
        """How many layers of each kind (in ``layer`` order) the whole pipeline runs."""
        kinds = tuple(self.layer)
        key = (len(self.counts), kinds)
        memo = self.row_groups.per_kind
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = [sum(c.get(k, 0) for c in self.counts) for k in kinds]
        return hit

    @cached
    def _comm_totals(self) -> dict[LayerKind, float]:
        hit = self.shared.comm_totals  # the same collectives for either comm overlap
        if hit is None:
            hit = {k: sum(c.seconds for c in comm.values()) for k, comm in self.comm.items()}
            self.shared.comm_totals = hit
        return hit

    def comm_seconds(self, kind: LayerKind) -> float:
        """Σ of one layer's collective times (s)."""
        return self._comm_totals[kind]

    def combined_seconds(self, kind: LayerKind) -> np.ndarray:
        """One layer's seconds with its collectives: sum, or max under full overlap (§4.6)."""
        return self.layer[kind].with_comm(self.comm_seconds(kind), self.full_overlap)

    def failed_checks(self, grid: DecodeGrid) -> dict[int, list[int]]:
        """Compressed pieces of ``grid`` where a branch may switch, with where to cut them."""
        if not grid.checks:
            return {}
        comm = self._comm_totals if self.full_overlap else None  # the same answer, from memos:
        if not self.in_flight and plan_checks_hold(grid, self.layer, comm, self.stage_rows[0]):
            return {}
        signs = []
        for kind, la in self.layer.items():
            signs.append(la.memory_seconds - la.compute_seconds)
            if self.full_overlap:
                signs.append(self.comm_seconds(kind) - la.seconds)
        if self.in_flight:  # which bound sets the period: the slowest stage or the token loop
            signs.append(self.feedback_period - self.stage_period)
        return failed_pieces(grid, signs, self.stage_rows[0])

    @cached
    def groups(self) -> StageGroups:
        """``stage_groups`` of this pass (kept in the pieces' memo, so the plans of one base
        look them up once)."""
        hit = self.shared.groups
        if hit is None:
            hit = self.shared.groups = pass_groups(
                self.counts, self.layer, self.extras, self.row_groups
            )
        return hit

    @cached
    def stage_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct stage-time rows [U, steps], each stage's row index, and row multiplicities.

        Stages with the same layer counts and no extras take the same time, so each distinct
        stage is computed once (e.g. one row for four identical pipeline stages).
        """
        distinct, index, mult, _ = self.groups
        points = self.steps.points
        if points == 1:
            return np.array(self._point_values).reshape(-1, 1), index, mult
        layer, extras = self.layer, self.extras
        if len(layer) == 1 and len(distinct) == 1 and distinct[0][1] not in extras:
            # one stage layout of one kind: w·a, the same product (``combined_seconds`` inline)
            ((kind, la),) = layer.items()
            w = distinct[0][0][0]
            if not w:
                return np.zeros(points)[None], index, mult
            a = la.with_comm(self._comm_totals[kind], self.full_overlap)
            return (a * w)[None], index, mult
        combined = [self.combined_seconds(k) for k in layer]
        rows = np.empty((len(distinct), self.steps.points))
        for r, (counts, stage) in enumerate(distinct):
            row = rows[r]  # Σ wᵢ·aᵢ (``weighted_sum``) written in place, then the extras
            started = False
            for w, a in zip(counts, combined, strict=True):
                if w:
                    if started:
                        row += a * w
                    else:
                        np.multiply(a, w, out=row)
                        started = True
            if not started:
                row.fill(0.0)
            if stage in extras:
                for ex in extras[stage]:
                    row += ex.seconds
        return rows, index, mult

    @cached
    def _point_values(self) -> list[float]:
        """Each distinct stage's seconds of a one-point pass (the prefill) in Python floats: the
        same IEEE operations in the same order as the array path, without an array call per
        term (``point_pass.point_values``)."""
        return point_values(
            self.layer, self._comm_totals, self.full_overlap, self.groups.distinct, self.extras
        )

    def stage_seconds_at(self, step: int) -> np.ndarray:
        """Seconds of each stage for one micro-batch at one evaluation point (0: step 0)."""
        rows, index, _ = self.stage_rows
        return rows[index, step]

    @cached
    def period_total(self) -> float:
        """Σ over the steps of ``period`` (s)."""
        if self.in_flight:
            return self.steps.total(self.period)
        return self._stage_period_totals()

    @cached
    def stage_period_total(self) -> float:
        """Σ over the steps of ``stage_period`` (s; the same sum when nothing else bounds the
        period)."""
        if not self.in_flight:  # ``period_total``'s sums, kept at once (one descriptor less)
            return self._stage_period_totals()
        return self.steps.total(self.stage_period)

    def _stage_period_totals(self) -> float:
        """Both period totals where nothing else bounds the period (``period`` is
        ``stage_period`` and both totals are one sum), kept at once: the values the four cached
        properties give one by one (s)."""
        d = self.__dict__
        sp = d.get("stage_period")
        if sp is None:
            sp = d["stage_period"] = self._stage_period()
        d["period"] = sp
        total = d["period_total"] = d["stage_period_total"] = self.steps.total(sp)
        return total

    @cached
    def stage_period(self) -> np.ndarray:
        """Per step: slowest stage + one boundary transfer (s, the reference's period)."""
        return self._stage_period()

    def _stage_period(self) -> np.ndarray:
        rows = self.stage_rows[0]
        slowest = rows[0] if len(rows) == 1 else rows.max(axis=0)
        return slowest + self.transfer.seconds

    @cached
    def feedback_period(self) -> np.ndarray:
        """Per step: (Σ stages + pp transfers) / micro-batches in flight (s): with fewer
        micro-batches than stages each one's next token waits for its own trip round the
        pipeline. Only meaningful when ``in_flight`` is set."""
        rows, _, mult = self.stage_rows
        pp = len(self.stage_layers)
        return (mult.dot(rows) + pp * self.transfer.seconds) / max(self.in_flight, 1)

    @cached
    def period(self) -> np.ndarray:
        """Per step: the decode period (s): slowest stage + one boundary transfer, or the token
        loop's bound when fewer micro-batches than stages are in flight."""
        if not self.in_flight:
            return self.stage_period
        return np.maximum(self.stage_period, self.feedback_period)

    def latency_at(self, step: int) -> float:
        """Σ stages + (pp − 1) transfers at one evaluation point (0: step 0) (s)."""
        pp = len(self.stage_layers)
        mult = self.groups.mult_floats
        if self.steps.points == 1:  # one point (the prefill): its values, one product or dot
            g = self.groups
            return point_latency(
                self._point_values, g.mult, g.mult_floats, pp, self.transfer.seconds
            )
        if step == 0 and len(mult) == 1:  # one distinct stage: its time × pp (one product)
            return float(mult[0] * self.stage_rows[0][0, 0]) + (pp - 1) * self.transfer.seconds
        rows, _, mult_arr = self.stage_rows
        return float(mult_arr.dot(rows[:, step])) + (pp - 1) * self.transfer.seconds

    def stage_field(self, stage: int, name: str, step: int) -> float | None:
        """A priced field of one stage at one step (extras first, then layers by kind)."""
        if name == "dram_energy_pj" and next(iter(self.layer.values())).dram_energy_pj is None:
            return None
        total = 0.0
        for ex in self.extras.get(stage, []):
            total += getattr(ex, name)[step]
        for kind, count in self.counts[stage].items():
            total += count * getattr(self.layer[kind], name)[step]
        return float(total)

    def total(self, name: str, first_step: bool = False) -> float | None:
        """A field summed over every stage and every step (or step 0 only)."""
        key = (name, first_step)
        totals = self.shared.totals
        if key in totals:
            return totals[key]
        value = totals[key] = self._total(name, first_step)
        return value

    def _total(self, name: str, first_step: bool) -> float | None:
        priced = [ex for exs in self.extras.values() for ex in exs]
        weights = [1.0] * len(priced)
        priced += list(self.layer.values())
        weights += self.layers_per_kind
        total = 0.0
        for weight, st in zip(weights, priced, strict=True):
            value = st.field_sum(name, first_step)
            if value is None:
                return None
            total += weight * value
        return total

    def report(self, step: int = 0) -> dict:
        """The reference pass dict for one step."""
        stages = []
        secs = self.stage_seconds_at(step)
        for i, layers in enumerate(self.stage_layers):
            comm: dict[str, float] = {}
            for kind, count in self.counts[i].items():
                for name, c in self.comm[kind].items():
                    comm[name] = comm.get(name, 0.0) + count * c.seconds
            stages.append(
                {
                    "stage": i,
                    "layers": layers,
                    "seconds": float(secs[i]),
                    "compute_seconds": self.stage_field(i, "compute_seconds", step),
                    "memory_seconds": self.stage_field(i, "memory_seconds", step),
                    "memory_bound_seconds": self.stage_field(i, "memory_bound_seconds", step),
                    "comm_seconds": {k: v for k, v in comm.items() if v > 0},
                    "read_bytes": self.stage_field(i, "read_bytes", step),
                    "write_bytes": self.stage_field(i, "write_bytes", step),
                    "dram_energy_pj": self.stage_field(i, "dram_energy_pj", step),
                }
            )
        return {
            "stages": stages,
            "transfer_seconds": self.transfer.seconds,
            "period_seconds": float(self.period[step]),
            "latency_seconds": self.latency_at(step),
            "bottleneck_stage": int(np.argmax(secs)),
        }
