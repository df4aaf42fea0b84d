"""The base decode grid of a decode: runs of equal attention tiles where only kv and
``ceil(kv / MLEN)`` vary (``runs``), else stair-compressed pieces (``steps``)."""

from __future__ import annotations

from plena_opt.estimate.decode.runs import RunGrid, applies, run_grid
from plena_opt.estimate.decode.stairs import StairSpec
from plena_opt.estimate.decode.steps import DecodeGrid, stair_grid


def decode_grid(input_len: int, steps: int, cp: int, spec: StairSpec) -> DecodeGrid | RunGrid:
    """The evaluation points of a decode of ``steps`` tokens after ``input_len`` prompt tokens
    with context parallelism ``cp``: a ``runs.RunGrid`` for a decode built from kv and the
    attention tiles alone, else a stair-compressed ``steps.DecodeGrid``."""
    if applies(spec):
        return run_grid(input_len, steps, cp, spec)
    return stair_grid(input_len, steps, cp, spec)
