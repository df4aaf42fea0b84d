"""The kernel a GPU prices a model's routed experts on: the workload's explicit flags
(``marlin_moe``, ``mxfp8_moe``, ``bf16_moe``: ``validate``'s recipes), else the serving engine's
kernel for an MXFP4 checkpoint (``Workload.engine`` / ``moe_kernel``, ``chip.gpu.moe_kernels``),
checked against what the chip runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.chip.gpu.moe_kernels import moe_kernel_flags, resolve_moe_kernel
from plena_opt.chip.gpu.perf import bf16_moe_peak, marlin_peak_fraction, mxfp8_moe_peak
from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.chip.gpu import GpuChipProfile, GpuPerfModel
    from plena_opt.estimate.plan import Workload
    from plena_opt.models import ModelSpec


def gpu_moe_kernel(chip: GpuChipProfile, model: ModelSpec, workload: Workload, fmt: str
                   ) -> str | None:  # fmt: skip
    """The MoE kernel ``workload.engine`` runs ``model``'s MXFP4 experts on, on ``chip``, at
    format ``fmt`` (the one priced): None where none applies; a kernel the engine does not run
    there is refused naming ``moe_kernel``."""
    from plena_opt.chip.precision import is_weight_only

    if not workload.engine:
        return None
    compute = chip.compute_format(fmt)
    return resolve_moe_kernel(workload.engine, workload.moe_kernel, chip.name,
                              model.checkpoint_precision, compute,
                              is_weight_only(fmt, compute))  # fmt: skip


def moe_kernel_of(chip: GpuChipProfile, model: ModelSpec | None, workload: Workload,
                  perf: GpuPerfModel) -> tuple[str | None, bool, bool, bool]:  # fmt: skip
    """(kernel name or None, marlin, mxfp8, bf16): the flags ``GpuPerfModel.fused_moe`` prices
    the experts with; a flag the chip cannot run is refused naming it."""
    marlin, mxfp8, bf16 = workload.marlin_moe, workload.mxfp8_moe, workload.bf16_moe
    kernel = None
    if workload.engine and model is not None and not (marlin or mxfp8 or bf16):
        kernel = gpu_moe_kernel(chip, model, workload, perf.precision)
        flags = moe_kernel_flags(kernel)
        marlin, mxfp8, bf16 = flags["marlin_moe"], flags["mxfp8_moe"], flags["bf16_moe"]
    if mxfp8:  # 4-bit experts on fp4 tensor cores, a chip with an fp8 peak
        mxfp8_moe_peak(chip, perf.compute_format)
    if bf16:  # 4-bit experts on fp4-capable tensor cores, bf16 activations
        bf16_moe_peak(chip, perf.compute_format)
    if mxfp8 and bf16:
        raise PlenaInputError("bf16_moe", "bf16_moe and mxfp8_moe: give one")
    if marlin and not perf.weight_only:
        raise PlenaInputError(
            "marlin_moe",
            "marlin_moe needs weight-only (W4A16) experts; "
            f"{perf.precision} on {chip.name} is not weight-only",
        )
    if marlin:  # Marlin is a CUDA kernel with a known ceiling per chip
        marlin_peak_fraction(chip.name)
    return kernel, marlin, mxfp8, bf16
