"""Vectorised roofline pricing of stages over many decode steps.

Analytic-model §3.3 ``price_stage``.

Same rules as :func:`plena_opt.memory.price_stage`, applied to numpy arrays of evaluation points;
each point stands for a number of decode steps (``StepWeights``, see ``estimate.decode``), so sums
and means over the decode are weighted sums over the points.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from plena_opt.estimate.cached import cached
from plena_opt.memory import Memory


@dataclass(frozen=True, eq=False)
class StepWeights:
    """How many steps each evaluation point stands for (Σ weights = ``steps``)."""

    weights: np.ndarray
    steps: int
    points: int = field(init=False)  # len(weights), read per plan: kept, not recomputed

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", len(self.weights))

    def total(self, values: np.ndarray) -> float:
        """Σ over the steps of a per-point array (``.dot``: the BLAS call of ``@``, sooner)."""
        return float(self.weights.dot(values))

    def mean(self, values: np.ndarray) -> float:
        """Mean over the steps of a per-point array."""
        return float(self.weights.dot(values)) / self.steps


ONE_STEP = StepWeights(np.ones(1), 1)


def _is_array(x: object) -> bool:
    """``np.ndim(x) != 0`` for the Python and numpy numbers and arrays priced here, without
    ``np.ndim``'s Python-level dispatch (a 0-d array or a numpy scalar is not an array)."""
    return type(x) is np.ndarray and x.ndim != 0


