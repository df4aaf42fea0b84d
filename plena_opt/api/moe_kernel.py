"""Use case: the MoE kernel a serving engine runs an MXFP4 checkpoint's experts on
(``plena_opt.chip.gpu.moe_kernels``) for the front ends: the names ``--moe-kernel`` takes, their
check, and a problem re-priced on another engine's kernels."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from plena_opt.chip.gpu.kernel_bytes import FUSED_QUANT_ENGINES
from plena_opt.chip.gpu.moe_kernels import ENGINES, MOE_KERNELS, check_moe_kernel
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.problem import check_named_kernel

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs

__all__ = ["ENGINES", "FUSED_QUANT_ENGINES", "MOE_KERNELS", "check_moe_kernel",
           "check_moe_kernel_flag", "check_named_kernel", "engine_inputs"]  # fmt: skip


def check_moe_kernel_flag(value: object) -> None:
    """``value`` None or a kernel name; else refused naming ``moe_kernel`` in the CLI's words."""
    if value is not None and value not in MOE_KERNELS:
        raise PlenaInputError(
            "moe_kernel", f"--moe-kernel: invalid choice {str(value)[:64]!r} "
            f"(choose from {', '.join(MOE_KERNELS)})",
        )  # fmt: skip


def engine_inputs(problem: EvaluatorInputs, engine: str) -> EvaluatorInputs:
    """``problem`` with its workload priced on ``engine``'s kernels (``Workload.engine``: the MoE
    kernels, an explicit ``moe_kernel`` kept and checked for that engine; its fused input
    quantisation, ``FUSED_QUANT_ENGINES``, as its step model prices it); ``problem`` itself where
    it already is, or where its workload names no engine (validate's flags)."""
    wl = problem.workload
    fused = engine in FUSED_QUANT_ENGINES
    if not wl.engine or (wl.engine == engine and wl.fused_input_quant == fused):
        return problem
    return replace(problem, workload=replace(wl, engine=engine, fused_input_quant=fused))
