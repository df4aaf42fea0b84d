"""The routed EP all-to-all pattern: token counts per (source, destination) EP rank from MoE
token-routing rows (network-model §8.2, below the closed-form threshold)."""

from __future__ import annotations

import math

import numpy as np

from .errors import ProfileError
from .placement import ParallelScheme, groups
from .routing import Router
from .stage import StagePattern
from .switch_loads import group_flow_loads
from .unique import sorted_unique

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


def remote_rank_share(num_experts: int, top_k: int, ep: int, imbalance: float = 1.0) -> float:
    """Probability that a token's ``top_k`` experts, drawn without replacement from
    ``num_experts`` spread evenly over ``ep`` ranks, include one on a given remote rank that holds
    ``imbalance`` times its even share of the expert load (its ``M/ep`` experts counted as
    ``imbalance·M/ep``): ``1 − Π_{i<k} (M − imbalance·M/ep − i)/(M − i)`` (each factor ≥ 0).

    At ``imbalance`` 1, ``(ep − 1)`` times it is the expected number of distinct remote
    destination ranks of a token (5.29 ranks with its own, 4.63 without, for top-8 of 256
    experts over 8 ranks), the copies the routed branch of §8.2 sends; the busiest rank's
    expected copies ``k·imbalance/ep`` are the closed form's (``uniform_bytes_per_pair``)."""
    if num_experts <= 0 or not 0 < top_k <= num_experts or ep <= 0 or imbalance < 0:
        raise ProfileError(
            "num_experts", f"need 0 < top_k ≤ num_experts, ep > 0, imbalance ≥ 0 "
            f"(got {num_experts=}, {top_k=}, {ep=}, {imbalance=})",
        )  # fmt: skip
    held = imbalance * num_experts / ep
    miss = 1.0
    for i in range(top_k):
        miss *= max(num_experts - held - i, 0.0) / (num_experts - i)
    return 1.0 - miss


def distinct_bytes_per_pair(scheme: ParallelScheme, micro_batch: int, seq: int, num_experts: int,
                            top_k: int, bytes_per_token: int, imbalance: float) -> int:  # fmt: skip
    """The uniform closed form counting one copy per distinct destination rank (as the routed
    branch and GPU engines' dispatch do) instead of ``top_k/ep``: ``ceil(bs·seq/(dp·sp·ep)) ·
    remote_rank_share(M, k, ep, imbalance) · bytes_per_token`` per ordered pair (truncated)."""
    local = math.ceil(micro_batch * seq / scheme.dp / scheme.sp / scheme.ep)
    share = remote_rank_share(num_experts, top_k, scheme.ep, imbalance)
    return int(local * share * bytes_per_token)


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


