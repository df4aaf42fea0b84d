"""Single-chip estimates: ``estimate_decoder_latency`` (analytic-model §3.3) and the reference
``llama_model.py`` / ``gpt_oss_model.py`` scripts (§2).

Both are the one-device case of the distributed model (§4.6, §7.1): a one-port NoC, the plan
with every dimension 1, and the phase totals summed from its stages and decode steps.
"""

from __future__ import annotations

from deepstack import switch_noc

from plena_opt.chip import ChipProfile
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.distributed import (
    FIELDS,
    EstimateContext,
    PassResult,
    PlanCost,
)
from plena_opt.estimate.moe_routing import check_routing
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.results import ReportDict
from plena_opt.memory import Memory, unbounded
from plena_opt.models import ModelSpec


def _one_device_cost(
    model: ModelSpec, memory: Memory, workload: Workload, chip: ChipProfile | None
) -> PlanCost:
    ctx = EstimateContext(model, switch_noc(1), memory, workload, chip)
    return PlanCost(ctx, Plan())


def _phase_total(result: PassResult, first_step: bool = False) -> dict:
    """Every priced field summed over the stages and every step (or step 0) of a pass."""
    return {name: result.total(name, first_step) for name in (*FIELDS, "dram_energy_pj")}


class DecoderLatencyEstimate(ReportDict):
    """Single-chip result; ``to_dict()`` matches the reference ``DecoderLatencyEstimate``."""


def estimate_decoder_latency(
    model: ModelSpec,
    memory: Memory,
    *,
    batch_size: int = 4,
    input_seq_len: int = 2048,
    output_seq_len: int = 1024,
    frequency_hz: float = 1e9,
    overlap_policy: str = "stage-roofline",
    include_lm_head: bool = False,
    chip: ChipProfile | None = None,
) -> DecoderLatencyEstimate:
    """TTFT (s), TPS (tokens/s), phase totals and footprints of a dense decoder on one chip."""
    if model.num_experts:
        raise PlenaInputError(
            "model",
            f"{model.name} is a mixture-of-experts model; the single-chip estimate models dense "
            "decoders only (use the distributed estimate, e.g. --noc single_device)",
        )
    workload = Workload(
        batch_size=batch_size,
        input_seq_len=input_seq_len,
        output_seq_len=output_seq_len,
        frequency_hz=frequency_hz,
        overlap_policy=overlap_policy,
        include_lm_head=include_lm_head,
    )
    cost = _one_device_cost(model, memory, workload, chip)
    wb, kb = cost.footprint
    return DecoderLatencyEstimate(
        {
            "model": model.name,
            "batch_size": batch_size,
            "input_seq_len": input_seq_len,
            "output_seq_len": output_seq_len,
            "overlap_policy": overlap_policy,
            "include_lm_head": include_lm_head,
            "compute_frequency_hz": cost.ctx.compute_hz,
            "ttft_seconds": cost.ttft_seconds,
            "tps": cost.tps,
            "prefill": _phase_total(cost.prefill),
            "first_token_decode": _phase_total(cost.decode, first_step=True),
            "decode": _phase_total(cost.decode),
            "weight_footprint_bytes": wb,
            "kv_cache_footprint_bytes": kb,
            "memory_capacity_bytes": memory.capacity_bytes,
            "fits_in_memory": cost.fits_in_memory,
            "memory": memory.describe(),
            "precision": cost.ctx.precision.to_dict(),
            "warnings": _single_chip_warnings(cost),
        }
    )


def _single_chip_warnings(cost: PlanCost) -> list[str]:
    """The one-device cost's warnings, the capacity one in the single-chip reference's words."""
    if cost.fits_in_memory is not False:
        return list(cost.warnings)
    distributed = cost.capacity_warning(single_chip=False)
    return [cost.capacity_warning(True) if w == distributed else w for w in cost.warnings]


def estimate_single_chip(
    model: ModelSpec, memory: Memory, workload: Workload, chip: ChipProfile | None = None
) -> DecoderLatencyEstimate:
    """``estimate_decoder_latency`` for a ``Workload`` (dense only: its routing must still be a
    known mode or an existing trace file)."""
    check_routing(workload.routing)
    return estimate_decoder_latency(
        model,
        memory,
        batch_size=workload.batch_size,
        input_seq_len=workload.input_seq_len,
        output_seq_len=workload.output_seq_len,
        frequency_hz=workload.frequency_hz,
        overlap_policy=workload.overlap_policy,
        include_lm_head=workload.include_lm_head,
        chip=chip,
    )


def reference_script_estimate(
    model: ModelSpec,
    *,
    batch_size: int = 1,
    input_seq_len: int = 2048,
    output_seq_len: int = 128,
    device_num: int = 1,
    frequency_hz: float = 1e9,
    chip: ChipProfile | None = None,
) -> dict:
    """The ``llama_model.py`` / ``gpt_oss_model.py`` figures (§2.1–§2.2): compute only (unbounded
    memory), the naive ``device_num`` split (batch // device_num per device, TTFT ÷ devices).

    Returns ``{prefill_seconds, ttft_seconds, tps}``.
    """
    device_batch = batch_size // device_num
    if device_batch < 1:
        raise PlenaInputError("device_num", "device_num must not exceed the batch size")
    memory = unbounded()
    workload = Workload(
        batch_size=device_batch,
        input_seq_len=input_seq_len,
        output_seq_len=output_seq_len,
        frequency_hz=frequency_hz,
    )
    cost = _one_device_cost(model, memory, workload, chip)
    prefill = cost.prefill.latency_at(0)
    return {
        "prefill_seconds": prefill,
        "ttft_seconds": (prefill + cost.decode.latency_at(0)) / device_num,
        "tps": batch_size * output_seq_len / cost.decode_seconds,
    }
