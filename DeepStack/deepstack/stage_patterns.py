"""The routed stage patterns of the collective algorithms, memoised per device-group layout.

Spec: network-model.md §7.2–§7.4 (recursive doubling / halving XOR stages, ring, double binary
tree, one-shot all-to-all), §8.1 (pipeline boundaries). A pattern is routed once per (group
layout, stage) and priced for any payload (:class:`deepstack.stage.StagePattern`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .all_to_all import complete_exchange
from .placement import ParallelScheme, groups, groups_below, layout
from .routing import Router
from .stage import StagePattern
from .switch_loads import LevelLoads, period_devices


@dataclass
class Candidate:
    """Stages (pattern, payload function) and a multiplier applied to the summed stage costs."""

    stages: list[tuple[StagePattern, Callable[[int], int]]]
    repeat: int = 1


def is_pow2(g: int) -> bool:
    """Whether ``g`` is a positive power of two."""
    return g > 0 and g & (g - 1) == 0


def full(x: int) -> int:
    """Payload of a stage that sends the whole buffer (bytes)."""
    return x


def div(g: int) -> Callable[[int], int]:
    """Payload ``int(X / g)`` bytes."""
    return lambda x: int(float(x) / g)


def div_mul(g: int, m: int) -> Callable[[int], int]:
    """Payload ``int(X / g · m)`` bytes."""
    return lambda x: int(float(x) / g * m)


@lru_cache(maxsize=64)
def double_tree_levels(g: int) -> list[list[tuple[int, int]]]:
    """Up-sweep levels of tree A (even leaves, root g−1) merged with tree B (odd leaves, root 0):
    parent = (left + right) // 2 per level, then a last hop to the root (§7.2)."""

    def build(first: int, root: int) -> list[list[tuple[int, int]]]:
        nodes = list(range(first, g, 2))
        levels: list[list[tuple[int, int]]] = []
        while len(nodes) >= 2:
            pairs, nxt = [], []
            for j in range(0, len(nodes), 2):
                left, right = nodes[j], nodes[j + 1]
                parent = (left + right) // 2
                pairs += [(left, parent), (right, parent)]
                nxt.append(parent)
            levels.append(pairs)
            nodes = nxt
        if len(nodes) == 1:
            levels.append([(nodes[0], root)])
        return levels

    a, b = build(0, g - 1), build(1, 0)
    return [a[i] + b[i] for i in range(len(a))]


