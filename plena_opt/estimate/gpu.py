"""GPU chips in the evaluator: per-layer kernel times, extras, energy (the ``kind: gpu`` path).

``GpuPricing`` is the ``LayerPricer`` registered for ``kind: gpu`` (``estimate.pricer``):
``EstimateContext`` builds it for a ``GpuChipProfile`` and the pass code asks it for each layer's
``StageArrays`` as it asks the PLENA pricer for cycles on a stage roofline. A layer
is the list of kernels vLLM launches (fused add+RMSNorm, QKV GEMM, RoPE, KV-cache write,
attention, O GEMM, add+RMSNorm, gate/up GEMM, SiLU·mul, down GEMM; MoE: router GEMM, top-k, two
grouped expert GEMMs, activation, sum); each kernel is priced by ``GpuPerfModel`` and the layer
takes their sum (a per-kernel roofline). Collectives are priced by ``deepstack`` as for PLENA.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from plena_opt.chip.gpu import GpuChipProfile, GpuPerfModel, KernelTime
from plena_opt.chip.precision import GPU_BYTES, GPU_REDUCE_BYTES, gpu_bytes
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import gpu_host
from plena_opt.estimate import gpu_layers as L
from plena_opt.estimate.gpu_checkpoint import DEFAULT_GPU_PRECISION, gpu_checkpoint_workload
from plena_opt.estimate.gpu_moe import moe_kernel_of
from plena_opt.estimate.gpu_stage import GpuStageArrays, active_experts, busy_seconds, stage_of
from plena_opt.estimate.layer import LayerKind, LayerShape
from plena_opt.estimate.moe_load import MoeLoad
from plena_opt.estimate.plan import Workload
from plena_opt.estimate.pricer import (
    CollectiveOptions,
    LayerPricer,
    checkpoint_workload,
    precision_notes,
    register_pricer,
    storage_precision,
)
from plena_opt.estimate.pricing import StageArrays, StepWeights
from plena_opt.memory import HbmStoragePrecision, Memory

if TYPE_CHECKING:
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.models import ModelSpec

# re-exported from ``estimate.gpu_stage`` and (by kind) ``estimate.pricer``
__all__ = [
    "GpuStageArrays",
    "busy_seconds",
    "checkpoint_workload",
    "precision_notes",
    "storage_precision",
]

PJ = 1e-12  # joules per picojoule
# Model types whose published fp8 checkpoint is block-scaled (HF ``quantization_config``:
# ``fmt: e4m3``, ``weight_block_size: [128, 128]``): at ``fp8`` their experts run vLLM's fused
# MoE with block scales, priced by the chip's measured ``fp8_block`` fused-MoE curve.
BLOCK_FP8_MODEL_TYPES = frozenset({"deepseek_v3"})


def block_scaled_ops(chip: GpuChipProfile, workload: Workload, model: ModelSpec) -> bool:
    """True when the eager host runs block-quantisation ops: fp8 with 128x128 block-scaled
    weights (the model's own, ``BLOCK_FP8_MODEL_TYPES``, or the workload's ``fp8_block_*``)."""
    if chip.compute_format(workload.precision or DEFAULT_GPU_PRECISION) != "fp8":
        return False
    flags = workload.fp8_block_gemm or workload.fp8_block_moe
    return flags or model.model_type in BLOCK_FP8_MODEL_TYPES


def is_gpu(chip: object) -> bool:
    """True for a GPU chip profile (``kind: gpu``)."""
    return isinstance(chip, GpuChipProfile)


def gpu_memory(chip: GpuChipProfile) -> Memory:
    """The chip's own HBM as a fixed-bandwidth memory (datasheet bandwidth and capacity)."""
    from plena_opt.memory.fixed_bandwidth import FixedBandwidthMemory

    return FixedBandwidthMemory(
        chip.hbm.bandwidth_bytes_per_s.value,
        round(chip.hbm.capacity_bytes.value),
        name=f"{chip.name}-hbm",
    )


