"""Skewed MoE routing: per-expert token counts of one step whose expert loads follow a power law.

Real routers do not spread a step's tokens evenly: a few experts are hot, many are cold, so a step
of ``T`` tokens touches fewer distinct experts than uniform routing would. This is the load model
of NVIDIA AIConfigurator's MoE kernel collector (``power_law`` workload distribution, documented
in ai-dynamo/aiconfigurator ``collector/README_power_law.md``; the ``power_law_1.01`` and
``power_law_1.2`` rows of ``../shared/data/kernels/*_moe_*.csv.gz`` were measured under it):

1. each of the ``E`` experts draws a load from a power law ``p(x) ∝ x^-alpha`` truncated to
   ``[1, 0.8·T]`` (to ``[0.01, 2]`` when ``T·k ≤ E``), by inverse-CDF sampling;
2. the loads are scaled to the step's ``T·k`` token-expert pairs and rounded; the rounding
   remainder is given to (taken from) the most loaded experts;
3. no expert holds more than ``T`` pairs (a token picks an expert once); any excess moves to the
   least loaded experts.

Deterministic for a seed (``numpy.random.default_rng``).
"""

from __future__ import annotations

import numpy as np

from .errors import ProfileError

ALPHA_RANGE = (1.0, 10.0)  # exclusive low end: the truncated law needs alpha != 1


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ProfileError(name, f"{name} must be a positive integer")
    return int(value)


def power_law_counts(
    tokens: int, num_experts: int, top_k: int, alpha: float, seed: int = 0
) -> np.ndarray:
    """Token-expert pairs per expert (length ``num_experts``, sum ``tokens·top_k``, each at most
    ``tokens``) of one step under power-law expert loads (module docstring)."""
    t = _positive("tokens", tokens)
    e = _positive("num_experts", num_experts)
    k = _positive("top_k", top_k)
    if k > e:
        raise ProfileError("top_k", "top_k exceeds num_experts")
    lo_a, hi_a = ALPHA_RANGE
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not lo_a < alpha <= hi_a:
        raise ProfileError("alpha", f"alpha must be a number above {lo_a:g} and at most {hi_a:g}")
    lo, hi = (1.0, 0.8 * t) if t * k > e else (0.01, 2.0)
    u = np.random.default_rng(seed).random(e)
    a = 1.0 - alpha
    loads = ((hi**a - lo**a) * u + lo**a) ** (1.0 / a)
    target = t * k
    counts = np.rint(loads / loads.sum() * target).astype(np.int64)
    _settle(counts, target)
    _cap(counts, t)
    return counts


def _settle(counts: np.ndarray, target: int) -> None:
    """Give the rounding remainder to (take it from) the most loaded experts, cyclically."""
    delta = int(target - counts.sum())
    order = np.argsort(-counts, kind="stable")
    i = 0
    while delta != 0:
        j = order[i % counts.size]
        if delta > 0:
            counts[j] += 1
            delta -= 1
        elif counts[j] > 0:
            counts[j] -= 1
            delta += 1
        i += 1


def _cap(counts: np.ndarray, tokens: int) -> None:
    """No expert above ``tokens`` pairs: move the excess to the least loaded experts."""
    excess = int(np.maximum(counts - tokens, 0).sum())
    if excess == 0:
        return
    np.minimum(counts, tokens, out=counts)
    for j in np.argsort(counts, kind="stable"):
        room = tokens - int(counts[j])
        take = min(room, excess)
        counts[j] += take
        excess -= take
        if excess == 0:
            return


def busiest_block(counts: np.ndarray, ep: int) -> np.ndarray:
    """The counts of the EP rank (a contiguous block of ``E/ep`` experts) with the most pairs."""
    ep = _positive("ep", ep)
    if counts.size % ep:
        raise ProfileError("ep", "ep must divide the number of experts")
    blocks = counts.reshape(ep, -1)
    return blocks[int(np.argmax(blocks.sum(axis=1)))].copy()


def power_law_rows(counts: np.ndarray, tokens: int, seed: int = 0) -> np.ndarray:
    """Rows [tokens, k] realising ``counts`` (each row distinct experts), tokens in seeded random
    order: expert ids repeated by their counts, most loaded first, dealt round-robin over the
    tokens (a count never exceeds ``tokens``, so no token gets an expert twice)."""
    t = _positive("tokens", tokens)
    total = int(counts.sum())
    if total % t:
        raise ProfileError("tokens", "the counts must hold tokens·top_k pairs")
    order = np.argsort(-counts, kind="stable")
    ids = np.repeat(order, counts[order])
    rows = ids.reshape(total // t, t).T
    perm = np.random.default_rng(seed).permutation(t)
    return np.ascontiguousarray(rows[perm])
