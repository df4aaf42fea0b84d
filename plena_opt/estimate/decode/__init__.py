"""The decode of a plan as a few weighted evaluation points instead of one per generated token.

Modules, lowest first (each imports only those above it):

* ``stairs``: the stairs a step's cost is built from (``StairSpec``), compressed pieces and
  their exact sums (``_compress``), ``GridMemo``;
* ``blocks``: a grid's checks side by side (``CheckBlocks``);
* ``steps``: stair-compressed grids (``DecodeGrid``, ``stair_grid``; the method in its docstring);
* ``runs``: grids of runs of equal attention tiles priced at block corners (``RunGrid``);
* ``grid``: ``decode_grid``, the base grid of a decode (one kind or the other);
* ``checks``: whether a grid's pieces keep every branch, and where to cut them
  (``failed_pieces``);
* ``grid_checks`` / ``plan_checks``: a plan's fast sufficient checks from memoised layer facts,
  on a stair-compressed grid / on a run grid.

``estimate.reference`` prices every step plainly; ``tests/estimate/test_estimate_decode_steps.py``
and ``tests/estimate/test_estimate_reference.py`` hold the grids to it.
"""

from __future__ import annotations

from plena_opt.estimate.decode.checks import failed_pieces
from plena_opt.estimate.decode.grid import decode_grid, shared_decode_grid
from plena_opt.estimate.decode.runs import RunGrid
from plena_opt.estimate.decode.stairs import StairSpec
from plena_opt.estimate.decode.steps import MAX_REFINES, DecodeGrid

__all__ = [
    "MAX_REFINES",
    "DecodeGrid",
    "RunGrid",
    "StairSpec",
    "decode_grid",
    "failed_pieces",
    "shared_decode_grid",
]