class StageArrays:
    """Per-point fields of one priced stage (arrays over points; bytes include quantisation).

    ``seconds`` is computed up front; the other fields only when a report or a total asks for
    them, so a batch evaluation prices long decodes with few array operations.
    """

    def __init__(self, t_c, t_m, r, w, steps: StepWeights, policy: str, memory: Memory) -> None:
        self._t_c, self._t_m, self._r, self._w = t_c, t_m, r, w
        self.steps = steps
        self._n = steps.points
        self._memory = memory
        # memos of ``split_means`` (by overlap policy) and ``field_sum`` (by field, step 0 only)
        self._split: dict[str, tuple[float, float]] = {}
        self._sums: dict[tuple[str, bool], float | None] = {}
        # memos of ``with_comm`` (by comm seconds and overlap) and ``exposed_share`` (by comm
        # seconds): plans of other depths and placements share a layer and its collectives
        self._with_comm: dict[tuple[float, bool], np.ndarray] = {}
        self._exposed: dict[float, float] = {}
        self.seconds = np.maximum(t_c, t_m) if policy == "stage-roofline" else t_c + t_m
        if not _is_array(self.seconds):
            self.seconds = np.full(self._n, float(self.seconds))

    def _full(self, x) -> np.ndarray:
        return x if _is_array(x) else np.full(self._n, float(x))

    @cached
    def first_seconds(self) -> float:
        """``float(seconds[0])``: the one value of a one-point (prefill) stage, read per plan."""
        return float(self.seconds[0])

    @cached
    def compute_seconds(self) -> np.ndarray:
        return self._full(self._t_c)

    @cached
    def memory_seconds(self) -> np.ndarray:
        return self._full(self._t_m)

    @cached
    def memory_bound(self) -> np.ndarray:
        """Per point: whether DRAM time exceeds compute time (the roofline branch)."""
        bound = self._t_m > self._t_c
        return bound if _is_array(bound) else np.full(self._n, bool(bound))

    @cached
    def memory_bound_seconds(self) -> np.ndarray:
        return np.where(self.memory_bound, self.seconds, 0.0)

    @cached
    def read_bytes(self) -> np.ndarray:
        return self._full(self._r)

    @cached
    def write_bytes(self) -> np.ndarray:
        return self._full(self._w)

    def with_comm(self, comm: float, full: bool) -> np.ndarray:
        """``seconds`` with the layer's collectives of ``comm`` s: their max under full comm
        overlap, else their sum (§4.6); memoised, read-only."""
        key = (comm, full)
        hit = self._with_comm.get(key)
        if hit is None:
            hit = np.maximum(self.seconds, comm) if full else self.seconds + comm
            hit.setflags(write=False)
            self._with_comm[key] = hit
        return hit

    def exposed_share(self, comm: float) -> float:
        """The mean over steps of the collectives' exposed part, max(comm − seconds, 0), as a
        share of ``comm`` s (> 0) (full comm overlap); memoised."""
        hit = self._exposed.get(comm)
        if hit is None:
            exposed = comm - self.seconds
            st = self.steps
            hit = float(st.weights.dot(np.maximum(exposed, 0.0, out=exposed))) / st.steps / comm
            self._exposed[comm] = hit
        return hit

    def split_means(self, policy: str) -> tuple[float, float]:
        """Mean over steps of the (compute, DRAM) share of ``seconds``: under the roofline the
        bound side takes all of it; ``serial`` adds both."""
        hit = self._split.get(policy)
        if hit is None:
            hit = self._split[policy] = self._split_means(policy)
        return hit

    def _split_means(self, policy: str) -> tuple[float, float]:
        st = self.steps
        if policy == "serial":
            return st.mean(self.compute_seconds), st.mean(self.memory_seconds)
        total = st.mean(self.seconds)
        dram = st.mean(self.memory_bound_seconds) if self.memory_bound.any() else 0.0
        return total - dram, dram

    def field_sum(self, name: str, first_step: bool = False) -> float | None:
        """Σ of one field over every step, or its value at step 0 (point 0)."""
        key = (name, first_step)
        if key in self._sums:
            return self._sums[key]
        value = self._sums[key] = self._field_sum(name, first_step)
        return value

    def _field_sum(self, name: str, first_step: bool) -> float | None:
        raw = {
            "compute_seconds": self._t_c,
            "memory_seconds": self._t_m,
            "read_bytes": self._r,
            "write_bytes": self._w,
        }.get(name)
        if raw is not None and not _is_array(raw):
            return float(raw) * (1 if first_step else self.steps.steps)
        if name == "dram_energy_pj":
            mem = self._memory
            if mem.energy_pj(0.0, 0.0) is None:
                return None
            r = self.field_sum("read_bytes", first_step)
            w = self.field_sum("write_bytes", first_step)
            return r * mem.energy_pj(1.0, 0.0) + w * mem.energy_pj(0.0, 1.0)
        values = getattr(self, name)
        return float(values[0]) if first_step else self.steps.total(values)

    @cached
    def dram_energy_pj(self) -> np.ndarray | None:
        """DRAM energy is linear in the bytes: 8·(R·read_pJ + W·write_pJ) (§3.1)."""
        mem = self._memory
        if mem.energy_pj(0.0, 0.0) is None:
            return None
        return self.read_bytes * mem.energy_pj(1.0, 0.0) + self.write_bytes * mem.energy_pj(
            0.0, 1.0
        )


def _quantised_total(parts: Mapping[str, np.ndarray | float], memory: Memory) -> np.ndarray | float:
    """Σ of the positive components, each quantised separately (scalars priced once)."""
    scalar = 0.0
    total = None
    for value in parts.values():
        if not (isinstance(value, np.ndarray) and value.ndim):
            if value > 0:
                scalar += memory.quantize_bytes(float(value))
            continue
        q = memory.quantize_array(np.maximum(value, 0.0), nonnegative=True)
        if total is None:
            total = q
        else:
            total += q
    if total is None:
        return scalar
    if scalar:
        total += scalar
    return total


def price_arrays(
    cycles: np.ndarray | float,
    reads: Mapping[str, np.ndarray | float],
    writes: Mapping[str, np.ndarray | float],
    memory: Memory,
    compute_hz: float,
    overlap_policy: str,
    steps: StepWeights,
) -> StageArrays:
    """Price ``steps.points`` stages at once; each positive traffic component quantised alone."""
    r = _quantised_total(reads, memory)
    w = _quantised_total(writes, memory)
    t_c = cycles / compute_hz
    t_m = r + w
    t_m /= memory.usable_bandwidth_bytes_per_s
    return StageArrays(t_c, t_m, r, w, steps, overlap_policy, memory)
