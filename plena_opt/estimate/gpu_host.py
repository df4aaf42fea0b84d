"""Host time of an eager forward on a GPU: what a vLLM step pays when it runs without CUDA graphs.

vLLM captures decode-only steps in CUDA graphs (V0: decode batches only; V1: steps of up to
``cudagraph_capture_sizes``' largest size, 512 tokens by default), so the host launches one graph.
A step that carries prefill tokens (every prompt chunk of a server: prompts are longer than 512
tokens in practice; V0 never graphs them) runs the model's PyTorch forward eagerly: the host
dispatches every op of every layer. That host time is priced as
``eager_host.seconds_per_op`` × ATen / CUDA custom ops + ``eager_host.seconds_per_triton_op`` ×
vLLM Triton kernel calls (their Python wrapper, config lookup and JIT launcher), with the ops
per layer counted below from how vLLM runs each layer kind (``vllm/model_executor/models/
llama.py``, ``qwen3_moe.py``, ``deepseek_v2.py``; ``layers/fused_moe/fused_moe.py``,
``layers/quantization/utils/fp8_utils.py``; views and allocations launch nothing). The chip
profile's constants are fitted on fig09's eager-mode decode rows
(``plena_opt.validate.calibrate_host``); the host time is added to the step (the eager-mode
TTFTs at batch 1 equal kernels + host time within a few ms on all four fig09 models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.chip.gpu.profile import EagerHost
    from plena_opt.models import ModelSpec

# vLLM routes DeepSeek-V2/V3 experts with ``grouped_topk`` (``use_grouped_topk=True`` in
# ``DeepseekV2MoE``), written in plain PyTorch (``fused_moe.grouped_topk``).
GROUPED_TOPK_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3"})
# grouped_topk: sigmoid/softmax, + correction bias, group top-2 + sum, group top-k, zeros +
# scatter (group mask), expand + masked_fill, top-k, gather weights, sum + divide, scale.
GROUPED_TOPK_OPS = 12


@dataclass(frozen=True)
class EagerOps:
    """Launches of one layer's eager forward: ``ops`` ATen / CUDA custom ops, ``triton`` vLLM
    Triton kernel calls."""

    ops: int
    triton: int

    def __add__(self, other: EagerOps) -> EagerOps:
        return EagerOps(self.ops + other.ops, self.triton + other.triton)

    def __mul__(self, n: int) -> EagerOps:
        return EagerOps(self.ops * n, self.triton * n)


def _linears(n: int, block_fp8: bool) -> EagerOps:
    """``n`` GEMMs; a block-scaled fp8 GEMM first quantises its activation per 128-group
    (``per_token_group_quant_fp8``, a Triton kernel)."""
    return EagerOps(n, n if block_fp8 else 0)


def attention_ops(m: ModelSpec, block_fp8: bool) -> EagerOps:
    """Attention half without its norm and all-reduce."""
    if m.is_mla:
        # q_a (if q_lora), q_b, kv_a_proj_with_mqa, o_proj GEMMs; q_a / kv_a RMSNorms; RoPE;
        # q / k concatenations (2); W_UK bmm; concat_and_cache_mla; MLA decode / prefill
        # kernel; W_UV bmm
        gemms = 4 if m.q_lora_rank else 3
        return _linears(gemms, block_fp8) + EagerOps(2 + 1 + 2 + 1 + 1 + 1 + 1, 0)
    # QKV GEMM, O GEMM; RoPE, reshape_and_cache_flash, flash attention; Qwen3: q_norm, k_norm
    return _linears(2, False) + EagerOps(3 + (2 if m.qk_norm else 0), 0)


def dense_mlp_ops(block_fp8: bool) -> EagerOps:
    """gate_up GEMM, SiLU·mul, down GEMM."""
    return _linears(2, block_fp8) + EagerOps(1, 0)


def moe_ops(m: ModelSpec, block_fp8: bool) -> EagerOps:
    """Routed experts (vLLM ``FusedMoE``, Triton path) + shared experts."""
    out = EagerOps(1, 0)  # router GEMM (bf16, replicated)
    if m.model_type in GROUPED_TOPK_MODEL_TYPES:
        out += EagerOps(GROUPED_TOPK_OPS, 0)
    else:  # topk_softmax; renormalise (sum, divide)
        out += EagerOps(3, 0)
    # moe_align_block_size, SiLU·mul, moe_sum; the two fused_moe_kernel Triton calls (each
    # after a per-token-group activation quantisation when block-scaled)
    out += EagerOps(3, 2 + (2 if block_fp8 else 0))
    if m.num_shared_experts:
        out += dense_mlp_ops(block_fp8) + EagerOps(1, 0)  # + add shared and routed
    return out


def layer_ops(m: ModelSpec, moe: bool, tp: int, block_fp8: bool) -> EagerOps:
    """One decoder layer: norms, attention, MLP or MoE, and the TP all-reduces (one after
    attention, one after the MLP / MoE)."""
    out = EagerOps(m.norms_per_layer, 0) + attention_ops(m, block_fp8)
    out += moe_ops(m, block_fp8) if moe else dense_mlp_ops(block_fp8)
    if tp > 1:
        out += EagerOps(2, 0)
    return out


# embedding (+ its TP all-reduce), final norm, LM head GEMM, logits gather
EXTRA_OPS = EagerOps(4, 0)


def ops_seconds(host: EagerHost | None, ops: EagerOps) -> float:
    """Host seconds of ``ops`` on a chip (0 without an ``eager_host`` profile section)."""
    if host is None:
        return 0.0
    return ops.ops * host.seconds_per_op.value + ops.triton * host.seconds_per_triton_op.value


MODEL_OPS_KEPT = 64  # (model object, tp, block) entries ``model_ops`` keeps per process
_MODEL_OPS: dict[tuple[int, int, bool], tuple[ModelSpec, EagerOps]] = {}


def model_ops(m: ModelSpec, tp: int, block_fp8: bool) -> EagerOps:
    """Launches of one whole eager forward (every layer + embedding and LM head), kept per
    process by the model object's identity (the entry pins the model, so its id stays unique),
    ``tp`` and ``block_fp8``: a function of those alone, read by every fresh step model
    (``EvaluatorStepCosts.host_seconds``). At most ``MODEL_OPS_KEPT`` entries (the table starts
    afresh beyond)."""
    key = (id(m), tp, block_fp8)
    hit = _MODEL_OPS.get(key)
    if hit is not None and hit[0] is m:
        return hit[1]
    out = count_model_ops(m, tp, block_fp8)
    if len(_MODEL_OPS) >= MODEL_OPS_KEPT:
        _MODEL_OPS.clear()
    _MODEL_OPS[key] = (m, out)
    return out


def count_model_ops(m: ModelSpec, tp: int, block_fp8: bool) -> EagerOps:
    """``model_ops`` counted afresh (no table)."""
    from plena_opt.estimate.layer import layer_kind_runs

    out = EXTRA_OPS
    for kind, count in layer_kind_runs(m):
        out += layer_ops(m, kind.moe, tp, block_fp8) * count
    return out


def runs_eagerly(host: EagerHost | None, mode: str, tokens: int) -> bool:
    """Whether a step of ``mode`` with ``tokens`` tokens per device skips the CUDA graph."""
    if host is None:
        return False
    return mode == "prefill" or tokens > host.cuda_graph_max_tokens.value
