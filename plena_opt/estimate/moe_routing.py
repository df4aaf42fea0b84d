"""MoE token-routing sources: balanced rows, seeded random rows, power-law rows or a user
trace (analytic-model §4.5). Not NoC routing, which is ``deepstack.routing``."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from deepstack import moe as ds_moe
from deepstack.power_law import power_law_counts, power_law_rows

from plena_opt.errors import PlenaInputError
from plena_opt.vocabulary import MOE_ROUTING_MODES as ROUTING_MODES

BUILTIN_TRACES = ("qwen3_235b", "deepseek_v3")
RANDOM_SEED = 0  # the reference seeds its random router with 0


def is_trace_path(routing: str) -> bool:
    return routing.endswith((".npy", ".csv")) or "/" in routing or Path(routing).is_file()


def check_routing(routing: str) -> None:
    """Reject unknown routing modes with the reference message and missing trace files (for
    every model: a routing flag that means nothing is still a mistake)."""
    if routing in ROUTING_MODES:
        return
    if is_trace_path(routing):
        p = Path(routing)
        if not p.is_file():
            what = "is a folder, not a file" if p.is_dir() else "does not exist"
            raise PlenaInputError("routing", f"routing trace file {routing!r} {what}")
        return
    raise PlenaInputError(
        "routing",
        f"unknown routing mode {routing!r}; expected one of {', '.join(ROUTING_MODES)}",
    )


def load_trace(path: str | Path, num_experts: int, top_k: int) -> np.ndarray:
    """Read a routing trace: one row per token, expert ids in the first ``top_k`` columns.

    ``.npy`` (integer array; a 3-D+ array such as DeepStack's [layers, tokens, k] is flattened
    row-major into token rows, network-model §11.4) or CSV (comma-separated integers). The trace
    must have at least ``top_k`` columns, ids in ``[0, num_experts)`` and distinct experts per
    row.
    """
    p = Path(path)
    if p.is_dir():
        raise PlenaInputError("routing", f"routing trace {str(p)!r} is a folder, not a file")
    if not p.is_file():
        raise PlenaInputError("routing", f"routing trace file {str(p)!r} does not exist")
    try:
        if p.suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy warns on an empty file; we say so below
                arr = np.loadtxt(p, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, ValueError) as exc:
        kind = "a .npy array" if p.suffix == ".npy" else "comma-separated integers"
        raise PlenaInputError(
            "routing", f"cannot read routing trace {str(p)!r} as {kind}: {exc}"
        ) from None
    if arr.size == 0:
        raise PlenaInputError("routing", f"routing trace {str(p)!r} holds no rows")
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
    rows = np.ascontiguousarray(arr[:, :top_k], dtype=np.int64)
    if top_k > 1:
        ordered = np.sort(rows, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if bad.size:
            raise PlenaInputError(
                "routing",
                f"routing trace row {int(bad[0])} names an expert twice; a token's top-{top_k} "
                "experts must be distinct",
            )
    return rows


def routing_rows(
    routing: str, num_experts: int, top_k: int, tokens: int, alpha: float = 1.2
) -> np.ndarray:
    """At least ``tokens`` routing rows for the given source (``alpha``: the power-law exponent
    of ``power_law`` routing; its rows realise one step of ``tokens`` tokens, in random order)."""
    if routing == "balanced":
        return ds_moe.balanced_rows(tokens, num_experts, top_k)
    if routing == "power_law":
        n = max(int(tokens), 1)
        counts = power_law_counts(n, num_experts, top_k, alpha, seed=RANDOM_SEED)
        return power_law_rows(counts, n, seed=RANDOM_SEED)
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
