"""Runs of identical decoder layers (``LayerRun``): how ``ModelSpec`` stores its layers, and the
compression of per-layer type lists into runs (used by the ``config.json`` parser).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

LayerType = Literal["full_attention", "sliding_attention", "chunked_attention", "linear_attention"]
MlpType = Literal["moe", "ffn"]


class LayerRun(BaseModel):
    """``count`` consecutive layers with the same attention and MLP type."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attention: LayerType
    mlp: MlpType
    count: int


def runs_from_lists(attention: list[str], mlp: list[str]) -> tuple[LayerRun, ...]:
    """Compress per-layer type lists (equal length) into runs."""
    out: list[LayerRun] = []
    for a, m in zip(attention, mlp, strict=True):
        if out and out[-1].attention == a and out[-1].mlp == m:
            out[-1] = LayerRun(attention=a, mlp=m, count=out[-1].count + 1)
        else:
            out.append(LayerRun(attention=a, mlp=m, count=1))
    return tuple(out)
