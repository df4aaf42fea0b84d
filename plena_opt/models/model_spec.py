"""``ModelSpec``: the decoder hyper-parameters the analytic model uses (analytic-model §4.1).

Layers are stored as runs of identical layers (``LayerRun``), so a model's memory does not grow
with its layer count (a uniform 4096-layer model is one run).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from plena_opt.models.layer_runs import LayerRun

Family = Literal["llama", "moe"]
Attention = Literal["gqa", "mla"]


class ModelSpec(BaseModel):
    """A validated decoder model. Sizes are element counts; windows/chunks are in tokens.

    ``num_experts`` is 0 for a dense model; ``top_k`` is 1 then. ``family`` is the pricing family
    of the reference (``moe`` for experts, sliding layers or gpt-oss). ``attention`` is ``gqa``
    (MHA/GQA/MQA by ``num_kv_heads``) or ``mla`` (multi-head latent attention: the ``*_rank`` and
    ``qk_*``/``v_head_dim`` fields; ``head_dim`` is then ``qk_nope + qk_rope``). Shared experts
    form one dense FFN of ``shared_expert_intermediate_size`` in every MoE layer. Build it with
    :meth:`from_hf_config`, which applies the §4.1 rules and the range checks.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    model_type: str
    family: Family
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    moe_intermediate_size: int
    vocab_size: int
    num_experts: int
    top_k: int
    layer_runs: tuple[LayerRun, ...]
    sliding_window: int
    tie_word_embeddings: bool
    attention: Attention = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    shared_expert_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_gate: bool = False
    attention_chunk_size: int = 0
    gated_mlp: bool = True
    parallel_block: bool = False
    attention_bias: bool = False
    output_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    not_modelled: tuple[str, ...] = ()
    # DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5): a lightning indexer of
    # ``index_n_heads`` heads of ``index_head_dim`` scores every cached key, and each query
    # attends only its ``index_topk`` best keys. 0: dense attention.
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # Gated DeltaNet (``linear_attention`` layers: Qwen3-Next, Qwen3.5): per sequence a fixed
    # state of ``linear_num_value_heads × linear_key_head_dim × linear_value_head_dim`` and a
    # short-convolution window of ``linear_conv_kernel_dim − 1`` tokens; no KV cache.
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    linear_state_bytes: int = 2  # bytes per recurrent-state element (4: ``mamba_ssm_dtype`` fp32)
    attn_output_gate: bool = False  # Qwen3-Next/3.5: the query projection also yields a gate
    # the checkpoint's weight format and where it was read (``models.checkpoint``)
    checkpoint_precision: str = "bf16"
    checkpoint_source: str = "no quantization_config"
    checkpoint_experts_only: bool = False  # attention etc. stay bf16 (gpt-oss MXFP4)
    # MLA projections the checkpoint keeps in bf16 (``models.checkpoint.BF16_ATTENTION``: NVIDIA's
    # NVFP4 DeepSeek ids); applies where a plan runs the checkpoint's own format
    checkpoint_bf16_attention: str = ""
    # per-tensor fp8 activation scales calibrated into the checkpoint (``input_scale``: NVIDIA
    # ModelOpt ``…-FP8`` ids, ``models.checkpoint.fp8_static_input``); applies where a plan runs
    # the checkpoint's own format
    checkpoint_fp8_static_input: bool = False
    # the KV-cache format the checkpoint declares (``models.checkpoint.checkpoint_kv_format`` /
    # ``config_kv_format``: a ModelOpt ``kv_cache_quant_algo`` "FP8" → "fp8"; None: bf16); an engine
    # whose default KV dtype inherits it (``models.checkpoint.engine_inherits_kv``) stores it
    checkpoint_kv_precision: str | None = None

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], name: str) -> ModelSpec:
        """Parse a Hugging Face ``config.json`` dict; PlenaInputError on unsupported input."""
        from plena_opt.models.checkpoint import (
            checkpoint_precision,
            config_kv_format,
            experts_only,
        )
        from plena_opt.models.hf_config import parse_hf_config

        fields = parse_hf_config(cfg, name)  # checks the config first (a dict, the fields)
        fmt, source = checkpoint_precision(cfg)
        return cls(**fields, checkpoint_precision=fmt, checkpoint_source=source,
                   checkpoint_experts_only=experts_only(cfg),
                   checkpoint_kv_precision=config_kv_format(cfg))  # fmt: skip

    # -- per-layer views (expand the runs; O(layers), for reports and small models) ----------
    @property
    def layer_types(self) -> tuple[str, ...]:
        """Attention type of every layer, in order."""
        return tuple(r.attention for r in self.layer_runs for _ in range(r.count))

    @property
    def mlp_types(self) -> tuple[str, ...]:
        """MLP type (``moe``/``ffn``) of every layer, in order."""
        return tuple(r.mlp for r in self.layer_runs for _ in range(r.count))

    def _count(self, *, attention: str | None = None, mlp: str | None = None) -> int:
        return sum(
            r.count
            for r in self.layer_runs
            if (attention is None or r.attention == attention) and (mlp is None or r.mlp == mlp)
        )

    @property
    def moe_layers(self) -> int:
        """Number of layers whose MLP is the routed-expert block."""
        return self._count(mlp="moe")

    @property
    def sliding_layers(self) -> int:
        """Number of sliding-window attention layers."""
        return self._count(attention="sliding_attention")

    @property
    def chunked_layers(self) -> int:
        """Number of chunked (block-local) attention layers."""
        return self._count(attention="chunked_attention")

    @property
    def linear_layers(self) -> int:
        """Number of linear-attention (Gated DeltaNet) layers."""
        return self._count(attention="linear_attention")

    @property
    def is_sparse(self) -> bool:
        """DeepSeek sparse attention: an indexer picks ``index_topk`` keys per query."""
        return self.index_topk > 0

    @property
    def linear_conv_channels(self) -> int:
        """Channels of a Gated DeltaNet layer's short convolution (q, k and v)."""
        return (
            2 * self.linear_num_key_heads * self.linear_key_head_dim
            + self.linear_num_value_heads * self.linear_value_head_dim
        )

    @property
    def linear_state_elements(self) -> int:
        """Recurrent-state elements one sequence holds in one Gated DeltaNet layer."""
        return self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim

    @property
    def linear_conv_state_elements(self) -> int:
        """Convolution-window elements one sequence holds in one Gated DeltaNet layer."""
        return max(self.linear_conv_kernel_dim - 1, 0) * self.linear_conv_channels

    @property
    def is_moe(self) -> bool:
        """True if any layer routes tokens to experts."""
        return self.num_experts > 0 and self.moe_layers > 0

    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def kv_latent_dim(self) -> int:
        """MLA: cached elements per token per layer (``kv_lora_rank + qk_rope_head_dim``)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one head's value/output (``v_head_dim`` for MLA, else ``head_dim``)."""
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def attention_kind(self) -> str:
        """MHA, GQA, MQA or MLA; ``+DSA`` with a sparse-attention indexer, ``+GDN`` when Gated
        DeltaNet layers sit between the softmax-attention layers."""
        if self.is_mla:
            kind = "MLA+DSA" if self.is_sparse else "MLA"
        elif self.num_kv_heads == self.num_heads:
            kind = "MHA"
        else:
            kind = "MQA" if self.num_kv_heads == 1 else "GQA"
        return kind + "+GDN" if self.linear_layers else kind

    def kv_elements_per_token(self, attention: str = "full_attention") -> int:
        """KV-cache elements one token adds to one layer (whole model, before any TP split).

        A linear-attention layer adds none (its state is fixed, ``linear_state_elements``);
        DSA adds the indexer's key (``index_head_dim``) beside the attention cache."""
        if attention == "linear_attention":
            return 0
        if self.is_mla:
            return self.kv_latent_dim + self.index_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def describe(self) -> dict[str, Any]:
        """The ``model`` field of the reference JSON output (golden distributed.json).

        Features beyond the reference add keys only when present (``attention: "MLA"`` with its
        ranks, ``shared_expert_intermediate_size``, ``chunked_layers``), so reference models
        describe exactly as the golden vectors do.
        """
        out = self._reference_description()
        if self.is_mla:
            out.update(
                attention="MLA",
                kv_lora_rank=self.kv_lora_rank,
                q_lora_rank=self.q_lora_rank,
                qk_rope_head_dim=self.qk_rope_head_dim,
                v_head_dim=self.v_head_dim,
            )
        if self.shared_expert_intermediate_size:
            out["shared_expert_intermediate_size"] = self.shared_expert_intermediate_size
        if self.chunked_layers:
            out.update(
                chunked_layers=self.chunked_layers, attention_chunk_size=self.attention_chunk_size
            )
        if self.is_sparse:
            out.update(index_topk=self.index_topk, index_n_heads=self.index_n_heads)
        if self.linear_layers:
            out["linear_attention_layers"] = self.linear_layers
        return out

    def _reference_description(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "heads": self.num_heads,
            "kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "moe_layers": self.moe_layers,
            "num_experts": self.num_experts,
            "experts_per_token": self.top_k,
            "sliding_layers": self.sliding_layers,
        }
