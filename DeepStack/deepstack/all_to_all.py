"""The complete-exchange (all-to-all) stage pattern without all g² pairs in memory at once.

Spec: network-model.md §7.2 (one-shot all-to-all candidate), §8.2 (uniform EP all-to-all), §5.
On an all-switch NoC the loads follow from the group shape per level (``switch_loads``); on a NoC
whose L1 is a switch, a few big groups are priced from class counts (``split_a2a``) and other
groups' pairs are routed in chunks of about two million (``split_routes``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .routing import Router
from .split_a2a import MAX_GROUPS, all_to_all_links, tables_for
from .stage import StagePattern
from .switch_loads import all_to_all_loads

A2A_CHUNK_PAIRS = 1 << 21  # flows routed at once by the chunked all-to-all pattern
A2A_COUNT_PAIRS = 1 << 14  # above: a few big groups are priced from class counts (split_a2a)


def _a2a_chunks(g: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every ordered pair (i ≠ j) of every group row, weight 1, in chunks of ≈ 2M flows."""
    n_groups, size = g.shape
    per_row = size * (size - 1)
    if per_row >= A2A_CHUNK_PAIRS:  # big groups: one group at a time, split by source rows
        rows_per = max(1, A2A_CHUNK_PAIRS // (size - 1))
        for row in g:
            for lo in range(0, size, rows_per):
                srcpos = np.repeat(np.arange(lo, min(size, lo + rows_per)), size - 1)
                dstpos = np.tile(np.arange(size - 1), len(srcpos) // (size - 1))
                dstpos += dstpos >= srcpos
                yield row[srcpos], row[dstpos], np.ones(len(srcpos))
        return
    i, j = np.nonzero(~np.eye(size, dtype=bool))
    groups_per = max(1, A2A_CHUNK_PAIRS // max(per_row, 1))
    for lo in range(0, n_groups, groups_per):
        block = g[lo : lo + groups_per]
        src, dst = block[:, i].ravel(), block[:, j].ravel()
        yield src, dst, np.ones(len(src))


def complete_exchange(router: Router, g: np.ndarray, devices: int | None = None) -> StagePattern:
    """Weight 1 from every member to every other member of each row of ``g`` (innermost-switch
    or all-switch NoC). ``devices`` (all-switch only): ``g`` holds the groups of devices
    [0, devices) of a layout that repeats them every ``devices`` devices."""
    if router.all_switch:
        return StagePattern.from_level_loads(router, all_to_all_loads(router, g, devices))
    if devices is not None:
        raise ValueError("a periodic layout's exchange is priced on all-switch NoCs only")
    n_groups, size = g.shape
    if size > 1 and n_groups <= MAX_GROUPS and n_groups * size * size > A2A_COUNT_PAIRS:
        tables = tables_for(router.split)
        if tables is not None:
            hop, ids, w = all_to_all_links(router.split, g, tables)
            return StagePattern.from_links(router, hop, ids, w, n_groups * size * (size - 1))
    return StagePattern.from_flow_chunks(router, _a2a_chunks(g))