def _gpu_storage_precision(chip: GpuChipProfile, workload: Workload) -> HbmStoragePrecision:
    """A GPU's bytes per element: the compute format's weights, the KV cache format's KV."""
    p, kv = workload.precision, workload.kv_precision
    p = p or DEFAULT_GPU_PRECISION
    compute = chip.compute_format(p)  # raises naming --precision if the chip lacks it
    kv = kv or DEFAULT_GPU_PRECISION
    if kv not in chip.kv_formats:
        raise PlenaInputError(
            "kv_precision",
            f"chip {chip.name} has no {kv!r} KV cache; it offers {', '.join(chip.kv_formats)}",
        )
    fb, kvb = gpu_bytes(p, compute), GPU_BYTES[kv].activation
    return HbmStoragePrecision(fb.weight, kvb, kvb, fb.activation)


def quantisation_note(model: ModelSpec, precision: str) -> str | None:
    """None when ``precision`` is the checkpoint's; else what pricing it assumes."""
    ckpt = model.checkpoint_precision
    if precision == ckpt:
        return None
    return (f"precision {precision} is not the checkpoint's: {model.name} ships {ckpt} "
            f"({model.checkpoint_source}); the plan needs a {precision} checkpoint or online "
            "quantisation")  # fmt: skip


def _gpu_precision_notes(chip: GpuChipProfile, model: ModelSpec | None,
                         formats: list[str | None]) -> list[str]:  # fmt: skip
    """What a search states about its formats on a GPU: the precision each front plan runs
    and, for each searched format that is not the checkpoint's, that it quantises it."""
    if model is None:
        return []
    ckpt = model.checkpoint_precision
    named = [f or (ckpt if ckpt in chip.formats else DEFAULT_GPU_PRECISION) for f in formats]
    notes = [f"precision: {', '.join(named)} (checkpoint {ckpt}: {model.checkpoint_source})"]
    return notes + [n for f in dict.fromkeys(named) if (n := quantisation_note(model, f))]


