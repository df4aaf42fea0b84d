"""MoE routing statistics: routing rows, busiest-rank expert load, closed-form imbalance.

Spec: network-model.md §11.2 (closed-form busiest-rank imbalance), §11.3 (trace counting, even
split of tokens over local experts); analytic-model.md §4.5 (balanced and seeded random rows).
Counts are tokens (token-expert pairs); no units beyond that.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ProfileError


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ProfileError(name, f"{name} must be a positive integer")
    return int(value)


def balanced_rows(tokens: int, num_experts: int, top_k: int) -> np.ndarray:
    """Rows [tokens, top_k]: token t's j-th choice is expert ``(t + j·(E//k)) mod E``.

    Row t is row ``t mod E``, so the first ``min(tokens, E)`` rows are computed and repeated
    (``np.resize``: no integer division per element; the same int64 array)."""
    tokens = max(int(tokens), 0)
    e = _positive("num_experts", num_experts)
    k = _positive("top_k", top_k)
    if k > e:
        raise ProfileError("top_k", "top_k exceeds num_experts")
    t = np.arange(min(tokens, e), dtype=np.int64)[:, None]
    j = np.arange(k, dtype=np.int64)[None, :]
    base = (t + j * (e // k)) % e
    return np.resize(base, (tokens, k)) if tokens > e else base


def random_rows(tokens: int, num_experts: int, top_k: int, seed: int = 0) -> np.ndarray:
    """Rows [tokens, top_k]: per token, uniform scores over the experts from
    ``numpy.random.default_rng(seed)``; the ``top_k`` lowest-scored experts, lowest first."""
    e = _positive("num_experts", num_experts)
    k = _positive("top_k", top_k)
    if k > e:
        raise ProfileError("top_k", "top_k exceeds num_experts")
    scores = np.random.default_rng(seed).random((max(int(tokens), 0), e))
    return np.argsort(scores, axis=1, kind="stable")[:, :k].astype(np.int64)


def expert_rank(num_experts: int, ep: int) -> np.ndarray:
    """EP rank of each expert: ``floor(e·ep/E)`` (§11.3)."""
    return np.clip((np.arange(num_experts) * ep) // num_experts, 0, ep - 1)


def busiest_rank_counts(
    rows: np.ndarray, num_experts: int, ep: int, window_tokens: int
) -> np.ndarray:
    """Per-local-expert token counts of the busiest (window, EP rank), §11.3.

    ``rows`` [tokens, k] expert ids are split into consecutive windows of ``window_tokens`` tokens
    (the last may be short); expert e lives on rank ``floor(e·ep/E)``; the (window, rank) with the
    largest total (first in window-major order on ties) is returned as counts of that rank's
    experts in expert order (length E/ep).
    """
    e = _positive("num_experts", num_experts)
    ep = _positive("ep", ep)
    w = _positive("window_tokens", window_tokens)
    if e % ep:
        raise ProfileError("ep", f"{e} experts do not split evenly over {ep} ranks")
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 2:
        raise ProfileError("rows", "routing rows must be a 2-D array [tokens, k]")
    n = rows.shape[0]
    if n == 0:
        return np.zeros(e // ep, dtype=np.int64)
    windows = -(-n // w)
    win = np.repeat(np.arange(windows), w)[:n]
    valid = (rows >= 0) & (rows < e)
    freq = np.zeros((windows, e), dtype=np.int64)
    np.add.at(freq, (np.broadcast_to(win[:, None], rows.shape)[valid], rows[valid]), 1)
    rank = expert_rank(e, ep)
    per_rank = np.zeros((windows, ep), dtype=np.int64)
    np.add.at(per_rank.T, rank, freq.T)
    gi, ri = np.unravel_index(int(np.argmax(per_rank)), per_rank.shape)
    return freq[gi, rank == ri]


def _a(m: float) -> float:
    """Expected maximum of m standard normals, the §11.2 asymptotic ``a(m)`` (0 for m ≤ 1)."""
    if m <= 1:
        return 0.0
    s = math.sqrt(2.0 * math.log(m))
    return s - (math.log(math.log(m)) + math.log(4.0 * math.pi)) / (2.0 * s)


def estimate_moe_routing_imbalance_overhead(M: int, n: int, EP: int, T: float, R: int) -> float:
    """Busiest-rank tokens ÷ mean tokens (≥ 1), network-model §11.2 ("qwen" method).

    M routed experts, n experts per token, EP ranks, T tokens per EP group, R replicas.
    """
    if EP <= 1:
        return 1.0
    mu = T * n / EP
    if mu <= 0:
        return 1.0
    p = 1.0 / EP
    var_token = 0.0 if M <= 1 or M == n else n * p * (1.0 - p) * (M - n) / (M - 1)
    sigma = math.sqrt(T * var_token)
    return 1.0 + sigma * _a((EP - 1) * R) / mu


def estimate_experts_activated(tokens: int, experts: int) -> np.ndarray:
    """Even split of ``tokens`` over ``experts``: ``experts − r`` get q, ``r`` get q+1 (§11.3),
    where q = tokens // experts and r = tokens − q·experts (few-token experts first)."""
    x = _positive("experts", experts)
    t = int(tokens)
    if t < 0:
        raise ProfileError("tokens", "tokens must be >= 0")
    q, r = divmod(t, x)
    return np.concatenate([np.full(x - r, q, dtype=np.int64), np.full(r, q + 1, dtype=np.int64)])
