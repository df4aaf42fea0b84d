"""Vectorised longest path over a block of samples, level by level (pipeline-simulator §6.3).

Ops are renumbered so that every topological level (ops of equal depth) is a contiguous row range
of the ``[rows, samples]`` buffers; a level then costs a handful of numpy calls whatever its size:
gather the end times of each dependency slot, take their running maximum (``start``), record which
slot won (the binding dependency, first arg-max as in :func:`compute_timeline`) and write
``end = start + duration`` into the level's rows. The last row is a pad (end 0) that stands for a
missing dependency slot. Criticality walks the recorded binding slots back from the op that ends
last, one step for every sample at once (spec §3, §6.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from plena_opt.simulator.engine.dependencies import DependencyGraph
from plena_opt.stop import StopToken


class Level(NamedTuple):
    """Rows ``lo:hi`` of one level; ``slots[i]`` holds the rows of each op's ``i``-th dependency
    (the pad row where it has fewer), ``lags[i]`` their lags as a float32 column (or ``None``)."""

    lo: int
    hi: int
    slots: tuple[np.ndarray, ...]
    lags: tuple[np.ndarray, ...] | None


@dataclass(frozen=True)
class LevelLayout:
    """Row layout of a graph: ``row_of[op]`` is the op's buffer row, ``op_of_row`` the inverse.

    ``levels`` lists the :class:`Level` row ranges in topological order; ``dep_rows[row, i]`` is
    the row of dependency slot ``i`` (``pad`` when unused; the pad row's slots point at itself so
    that a criticality walk rests there); ``lag`` is the per-slot lag (float32, same unit as
    durations) or ``None`` when every lag is zero.
    """

    row_of: np.ndarray
    op_of_row: np.ndarray
    levels: tuple[Level, ...]
    dep_rows: np.ndarray
    lag: np.ndarray | None
    sink_rows: np.ndarray
    pad: int

    @property
    def n_rows(self) -> int:
        """Buffer rows: one per op plus the pad row."""
        return self.pad + 1


def build_layout(graph: DependencyGraph) -> LevelLayout:
    """Renumber ``graph``'s ops level by level (its topological depth groups, in order)."""
    n = graph.plan.n_ops
    op_of_row = np.concatenate(graph.levels) if n else np.zeros(0, dtype=np.int64)
    row_of = np.empty(n + 1, dtype=np.int64)
    row_of[op_of_row] = np.arange(n)
    row_of[n] = n  # the pad index of ``dep_pad`` maps to the pad row
    k_max = graph.dep_pad.shape[1]
    dep_rows = np.full((n + 1, k_max), n, dtype=np.int64)
    dep_rows[:n] = row_of[graph.dep_pad[op_of_row]]
    has_lag = bool(np.any(graph.lag_pad))
    lag = graph.lag_pad[op_of_row].astype(np.float32) if has_lag else None
    levels, lo = [], 0
    for lev in graph.levels:
        hi = lo + len(lev)
        k = int(graph.n_deps[lev].max())
        slots = tuple(np.ascontiguousarray(dep_rows[lo:hi, i]) for i in range(k))
        lags = None if lag is None else tuple(lag[lo:hi, i][:, None].copy() for i in range(k))
        levels.append(Level(lo, hi, slots, lags))
        lo = hi
    return LevelLayout(
        row_of=row_of[:n],
        op_of_row=op_of_row,
        levels=tuple(levels),
        dep_rows=dep_rows,
        lag=lag,
        sink_rows=row_of[graph.sinks],
        pad=n,
    )


def binding_dtype(layout: LevelLayout) -> type[np.integer]:
    """Smallest integer type that holds a dependency slot index."""
    return np.int8 if layout.dep_rows.shape[1] <= 127 else np.int32


