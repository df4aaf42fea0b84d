"""GPU chip kind: sourced datasheet profiles and the roofline kernel model."""

from plena_opt.chip.gpu.perf import GpuPerfModel, KernelTime
from plena_opt.chip.gpu.profile import (
    GPU_FORMATS,
    GpuChipProfile,
    gpu_profile_names,
    load_gpu_chip,
    validate_gpu_profile,
)
from plena_opt.chip.gpu.vendor import engine_refusal

__all__ = [
    "GPU_FORMATS",
    "GpuChipProfile",
    "GpuPerfModel",
    "KernelTime",
    "engine_refusal",
    "gpu_profile_names",
    "load_gpu_chip",
    "validate_gpu_profile",
]