@register_pricer
class GpuPricing(LayerPricer):
    """Kernel-by-kernel pricing of layers and extras on one GPU chip."""

    kind = "gpu"
    carries_memory = True  # the profile's HBM (``gpu_memory``)
    single_chip_refusal = (
        "a GPU chip is priced on a node profile: give --noc (e.g. hgx-h200x8 --devices 1)"
    )
    every_decode_step = True
    default_dram_energy = False  # board power prices energy (``gpu_energy_per_token``)

    @classmethod
    def storage_precision(cls, chip: GpuChipProfile, workload: Workload) -> HbmStoragePrecision:
        return _gpu_storage_precision(chip, workload)

    @classmethod
    def checkpoint_workload(cls, chip: GpuChipProfile, model: ModelSpec, workload: Workload
                            ) -> Workload:  # fmt: skip
        return gpu_checkpoint_workload(chip, model, workload)

    @classmethod
    def own_memory(cls, chip: GpuChipProfile) -> Memory:
        return gpu_memory(chip)

    @classmethod
    def precision_notes(cls, chip: GpuChipProfile, model: ModelSpec | None, formats: list
                        ) -> list[str]:  # fmt: skip
        return _gpu_precision_notes(chip, model, formats)

    def __init__(self, chip: GpuChipProfile, precision: HbmStoragePrecision, workload: Workload,
                 memory: Memory, model: ModelSpec | None = None) -> None:  # fmt: skip
        self.chip = chip
        self.model = model
        self.memory = memory
        self.redundant = workload.eplb_redundant  # EPLB replicas: more experts per rank
        self.block_moe_flag = workload.fp8_block_moe
        self.block_host = model is not None and block_scaled_ops(chip, workload, model)
        fmt = workload.precision or DEFAULT_GPU_PRECISION
        # static fp8 activation scales: the workload's flag, or a ModelOpt FP8 id run as shipped
        static = workload.fp8_static_input or (
            model is not None and model.checkpoint_fp8_static_input
            and fmt == model.checkpoint_precision
        )  # fmt: skip
        self.perf = GpuPerfModel(chip, fmt, precision.weight_bytes, precision.activation_bytes,
                                 precision.kv_read_bytes, memory.usable_bandwidth_bytes_per_s,
                                 fused_quant=workload.fused_input_quant,
                                 static_input=static)  # fmt: skip
        # a checkpoint that quantises only its routed experts (gpt-oss MXFP4, Kimi-K2-Thinking
        # INT4) keeps attention, router, dense / shared-expert MLPs and LM head in bf16: those
        # GEMMs read 2-byte weights at the bf16 rate
        self.dense = self.perf
        if (
            model is not None
            and model.checkpoint_experts_only
            and (self.perf.precision == model.checkpoint_precision != DEFAULT_GPU_PRECISION)
        ):
            self.dense = GpuPerfModel(chip, DEFAULT_GPU_PRECISION, 2.0, 2.0,
                                      precision.kv_read_bytes, self.perf.bw)  # fmt: skip
        if workload.fp8_block_gemm or workload.fp8_block_moe:
            if self.perf.compute_format != "fp8":
                raise PlenaInputError(
                    "precision", f"fp8_block weights need precision fp8 (got {self.perf.precision})"
                )
            if workload.fp8_block_gemm:  # dense GEMMs on the chip's fp8_block curves
                self.dense = self.dense.block_scaled()
        self.trtllm_gen_moe = workload.trtllm_gen_moe
        # the experts' MoE kernel (estimate.gpu_moe): the workload's flags, else its engine's
        self.moe_kernel, self.marlin_moe, self.mxfp8_moe, self.bf16_moe = moe_kernel_of(
            chip, model, workload, self.perf
        )
        # MLA projections the checkpoint keeps in bf16 (Workload.bf16_attention): read 2-byte
        # weights at the bf16 rate; o_proj too unless the checkpoint quantises it ("all_but_o")
        self.attn_proj = self.attn_out = self.dense
        kept = workload.bf16_attention
        if not kept and model is not None and self.perf.precision == model.checkpoint_precision:
            kept = model.checkpoint_bf16_attention  # an NVIDIA NVFP4 DeepSeek id, as shipped
        if kept and model is not None and model.is_mla:
            self.attn_proj = GpuPerfModel(chip, DEFAULT_GPU_PRECISION, 2.0, 2.0,
                                          precision.kv_read_bytes, self.perf.bw)  # fmt: skip
            if kept == "all":
                self.attn_out = self.attn_proj
            self.bf16_attention = kept
        self.warnings = _ignored_options(workload)
        if self.dense is not self.perf:  # experts-only format: the rest at the dense bytes
            self.dense_weight_bytes = self.dense.wb

    def describe(self) -> dict:
        """The ``chip`` field of a GPU estimate: name, kind and the formats priced."""
        p, m = self.perf, self.model
        return {
            "name": self.chip.name,
            "kind": "gpu",
            "precision": p.precision,
            "compute_format": p.compute_format,
            "weight_only": p.weight_only,
            "checkpoint_precision": None if m is None else m.checkpoint_precision,
            "checkpoint_source": None if m is None else m.checkpoint_source,
            "quantised_from_checkpoint": m is not None and p.precision != m.checkpoint_precision,
            "kv_bytes_per_element": p.kvb,
            # the KV format the checkpoint declares (its engine's default KV dtype inherits it:
            # ``gpu_checkpoint.checkpoint_kv_workload``)
            **({"checkpoint_kv_precision": kv} if (kv := m and m.checkpoint_kv_precision) else {}),
            **({} if self.moe_kernel is None else {"moe_kernel": self.moe_kernel}),
            # static fp8 activation scales: one bf16 quantisation pass (kernel_bytes)
            **({"fp8_static_input": True} if p.static_input else {}),
            "power_watts": {
                "busy": self.chip.power.busy_watts.value,
                "idle": self.chip.power.idle_watts.value,
            },
            "eager_host": None
            if (eh := self.chip.eager_host) is None
            else {
                "seconds_per_op": eh.seconds_per_op.value,
                "seconds_per_triton_op": eh.seconds_per_triton_op.value,
                "cuda_graph_max_tokens": eh.cuda_graph_max_tokens.value,
            },
        }

    def layer(self, s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray,
              load: MoeLoad | None, steps: StepWeights, cp: int = 1) -> GpuStageArrays:  # fmt: skip
        """One layer (attention half + MLP half) on one device at each KV length (``steps``:
        how many decode steps each stands for)."""
        p, m, d = self.perf, s.model, s.shard
        T = d.b_dev * q if mode == "prefill" else d.b_dev
        a = self.dense  # all but the routed experts: bf16 where the checkpoint keeps them so
        if kind.linear:  # Gated DeltaNet: fixed state, no KV cache
            from plena_opt.estimate.gpu_attention_variants import gated_deltanet

            ks = gated_deltanet(a, s, mode, q, T)
        elif m.is_mla:
            ks = L.mla_attention(a, s, mode, q, kv, T, self.attn_proj, self.attn_out)
        else:
            ks = L.gqa_attention(a, s, kind, mode, q, kv, T)
        ks += L.norms(p, s, T)
        if kind.moe:
            ks += self._moe(s, T, load) + L.dense_ffn(a, s, T, d.shared_ffn)
        else:
            ks += L.dense_ffn(a, s, T, d.ffn)
        host = 0.0
        if gpu_host.runs_eagerly(self.chip.eager_host, mode, T):
            ops = gpu_host.layer_ops(m, kind.moe, s.tp, self._block_moe(m) or self.block_host)
            host = gpu_host.ops_seconds(self.chip.eager_host, ops)
        return stage_of(ks, steps, self.memory, fixed=host)

    def eager_host_seconds(self, model, tp: int) -> float:
        """Host seconds of one eager forward of the whole model (``estimate.gpu_host``); 0 on
        a chip without an ``eager_host`` section."""
        ops = gpu_host.model_ops(model, tp, self._block_moe(model) or self.block_host)
        return gpu_host.ops_seconds(self.chip.eager_host, ops)

    def _moe(self, s: LayerShape, T: int, load: MoeLoad) -> list[KernelTime]:
        """Router GEMM (bf16), top-k, fused expert GEMMs over the busiest rank's active experts."""
        p, m, d = self.perf, s.model, s.shard
        h, f = m.hidden_size, d.expert_ffn
        active = active_experts(load, (m.num_experts + self.redundant) // max(d.ep_moe, 1))
        topk = p.elementwise(T * m.num_experts * 4, T * m.top_k * 8)
        return [
            self.dense.gemm(T, m.num_experts, h),
            topk,
            p.fused_moe(
                load.tokens_local,
                load.pairs,
                active,
                h,
                f,
                self._block_moe(m),
                marlin=self.marlin_moe,
                trtllm_gen=self.trtllm_gen_moe,
                mxfp8=self.mxfp8_moe,
                bf16=self.bf16_moe,
                expert_counts=load.expert_counts,
            ),
        ]

    def _block_moe(self, m) -> bool:
        """True when the model's fp8 weights (experts, GEMMs) are block-scaled
        (``BLOCK_FP8_MODEL_TYPES``)."""
        block = m.model_type in BLOCK_FP8_MODEL_TYPES or self.block_moe_flag
        return self.perf.compute_format == "fp8" and block

    def collective_options(self, load: MoeLoad | None) -> CollectiveOptions:
        """vLLM's fused MoE reduces over the top-k inside the kernel, so the TP all-reduce after
        the experts carries one row per token, not per token-expert pair; the shared experts'
        sums ride in it; TP all-reduces and the EP combine carry bf16 (``GPU_REDUCE_BYTES``);
        the EP dispatch sends a token once per distinct rank (``comm.layer_collectives``)."""
        if load is not None:
            load = replace(load, pairs=load.tokens_local)
        return CollectiveOptions(load, True, GPU_REDUCE_BYTES, True, GPU_REDUCE_BYTES)

    def chip_warnings(self, model: ModelSpec) -> list[str]:
        """The workload options a GPU does not read (``_ignored_options``)."""
        return list(self.warnings)

    def energy_per_token(self, cost: PlanCost, base: float | None) -> float:
        """Board power over the decode (``gpu_energy_per_token``) plus any NoC energy."""
        return gpu_energy_per_token(cost) + (cost.noc_energy_pj_per_decode_token or 0.0) * PJ

    def extras(self, s: LayerShape, mode: str, q: int, steps: StepWeights, last_stage: int,
               cache: dict | None = None, key: Hashable = None
               ) -> dict[int, list[StageArrays]]:  # fmt: skip
        """Embedding + step overhead (first stage) and final norm, LM head, sampling (last).

        A GPU server always runs the LM head and samples every step, so both are priced."""
        p, m, d = self.perf, s.model, s.shard
        h, ab = m.hidden_size, p.ab
        T = d.b_dev * q if mode == "prefill" else d.b_dev
        emb = p.elementwise(T * h * ab, T * h * ab)
        fixed = p.step_s
        if gpu_host.runs_eagerly(self.chip.eager_host, mode, T):
            fixed += gpu_host.ops_seconds(self.chip.eager_host, gpu_host.EXTRA_OPS)
        out: dict[int, list[StageArrays]] = {0: [stage_of([emb], steps, self.memory, fixed=fixed)]}
        rows = d.b_dev  # the LM head runs on the last position of each sequence
        head = [
            p.elementwise(2 * rows * h * ab, rows * h * ab),
            self.dense.gemm(rows, d.vocab, h),
            p.elementwise(rows * d.vocab * 4, rows * 8),
        ]
        out.setdefault(last_stage, []).append(stage_of(head, steps, self.memory))
        return out


def _ignored_options(w: Workload) -> list[str]:
    """Workload options that only the PLENA model reads, when set away from their defaults."""
    from plena_opt.estimate.plan import Workload

    d = Workload()
    out = []
    if w.frequency_hz != d.frequency_hz:
        out.append("frequency_hz applies to PLENA chips; a GPU runs at its datasheet rates")
    if w.overlap_policy != d.overlap_policy:
        out.append("overlap_policy applies to PLENA chips; a GPU is priced kernel by kernel")
    if w.include_lm_head:
        out.append("include_lm_head: a GPU always prices the LM head and sampling")
    return out


def gpu_energy_per_token(cost: PlanCost) -> float:
    """Joules per generated token: every device draws ``busy_watts`` while its kernels run and
    ``idle_watts`` for the rest of the decode (collectives, pipeline bubbles, host overhead)."""
    ctx, plan = cost.ctx, cost.plan
    pw = ctx.chip.power
    busy_w, idle_w = pw.busy_watts.value, pw.idle_watts.value
    dec = cost.decode
    total_s = cost.decode_seconds
    per_stage_devices = plan.world_size / plan.pp
    busy = 0.0
    for exs in dec.extras.values():
        for ex in exs:
            busy += busy_seconds(ex)
    for count, la in zip(dec.layers_per_kind, dec.layer.values(), strict=True):
        busy += count * busy_seconds(la)
    host = ctx.pricer.perf.step_s  # host overhead is not busy
    if gpu_host.runs_eagerly(ctx.chip.eager_host, "decode", cost.shard.b_dev):
        host += ctx.pricer.eager_host_seconds(ctx.model, cost.plan.tp)
    busy -= host * ctx.workload.output_seq_len
    busy_dev = busy * per_stage_devices  # device-seconds of kernel work over the decode
    idle_dev = max(total_s * plan.world_size - busy_dev, 0.0)
    joules = busy_dev * busy_w + idle_dev * idle_w
    return joules / (cost.shard.micro * ctx.workload.output_seq_len)
