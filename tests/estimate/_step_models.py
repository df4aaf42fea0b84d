"""A serving step model of a catalog model on 8 × H100 (vLLM, fp8), for the cold-path tests."""

from __future__ import annotations

from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.models import load_model
from plena_opt.serving import StepModel, engine_model


def h100_step_model(name: str, fields: dict, ratio: float, osl: int = 1024) -> StepModel:
    """``StepModel`` of ``name`` on ``Plan(**fields)`` over hgx-h100x8, 1k prompts of ``osl``
    output tokens drawn with range ratio ``ratio``, vLLM's default scheduler."""
    chip = load_chip("h100-sxm")
    wl = Workload(batch_size=1, input_seq_len=1024, output_seq_len=osl, precision="fp8")
    eng = engine_model("vllm", float(chip.hbm.capacity_bytes.value))
    noc, mem = load_noc_profile("hgx-h100x8"), gpu_memory(chip)
    return StepModel.from_problem(
        load_model(name), noc, mem, chip, wl, Plan(**fields), eng, range_ratio=ratio
    )
