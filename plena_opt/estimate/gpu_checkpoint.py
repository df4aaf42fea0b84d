"""A GPU plan's formats defaulted to the checkpoint's: the weights' ``quantization_config``
format and the KV-cache format it declares (``estimate.gpu``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.chip.gpu import GpuChipProfile
    from plena_opt.estimate.plan import Workload
    from plena_opt.models import ModelSpec

DEFAULT_GPU_PRECISION = "bf16"  # vLLM serves a bf16 checkpoint in bf16, KV "auto" = bf16


def gpu_checkpoint_workload(chip: GpuChipProfile, model: ModelSpec, workload: Workload
                            ) -> Workload:  # fmt: skip
    """``workload`` with the GPU's format defaulted to the checkpoint's (``quantization_config``):
    a plan runs what the checkpoint ships unless ``--precision`` asks for another format. A
    format the chip cannot run is refused naming ``precision`` and the config field. The KV
    cache defaults to the format the checkpoint declares where the engine inherits it
    (``checkpoint_kv_workload``)."""
    workload = checkpoint_kv_workload(chip, model, workload)
    if workload.precision is not None:
        return workload
    ckpt = model.checkpoint_precision
    if ckpt == DEFAULT_GPU_PRECISION:
        return workload
    if ckpt not in chip.formats:
        raise PlenaInputError(
            "precision",
            f"{model.name}'s checkpoint ships {ckpt} ({model.checkpoint_source}), which chip "
            f"{chip.name} does not run (it runs {', '.join(chip.formats)}); give --precision "
            "to price a re-quantised checkpoint",
        )
    return replace(workload, precision=ckpt)


def checkpoint_kv_workload(chip: GpuChipProfile, model: ModelSpec, workload: Workload
                           ) -> Workload:  # fmt: skip
    """``workload`` with ``kv_precision`` the checkpoint's declared KV format
    (``ModelSpec.checkpoint_kv_precision``: a ModelOpt ``kv_cache_quant_algo``) where none is
    given, the plan runs the checkpoint's own weight format, the chip stores that KV format and
    ``workload.engine`` at its modelled version (``serving.engines.VERSIONS``: version None)
    leaves its default KV dtype to the checkpoint (``models.checkpoint.engine_inherits_kv``);
    else unchanged (bf16).
    """
    from plena_opt.models.checkpoint import engine_inherits_kv

    kv = model.checkpoint_kv_precision
    if kv is None or workload.kv_precision is not None or kv not in chip.kv_formats:
        return workload
    if workload.precision not in (None, model.checkpoint_precision):
        return workload  # a re-quantised checkpoint: its KV scales are not the shipped ones
    if not engine_inherits_kv(workload.engine, None):
        return workload
    return replace(workload, kv_precision=kv)
