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

    @property
    def dram_energy_pj(self) -> None:  # type: ignore[override]
        return None


def stage_of(kernels: list[KernelTime], steps: StepWeights, memory: Memory, fixed: float = 0.0):
    """Sum kernels into a stage: scalar kernels first (most of them), then the per-step ones.

    ``_is_array`` stands for ``np.ndim(x) != 0``; a kernel whose compute-bound flag is one
    value adds its seconds to one side only (``np.where`` of a scalar flag adds 0.0 to the
    other, which leaves a non-negative time unchanged: the same floats)."""
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
    t_c, t_m = np.full(n, c), np.full(n, m)
    for k in arrays:
        s = np.broadcast_to(np.asarray(k.seconds, dtype=float), (n,))
        cb = k.compute_bound
        if not _is_array(cb):
            if cb:
                t_c += s
            else:
                t_m += s
            continue
        cb = np.broadcast_to(np.asarray(cb), (n,))
        t_c += np.where(cb, s, 0.0)
        t_m += np.where(cb, 0.0, s)
    r = np.full(n, float(r)) if not _is_array(r) else np.broadcast_to(r, (n,)).astype(float)
    w = np.full(n, float(w)) if not _is_array(w) else np.broadcast_to(w, (n,)).astype(float)
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