class StagePatterns:
    """Routed stage patterns of one router, memoised by (device-group layout, stage name)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.memo: dict[tuple, StagePattern] = {}
        self._keys: dict[tuple, tuple] = {}
        # loads of reversed patterns not yet built (``pairs(reverse=...)``; taken on first use)
        self._reversed: dict[tuple, LevelLoads] = {}

    def layout_key(self, scheme: ParallelScheme, dim: str) -> tuple:
        """The memo key the groups of ``dim`` give a pattern: equal for equal device groups
        (``placement.layout``), so schemes that place a dimension's groups on the same devices
        (e.g. tp=8 beside dp=4 or beside pp=4) share the routed pattern."""
        gkey = (scheme.sizes(), dim)
        key = self._keys.get(gkey)
        if key is None:
            key = self._keys[gkey] = layout(scheme, dim)
        return key

    def group_key(self, scheme: ParallelScheme, dim: str) -> tuple[np.ndarray, tuple]:
        """Rank groups of ``dim`` and their memo key (``layout_key``)."""
        return groups(scheme, dim), self.layout_key(scheme, dim)

    def pairs(
        self,
        scheme: ParallelScheme,
        dim: str,
        name: str,
        build: Callable[[], object],
        reverse: str | None = None,
    ) -> StagePattern:
        """Pattern of position pairs ``(weight, i, j)`` (from ``build()``, called on a memo miss)
        replicated in every group of ``dim``. ``reverse``: the name of the pattern of the same
        pairs reversed, ``(weight, j, i)`` in the same order; on an all-switch NoC its per-level
        loads are kept from this one's until it is asked for (``LevelLoads.reversed``), so it is
        still built in its turn (links are numbered in first-use order) but not summed again."""
        gk = self.layout_key(scheme, dim)
        key = (gk, name)
        pat = self.memo.get(key)
        if pat is None:
            loads = self._reversed.pop(key, None)
            if loads is not None:  # the reversed pairs of a pattern built just before
                pat = self.memo[key] = StagePattern.from_level_loads(self.router, loads)
                return pat
            arr = np.asarray(build(), dtype=np.int64).reshape(-1, 3)
            g, devices = self._period(scheme, dim, gk)
            src = g[:, arr[:, 1]]
            dst = g[:, arr[:, 2]]
            w = np.empty(src.shape, dtype=np.int64)  # every group's row of pair weights
            w[:] = arr[:, 0]  # (``np.broadcast_to`` copied: the same array, fewer calls)
            rkey = None if reverse is None else (gk, reverse)
            if rkey is not None and self.router.all_switch and rkey not in self.memo:
                pat, loads = StagePattern.with_loads(self.router, src, dst, w, devices)
                self._reversed[rkey] = loads.reversed()
            else:
                pat = StagePattern(self.router, src, dst, w, devices=devices)
            self.memo[key] = pat
        return pat

    def _period(
        self, scheme: ParallelScheme, dim: str, key: tuple[int, int, int]
    ) -> tuple[np.ndarray, int | None]:
        """The groups of ``dim`` within one period of the device ids and its device count, or
        all groups and None. ``dim``'s groups fill runs of size · stride devices (placement.py),
        so on an all-switch NoC the loads of every pod-aligned period are the same numbers."""
        devices = None
        if self.router.all_switch:
            devices = period_devices(self.router, key[0] * key[1])
        if devices is None:
            return groups(scheme, dim), None
        return groups_below(key, devices), devices

    def xor_stage(self, scheme: ParallelScheme, dim: str, g: int, k: int) -> StagePattern:
        """Stage ``k`` of recursive doubling / halving: position i exchanges with i XOR 2^k."""
        return self.pairs(scheme, dim, f"xor{k}", lambda: [(1, i, i ^ (1 << k)) for i in range(g)])

    def ring_stage(self, scheme: ParallelScheme, dim: str, g: int) -> StagePattern:
        """One ring step: position i sends to i+1 mod g."""
        return self.pairs(scheme, dim, "ring", lambda: [(1, i, (i + 1) % g) for i in range(g)])

    def a2a_stage(self, scheme: ParallelScheme, dim: str, g: int) -> StagePattern:
        """Complete exchange: every ordered pair of every group sends once."""
        if self.router.inner_switch:  # never lists all g² pairs at once (all_to_all.py)
            gk = self.layout_key(scheme, dim)
            key = (gk, "all_to_all")
            pat = self.memo.get(key)
            if pat is None:
                g_arr, devices = self._period(scheme, dim, gk)
                pat = self.memo[key] = complete_exchange(self.router, g_arr, devices)
            return pat

        def build() -> np.ndarray:
            i, j = np.nonzero(~np.eye(g, dtype=bool))
            return np.stack([np.ones_like(i), i, j], axis=1)

        return self.pairs(scheme, dim, "all_to_all", build)

    def tree_stages(self, scheme: ParallelScheme, dim: str, g: int) -> list[StagePattern]:
        """Double binary tree: the up-sweep levels, then the same levels reversed (down)."""
        levels = double_tree_levels(g)
        up = [
            self.pairs(
                scheme,
                dim,
                f"tree_up{i}",
                lambda lvl=lvl: [(1, s, d) for s, d in lvl],
                reverse=f"tree_down{i}",  # the down-sweep level: the same pairs reversed
            )  # fmt: skip
            for i, lvl in enumerate(levels)
        ]
        down = [
            self.pairs(scheme, dim, f"tree_down{i}", lambda i=i: [(1, d, s) for s, d in levels[i]])
            for i in range(len(levels) - 1, -1, -1)
        ]
        return up + down
