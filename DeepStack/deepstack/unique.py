"""``sorted_unique``: ``np.unique`` of a plain array without its masked-array check.

In numpy 2.x a plain ``np.unique(a)`` (no ``return_index``/``return_inverse``/``return_counts``)
asks ``np.ma.is_masked(a)`` first, and ``np.ma`` is imported lazily: the first such call of a
process imports ``numpy.ma`` (7–11 ms CPU on the 2-core development VM, more than the rest of a
warm evaluation of the reference case), and every later call pays the check. The routing paths
call it on integer keys and link loads, never on masked arrays.
"""

from __future__ import annotations

import numpy as np


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a`` (flattened), ascending: ``np.unique(a)`` for an integer or
    NaN-free float array (equal values, one of them kept; ``-0.0`` and ``0.0`` are one value)."""
    s = np.sort(a, axis=None)  # a flat copy
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
