"""``ModelSpec``: the decoder hyper-parameters the analytic model uses (analytic-model §4.1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

LayerType = Literal["full_attention", "sliding_attention"]
MlpType = Literal["moe", "ffn"]
Family = Literal["llama", "moe"]


class ModelSpec(BaseModel):
    """A validated decoder model. Sizes are element counts; ``sliding_window`` is in tokens.

    ``num_experts`` is 0 for a dense model; ``top_k`` is 1 then. ``layer_types`` / ``mlp_types``
    hold one entry per layer. Build it with :meth:`from_hf_config` (which applies the §4.1 rules).
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
    layer_types: tuple[LayerType, ...]
    mlp_types: tuple[MlpType, ...]
    sliding_window: int
    tie_word_embeddings: bool

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], name: str) -> ModelSpec:
        """Parse a Hugging Face ``config.json`` dict; PlenaInputError on unsupported input."""
        from plena_opt.models.hf_config import parse_hf_config

        return cls(**parse_hf_config(cfg, name))

    @property
    def moe_layers(self) -> int:
        """Number of layers whose MLP is the routed-expert block."""
        return self.mlp_types.count("moe")

    @property
    def sliding_layers(self) -> int:
        """Number of sliding-window attention layers."""
        return self.layer_types.count("sliding_attention")

    @property
    def is_moe(self) -> bool:
        """True if any layer routes tokens to experts."""
        return self.num_experts > 0 and self.moe_layers > 0

    def describe(self) -> dict[str, Any]:
        """The ``model`` field of the reference JSON output (golden distributed.json)."""
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
