"""The routed EP all-to-all pattern: token counts per (source, destination) EP rank from MoE
token-routing rows (network-model §8.2, below the closed-form threshold)."""

from __future__ import annotations

import math

import numpy as np

from .errors import ProfileError
from .placement import ParallelScheme, groups
from .routing import Router
from .stage import StagePattern

# micro-batch tokens at or above which the EP all-to-all uses the uniform closed form (§8.2)
EP_ESTIMATE_TOKENS = 8192


def uniform_bytes_per_pair(
    scheme: ParallelScheme,
    micro_batch: int,
    seq: int,
    top_k: int,
    bytes_per_token: int,
    imbalance: float,
) -> int:
    """Closed form of §8.2: ``ceil(bs·seq/(dp·sp·ep))·top_k/ep·bytes_per_token·imbalance`` bytes
    per ordered pair of an EP group (truncated)."""
    ep = scheme.ep
    per_pair = (
        math.ceil(micro_batch * seq / scheme.dp / scheme.sp / ep)
        * top_k
        / ep
        * bytes_per_token
        * imbalance
    )
    return int(per_pair)


def active_rows(rows: np.ndarray | None, total: int, num_experts: int, top_k: int) -> np.ndarray:
    """The first ``total`` tokens' ``top_k`` expert ids of ``rows`` ([tokens, ≥top_k]; default the
    balanced rows) as a contiguous int64 array; a ``ProfileError`` names ``rows`` otherwise."""
    if rows is None:
        from .moe import balanced_rows

        rows = balanced_rows(total, num_experts, top_k)
    rows = np.asarray(rows)
    if rows.ndim < 2:
        raise ProfileError("rows", "routing rows must be a 2-D array [tokens, top_k]")
    rows = rows.reshape(-1, rows.shape[-1])
    if rows.shape[0] < total:
        raise ProfileError(
            "rows", f"routing rows hold {rows.shape[0]} tokens; micro_batch·seq = {total}"
        )
    return np.ascontiguousarray(rows[:total, :top_k], dtype=np.int64)


def _slot_counts(dst_rank: np.ndarray, ep: int) -> np.ndarray:
    """[ep, ep] tokens sent from each source rank (tokens split evenly, in order) to each remote
    destination rank; one copy per distinct destination of a token."""
    n = dst_rank.shape[0]
    mask = np.zeros((n, ep), dtype=bool)
    mask[np.repeat(np.arange(n), dst_rank.shape[1]), dst_rank.ravel()] = True
    base, rem = divmod(n, ep)
    owner = np.repeat(np.arange(ep), [base + (1 if s < rem else 0) for s in range(ep)])
    counts = np.zeros((ep, ep), dtype=np.int64)
    np.add.at(counts, owner, mask.astype(np.int64))
    np.fill_diagonal(counts, 0)
    return counts


def routed_pattern(
    router: Router, scheme: ParallelScheme, active: np.ndarray, num_experts: int
) -> tuple[StagePattern, int]:
    """Token counts per (src, dst) EP rank from routing rows ``active`` ([tokens, top_k] expert
    ids): EP group n uses token window ``n mod (dp·sp)``; expert e lives on rank
    ``floor(e·ep/num_experts)`` (network-model §8.2).

    Returns the pattern and the busiest rank's token copies: the most any rank of any EP group
    sends to, or receives from, the other ranks of its group (the volume an all-to-all that
    ends with its largest rank is timed by)."""
    ep = scheme.ep
    total = active.shape[0]
    slots = scheme.dp * scheme.sp
    window = math.ceil(total / slots)
    dst_rank = np.clip((active * ep) // num_experts, 0, ep - 1)
    per_slot: list[np.ndarray | None] = []
    for slot in range(slots):
        start, end = slot * window, min(slot * window + window, total)
        per_slot.append(_slot_counts(dst_rank[start:end], ep) if start < end else None)
    g = groups(scheme, "ep")
    src_l, dst_l, w_l = [], [], []
    used = [c for c in per_slot[: g.shape[0]] if c is not None]  # group n uses slot n mod slots
    busiest = max(
        (max(int(c.sum(axis=1).max()), int(c.sum(axis=0).max())) for c in used), default=0
    )
    ii, jj = np.meshgrid(np.arange(ep), np.arange(ep), indexing="ij")
    for gi in range(g.shape[0]):
        counts = per_slot[gi % slots]
        if counts is None:
            continue
        src_l.append(g[gi][ii].ravel())
        dst_l.append(g[gi][jj].ravel())
        w_l.append(counts.ravel())
    if not src_l:
        return StagePattern(router, np.zeros(0), np.zeros(0), np.zeros(0)), 0
    pattern = StagePattern(
        router, np.concatenate(src_l), np.concatenate(dst_l), np.concatenate(w_l)
    )
    return pattern, busiest
