"""MoE routing sources: balanced rows, seeded random rows or a user trace (analytic-model §4.5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from deepstack import moe as ds_moe

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import ROUTING_MODES

BUILTIN_TRACES = ("qwen3_235b", "deepseek_v3")
RANDOM_SEED = 0  # the reference seeds its random router with 0


def is_trace_path(routing: str) -> bool:
    return routing.endswith((".npy", ".csv")) or "/" in routing or Path(routing).is_file()


def check_routing(routing: str) -> None:
    """Reject unknown routing modes with the reference message; traces are checked on load."""
    if routing in ROUTING_MODES or is_trace_path(routing):
        return
    raise PlenaInputError(
        "routing",
        f"unknown routing mode {routing!r}; expected one of {', '.join(ROUTING_MODES)}",
    )


def load_trace(path: str | Path, num_experts: int, top_k: int) -> np.ndarray:
    """Read a routing trace: one row per token, expert ids in the first ``top_k`` columns.

    ``.npy`` (integer array, 2-D or 3-D+ flattened to rows) or CSV (comma-separated integers).
    The trace must have at least ``top_k`` columns and ids in ``[0, num_experts)``.
    """
    p = Path(path)
    if not p.is_file():
        raise PlenaInputError("routing", f"routing trace file {str(p)!r} does not exist")
    try:
        if p.suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
        else:
            arr = np.loadtxt(p, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, ValueError) as exc:
        raise PlenaInputError("routing", f"cannot read routing trace {str(p)!r}: {exc}") from exc
    if arr.ndim < 2 or not np.issubdtype(arr.dtype, np.integer):
        raise PlenaInputError(
            "routing", "a routing trace must be an integer array with one row per token"
        )
    arr = arr.reshape(-1, arr.shape[-1])
    if arr.shape[1] < top_k:
        raise PlenaInputError(
            "routing",
            f"routing trace has top-{arr.shape[1]} rows but the model routes each token to "
            f"{top_k} experts",
        )
    if arr.size and (arr.min() < 0 or arr.max() >= num_experts):
        raise PlenaInputError(
            "routing",
            f"routing trace names expert ids outside [0, {num_experts}) for a model with "
            f"{num_experts} experts",
        )
    return np.ascontiguousarray(arr[:, :top_k], dtype=np.int64)


def routing_rows(routing: str, num_experts: int, top_k: int, tokens: int) -> np.ndarray:
    """At least ``tokens`` routing rows for the given source."""
    if routing == "balanced":
        return ds_moe.balanced_rows(tokens, num_experts, top_k)
    if routing == "random":
        return ds_moe.random_rows(tokens, num_experts, top_k, seed=RANDOM_SEED)
    if routing in BUILTIN_TRACES:
        raise PlenaInputError(
            "routing",
            f"routing trace {routing!r} is not available: plena-opt ships no DeepStack routing "
            "traces; pass a trace file (.npy or CSV, expert ids per token) instead",
        )
    rows = load_trace(routing, num_experts, top_k)
    if rows.shape[0] < tokens:
        raise PlenaInputError(
            "routing",
            f"routing trace has {rows.shape[0]} rows but the plan routes {tokens} tokens "
            "per micro-batch",
        )
    return rows
