"""The base decode grid of a decode: runs of equal attention tiles where only kv and
``ceil(kv / MLEN)`` vary (``runs``), else stair-compressed pieces (``steps``).

``shared_decode_grid`` keeps the base grids in a per-process table (a grid is a pure function
of its arguments), so a fresh ``EstimateContext`` of an already seen workload copies its grids
instead of building them again.
"""

from __future__ import annotations

import copy
import threading

from plena_opt.estimate.decode.runs import RunGrid, applies, run_grid
from plena_opt.estimate.decode.stairs import StairSpec
from plena_opt.estimate.decode.steps import DecodeGrid, stair_grid

# Base grids kept per process, oldest dropped first. Sized for a search's workloads (a few
# input/output lengths × cp values × stair specs); one grid is its pieces and point arrays
# (tens of points at output 16, a few thousand at 1M tokens).
MAX_SHARED_GRIDS = 256
_SHARED: dict[tuple, DecodeGrid | RunGrid] = {}
_LOCK = threading.Lock()


def decode_grid(input_len: int, steps: int, cp: int, spec: StairSpec) -> DecodeGrid | RunGrid:
    """The evaluation points of a decode of ``steps`` tokens after ``input_len`` prompt tokens
    with context parallelism ``cp``: a ``runs.RunGrid`` for a decode built from kv and the
    attention tiles alone, else a stair-compressed ``steps.DecodeGrid``."""
    if applies(spec):
        return run_grid(input_len, steps, cp, spec)
    return stair_grid(input_len, steps, cp, spec)


def shared_decode_grid(
    input_len: int, steps: int, cp: int, spec: StairSpec
) -> DecodeGrid | RunGrid:
    """``decode_grid(input_len, steps, cp, spec)`` built once per process: each call returns
    its own shallow copy of the table's grid (the same points and weights, read only), whose
    per-object memos (``GridMemo``: its token, the layer facts of the checks) start empty, so
    the table never keeps a context's priced layers alive."""
    key = (input_len, steps, cp, spec)
    template = _SHARED.get(key)
    if template is None:
        template = decode_grid(input_len, steps, cp, spec)
        template.kv.setflags(write=False)  # shared by every copy: read only
        template.weights.weights.setflags(write=False)
        with _LOCK:
            template = _SHARED.setdefault(key, template)
            while len(_SHARED) > MAX_SHARED_GRIDS:
                del _SHARED[next(iter(_SHARED))]
    grid = copy.copy(template)
    grid.__dict__.pop("layer_facts", None)  # (the template is never checked: kept empty)
    return grid
