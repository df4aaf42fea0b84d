"""A one-point pass (the prefill) from its priced pieces alone, in Python floats.

``PassResult`` (``estimate.passes``) reads these for its one-point stage values and latency;
``estimate.batch_rows`` reads them for a batch's prefill latencies without building a
``PassResult`` per plan. One function for both keeps the IEEE operations and their order the
same, so either route gives the same bits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plena_opt.estimate.layer import LayerKind
from plena_opt.estimate.pricing import StageArrays


def point_values(
    layer: Mapping[LayerKind, StageArrays],
    comm: Mapping[LayerKind, float],
    full: bool,
    distinct: Sequence[tuple[tuple[int, ...], int]],
    extras: Mapping[int, list[StageArrays]],
) -> list[float]:
    """Seconds of each distinct stage (``StageGroups.distinct``) at a pass's first point: per
    kind the layer's seconds with its collectives' ``comm`` s (their max under ``full`` comm
    overlap, else their sum, §4.6), weighted by the stage's layer counts, plus its extras."""
    combined = []
    for k, st in layer.items():
        la, c = st.first_seconds, comm[k]
        combined.append((la if la >= c else c) if full else la + c)
    values = []
    for counts, stage in distinct:
        total = None
        for w, a in zip(counts, combined, strict=True):
            if w:
                total = a * w if total is None else total + a * w
        total = 0.0 if total is None else total
        if stage in extras:
            for ex in extras[stage]:
                total += ex.first_seconds
        values.append(total)
    return values


def point_latency(
    values: list[float], mult: np.ndarray, mult_floats: list[float], pp: int, transfer: float
) -> float:
    """Σ stages + (pp − 1) transfers of a one-point pass (s) from its distinct stages'
    ``values`` and their multiplicities (``mult``, and as floats): one product for one
    distinct stage, else the multiplicities' dot product with the values."""
    if len(mult_floats) == 1:
        return float(mult_floats[0] * values[0]) + (pp - 1) * transfer
    return float(mult.dot(np.array(values))) + (pp - 1) * transfer
