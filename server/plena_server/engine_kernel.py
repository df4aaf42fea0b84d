"""The engine and MoE kernel a request's ``ServingLoad`` names, as ``Workload`` fields
(``plena_opt.api.moe_kernel``)."""

from __future__ import annotations

from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api.moe_kernel import ENGINES, FUSED_QUANT_ENGINES, check_moe_kernel
from plena_opt.errors import PlenaInputError

__all__ = ["engine_kernel"]


def engine_kernel(load: pb.ServingLoad | None) -> dict[str, Any]:
    """The ``Workload`` engine / moe_kernel / fused_input_quant a request's ``load`` names
    (empty: vLLM and its default kernel; an unknown engine is left to the load's own check,
    naming load.engine)."""
    out: dict[str, Any] = {}
    if load is None:
        return out
    if load.engine in ENGINES:  # its MoE kernels and its fused input quantisation
        out["engine"] = load.engine
        out["fused_input_quant"] = load.engine in FUSED_QUANT_ENGINES
    if load.moe_kernel:
        try:
            out["moe_kernel"] = check_moe_kernel(load.moe_kernel)
        except PlenaInputError as exc:
            raise PlenaInputError(f"load.{exc.field}", exc.rule) from exc
    return out