def _slot_stack(active: np.ndarray, ep: int, num_experts: int, slots: int) -> np.ndarray:
    """[slots, ep, ep] token counts of each token window (``_slot_counts``); -1 everywhere for a
    window with no tokens."""
    total = active.shape[0]
    window = math.ceil(total / slots)
    dst_rank = np.clip((active * ep) // num_experts, 0, ep - 1)
    stack = np.full((slots, ep, ep), -1, dtype=np.int64)
    for slot in range(slots):
        start, end = slot * window, min(slot * window + window, total)
        if start < end:
            stack[slot] = _slot_counts(dst_rank[start:end], ep)
    return stack


def _slot_pairs(
    active: np.ndarray, ep: int, num_experts: int, slots: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero entries of ``_slot_stack`` without the dense [slots, ep, ep] array (32 GiB
    at ep = 65,536): (slot, source·ep + destination, tokens) with sources ≠ destinations, sorted
    by slot then pair. A token's source rank is its owner under the even in-order split of its
    window; each distinct destination of a token gets one copy."""
    total = active.shape[0]
    window = math.ceil(total / slots)
    dst_rank = np.clip((active * ep) // num_experts, 0, ep - 1)
    token = np.arange(total, dtype=np.int64)
    slot = token // window
    t = token - slot * window  # position in the slot's window
    n = np.minimum(window, total - slot * window)  # tokens in the window
    base, rem = n // ep, n % ep
    big = rem * (base + 1)  # the first ``rem`` ranks own ``base + 1`` tokens each
    owner = np.where(t < big, t // (base + 1), rem + (t - big) // np.maximum(base, 1))
    k = active.shape[1]
    tok_rep, dst = np.repeat(token, k), dst_rank.ravel()
    copies = sorted_unique(tok_rep * ep + dst)  # one copy per (token, distinct destination)
    tok, d = copies // ep, copies % ep
    s_c, o_c = slot[tok], owner[tok]
    remote = o_c != d
    key = s_c[remote] * (ep * ep) + o_c[remote] * ep + d[remote]
    uniq, count = np.unique(key, return_counts=True)
    return uniq // (ep * ep), uniq % (ep * ep), count.astype(np.int64)


def routed_pattern(
    router: Router, scheme: ParallelScheme, active: np.ndarray, num_experts: int
) -> tuple[StagePattern, int]:
    """Token counts per (src, dst) EP rank from routing rows ``active`` ([tokens, top_k] expert
    ids): EP group n uses token window ``n mod (dp·sp)``; expert e lives on rank
    ``floor(e·ep/num_experts)`` (network-model §8.2).

    Returns the pattern and the busiest rank's token copies: the most any rank of any EP group
    sends to, or receives from, the other ranks of its group (the volume an all-to-all that
    ends with its largest rank is timed by). On an all-switch NoC the per-level link loads come
    from each group's count matrix (``group_flow_loads``) without listing the pairs."""
    ep = scheme.ep
    slots = scheme.dp * scheme.sp
    g = groups(scheme, "ep")
    total = active.shape[0]
    if total == 0:
        return StagePattern(router, np.zeros(0), np.zeros(0), np.zeros(0)), 0
    p_slot, pair, count = _slot_pairs(active, ep, num_experts, slots)
    filled = np.zeros(slots, dtype=bool)  # windows with tokens
    filled[: math.ceil(total / math.ceil(total / slots))] = True
    used = p_slot < min(slots, g.shape[0])  # group n uses slot n mod slots
    busiest = 0
    if used.any():
        sent = np.bincount(p_slot[used] * ep + pair[used] // ep, count[used])
        got = np.bincount(p_slot[used] * ep + pair[used] % ep, count[used])
        busiest = int(max(sent.max(), got.max()))
    slot_of = np.arange(g.shape[0]) % slots
    valid = filled[slot_of]
    members, slot_of = g[valid], slot_of[valid]
    if not len(members):
        return StagePattern(router, np.zeros(0), np.zeros(0), np.zeros(0)), busiest
    keys, column = np.unique(pair, return_inverse=True)  # the pairs any window uses
    weights = np.zeros((slots, len(keys)), dtype=np.int64)
    weights[p_slot, column] = count
    pi, pj = keys // ep, keys % ep
    if router.all_switch:
        loads = group_flow_loads(router, members, (pi, pj), weights, slot_of)
        return StagePattern.from_level_loads(router, loads), busiest
    src = members[:, pi].ravel()  # the non-zero pairs, group by group
    dst = members[:, pj].ravel()
    return StagePattern(router, src, dst, weights[slot_of].ravel()), busiest


# Rows of at least this many expert ids are hashed one byte per id where each fits one (below,
# the range check costs more than the bytes it saves: 5.6 vs 1.6 us at 512 ids, 11 vs 22 us at
# 8,192, 50 vs 140 us at 57,344; measured on the CPU of benchmarks/README_serving.md "r9vec").
COMPACT_KEY_IDS = 4096
MAX_ROW_KEYS = 256  # read-only routing rows whose content keys a network keeps (with the rows)


def _content_key(active: np.ndarray) -> tuple[str, int]:
    """A memo key of routed rows' content: the hash of their bytes, or, for a large array whose
    expert ids all fit one byte (0–255), of one byte per id (an eighth of the int64 bytes to
    copy and hash). Equal rows give equal keys (the same size, so the same form; the tag keeps
    the two forms apart)."""
    if active.size >= COMPACT_KEY_IDS and active.min() >= 0 and active.max() < 256:
        return ("u8", hash(active.astype(np.uint8).tobytes()))
    return ("i8", hash(active.tobytes()))


def _frozen(rows: object) -> bool:
    """Whether ``rows`` is an array that cannot change: read-only, as is every array its memory
    comes from (a read-only view of a writeable array may still change)."""
    a = rows
    while a is not None:
        if not isinstance(a, np.ndarray) or a.flags.writeable:
            return False
        a = a.base
    return rows is not None


def routed_content(memo: dict, rows: np.ndarray | None, total: int, num_experts: int,
                   top_k: int) -> tuple[np.ndarray | None, tuple[str, int]]:  # fmt: skip
    """(the first ``total`` rows as ``active_rows`` gives them, their ``_content_key``). Rows
    that cannot change (``_frozen``: the evaluator's routing rows, frozen when drawn)
    keep their key in ``memo`` by identity (r11cold), so a later call neither copies nor hashes
    them (active rows then None: built only where the pattern is not memoised); the same key
    as hashing anew."""
    fixed = _frozen(rows)
    rkey = (id(rows), total, num_experts, top_k)
    hit = memo.get(rkey) if fixed else None
    if hit is not None and hit[0] is rows:
        return None, hit[1]
    active = active_rows(rows, total, num_experts, top_k)
    content = _content_key(active)
    if fixed:
        if len(memo) >= MAX_ROW_KEYS:  # they hold their rows: bounded
            memo.clear()
        memo[rkey] = (rows, content)
    return active, content