def end_times(
    layout: LevelLayout,
    dur: np.ndarray,
    end: np.ndarray,
    bind: np.ndarray | None = None,
    stop: StopToken | None = None,
) -> None:
    """Fill ``end`` (``[n_rows, n]`` float32, C-contiguous) from durations ``dur`` (``[n_rows − 1,
    n]``), level by level; with ``bind`` (``[n_rows, n]``, zero outside levels with several
    dependency slots) also record the binding slot of every op and sample. ``stop`` is checked
    at every level (raises :class:`~plena_opt.stop.Stopped`)."""
    n = end.shape[1]
    end[layout.pad] = 0.0
    width = max((lv.hi - lv.lo for lv in layout.levels), default=0)
    best = np.empty((width, n), dtype=end.dtype)
    other = np.empty_like(best)
    won = np.empty(best.shape, dtype=bool)
    for lv in layout.levels:
        if stop is not None and stop.is_set():
            stop.check()
        lo, hi = lv.lo, lv.hi
        if not lv.slots:
            end[lo:hi] = dur[lo:hi]
            continue
        b, e = best[: hi - lo], other[: hi - lo]
        _gather(end, lv, 0, b)
        for i in range(1, len(lv.slots)):
            _gather(end, lv, i, e)
            if bind is not None:
                _record_binding(bind[lo:hi], i, e, b, won[: hi - lo])
            np.maximum(b, e, out=b)
        np.add(b, dur[lo:hi], out=end[lo:hi])


def _record_binding(
    bind: np.ndarray, i: int, e: np.ndarray, best: np.ndarray, won: np.ndarray
) -> None:
    """Set ``bind`` to slot ``i`` where ``e`` beats the best so far (strictly: the first arg-max
    binds). Slot 1 overwrites every entry (0 or 1), directly as booleans for a one-byte ``bind``."""
    if i == 1 and bind.itemsize == 1:
        np.greater(e, best, out=bind.view(bool))
        return
    np.greater(e, best, out=won)
    if i == 1:
        bind[...] = won
        return
    # slots are tried in order, so bind < i so far: bind = i where won, else unchanged
    # (the int8 view scales ``won`` in place; the next comparison rewrites it whole)
    flag = won.view(np.int8) if bind.itemsize == 1 else won.astype(bind.dtype)
    flag *= i
    np.maximum(bind, flag, out=bind)


def _gather(end: np.ndarray, lv: Level, i: int, out: np.ndarray) -> None:
    """``out = end[dependency slot i] + lag`` for the rows of level ``lv``."""
    end.take(lv.slots[i], axis=0, out=out, mode="clip")
    if lv.lags is not None:
        out += lv.lags[i]


def critical_counts(layout: LevelLayout, end: np.ndarray, bind: np.ndarray) -> np.ndarray:
    """Per row (op), the number of samples whose critical path passes through it: walk binding
    slots back from the sink that ends last, every sample in step, until all rest on the pad."""
    n = end.shape[1]
    cols = np.arange(n, dtype=np.int64)
    k_max = layout.dep_rows.shape[1]
    bind_flat, dep_flat = bind.reshape(-1), layout.dep_rows.reshape(-1)
    path = np.empty((len(layout.levels) + 1, n), dtype=np.int64)
    path[0] = layout.sink_rows[end[layout.sink_rows].argmax(axis=0)]
    idx = np.empty(n, dtype=np.int64)
    slot = np.empty(n, dtype=bind.dtype)
    steps = 1
    while steps < path.shape[0]:
        cur = path[steps - 1]
        np.multiply(cur, n, out=idx)
        idx += cols
        np.take(bind_flat, idx, out=slot, mode="clip")
        np.multiply(cur, k_max, out=idx)
        idx += slot
        np.take(dep_flat, idx, out=path[steps], mode="clip")
        steps += 1
        if steps % 16 == 0 and np.all(path[steps - 1] == layout.pad):
            break
    return np.bincount(path[:steps].ravel(), minlength=layout.n_rows)[: layout.pad]
