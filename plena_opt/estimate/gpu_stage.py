"""A GPU stage priced kernel by kernel: kernels summed into ``StageArrays`` (``estimate.gpu``).

``seconds`` = compute-bound + memory-bound kernel time (+ fixed host overheads, counted as
compute); DRAM energy is not priced per bit (the board power model prices energy).
"""

from __future__ import annotations

import numpy as np

from plena_opt.chip.gpu import KernelTime
from plena_opt.estimate.moe_load import MoeLoad
from plena_opt.estimate.pricing import StageArrays, StepWeights, _is_array
from plena_opt.memory import Memory

_BYTES = ("read_bytes", "write_bytes")


class GpuStageArrays(StageArrays):
    """A stage priced kernel by kernel: ``seconds`` = compute-bound + memory-bound kernel time
    (+ fixed overheads, counted as compute); no DRAM energy (the power model prices energy)."""

    def __init__(self, t_c, t_m, r, w, steps: StepWeights, memory: Memory) -> None:
        super().__init__(t_c, t_m, r, w, steps, "serial", memory)

    def split_means(self, policy: str) -> tuple[float, float]:
        return self.steps.mean(self.compute_seconds), self.steps.mean(self.memory_seconds)

    @property
    def memory_bound_seconds(self) -> np.ndarray:  # type: ignore[override]
        return self.memory_seconds

    def field_sum(self, name: str, first_step: bool = False) -> float | None:
        if name == "dram_energy_pj":
            return None
        return super().field_sum(name, first_step)

    def _field_sum(self, name: str, first_step: bool) -> float | None:
        """``stage_of`` keeps one-value bytes as a scalar (the array is built when read), but
        their sum over the steps is the dot product of that array, as when it was built up
        front (``StageArrays``' scalar shortcut, value × steps, may differ in the last bit)."""
        if not first_step and name in _BYTES:
            return self.steps.total(getattr(self, name))
        return super()._field_sum(name, first_step)

    @property
    def dram_energy_pj(self) -> None:  # type: ignore[override]
        return None


def stage_of(kernels: list[KernelTime], steps: StepWeights, memory: Memory, fixed: float = 0.0):
    """Sum kernels into a stage: scalar kernels first (most of them), then the per-step ones.

    The same floats as ``np.where(flag, seconds, 0.0)`` added to each side: ``_is_array`` is
    ``np.ndim(x) != 0`` here; a kernel whose compute-bound flag is one value adds its seconds
    to its side only (the formula adds 0.0 to the other, which leaves a non-negative time as
    it is); a per-step float64 array of the points' length is its own broadcast; one-value
    bytes stay scalars (``GpuStageArrays`` builds their arrays when read)."""
    n = steps.points
    c, m, r, w = fixed, 0.0, 0.0, 0.0
    arrays = []
    for k in kernels:
        if not _is_array(k.seconds) and not _is_array(k.compute_bound):
            if k.compute_bound:
                c += float(k.seconds)
            else:
                m += float(k.seconds)
        else:
            arrays.append(k)
        r = r + k.read_bytes
        w = w + k.write_bytes
    t_c = np.empty(n)  # np.full(n, c) without its Python-level call
    t_c.fill(c)
    t_m = np.empty(n)
    t_m.fill(m)
    for k in arrays:
        s = k.seconds
        if not (type(s) is np.ndarray and s.shape == (n,) and s.dtype == np.float64):
            s = np.broadcast_to(np.asarray(s, dtype=float), (n,))
        cb = k.compute_bound
        if not _is_array(cb):
            if cb:
                t_c += s
            else:
                t_m += s
            continue
        cb = np.broadcast_to(np.asarray(cb, dtype=bool), (n,))  # np.where reads truthiness
        np.add(t_c, s, out=t_c, where=cb)  # += np.where(cb, s, 0.0): each point on its side
        np.add(t_m, s, out=t_m, where=np.logical_not(cb))
    # per-step bytes: a sum built here (a new array), so one of the points' length and float64
    # is already what broadcasting and ``astype(float)`` would copy it into
    if _is_array(r) and not (r.shape == (n,) and r.dtype == np.float64):
        r = np.broadcast_to(r, (n,)).astype(float)
    if _is_array(w) and not (w.shape == (n,) and w.dtype == np.float64):
        w = np.broadcast_to(w, (n,)).astype(float)
    return GpuStageArrays(t_c, t_m, r, w, steps, memory)


def active_experts(load: MoeLoad, local_experts: int) -> float:
    """Experts that receive a token on the busiest rank. ``balanced`` load (analytic-model
    §4.5) gives every expert ``ceil(T·k/E)`` tokens, which at small batches marks all experts
    active; a GPU reads only the experts routed to, so balanced routing spreads the ``pairs``
    over ``min(experts, pairs)`` experts (as the fused-MoE measurements do). Traces and random
    routing keep their counted experts."""
    if not load.source.startswith("balanced"):  # also "balanced, EPLB …"
        return float(max(load.active_experts, 1))
    return float(max(1, min(local_experts, load.pairs)))


def busy_seconds(arrays: StageArrays) -> float:
    """Kernel-busy seconds of one priced stage summed over its steps (excludes comm)."""
    return arrays.steps.total(arrays.seconds)
