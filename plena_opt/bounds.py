"""Plausible ranges of physical inputs (memory and chip profiles, fixed-bandwidth memories).

A value outside its range (a denormal bandwidth such as 5e-324 B/s, a 1e300 Hz clock) is an
input error that names the field and says the range, instead of pricing into ``inf`` or 0. The
ranges are wide enough for any built or announced device and are not fitted to data:

* bandwidth 1 MB/s – 100 PB/s: the fastest published memory systems are wafer-scale on-chip
  SRAM at about 21 PB/s (Cerebras WSE-3); an HBM3E stack is about 1.2 TB/s.
* clocks 1 MHz – 100 GHz: DRAM interface and logic clocks are 0.1–10 GHz.
* capacity 1 byte – 16 EiB (2**64 bytes), the 64-bit address space.
* energy 0 – 10,000 pJ/bit: DRAM access costs a few pJ/bit, off-package links tens.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field

MAX_BANDWIDTH_BYTES_PER_S = 1e17
MIN_BANDWIDTH_BYTES_PER_S = 1e6
MIN_CLOCK_HZ, MAX_CLOCK_HZ = 1e6, 1e11
MAX_BYTES = 2**64
MAX_PJ_PER_BIT = 1e4
#: Prefix pydantic puts before a ``ValueError`` raised in a validator (stripped from messages).
VALUE_ERROR_PREFIX = "Value error, "


def range_rule(lo: float, hi: float, unit: str = "") -> str:
    """``must be between <lo> and <hi> <unit>`` (the text every range error uses)."""
    return f"must be between {lo:g} and {hi:g}{' ' + unit if unit else ''}"


def _checker(lo: float, hi: float, unit: str, also: tuple[float, ...]) -> Any:
    def check(value: float) -> float:
        if lo <= value <= hi or value in also:
            return value
        extra = f", or exactly {', '.join(f'{a:g}' for a in also)}" if also else ""
        raise ValueError(range_rule(lo, hi, unit) + extra)

    return check


def ranged(
    lo: float, hi: float, unit: str = "", *, integer: bool = False, also: tuple[float, ...] = ()
) -> Any:
    """A strict pydantic number type limited to ``[lo, hi]`` (plus the exact values ``also``);
    the error says the range. ``lo > 0`` also rejects zero and negatives with "must be > 0"."""
    base: Any = int if integer else float
    sign = Field(strict=True, gt=0) if lo > 0 else Field(strict=True, ge=0)
    return Annotated[base, sign, AfterValidator(_checker(lo, hi, unit, also))]


def strip_value_error(msg: str) -> str:
    """A pydantic ``value_error`` message without its ``Value error, `` prefix."""
    return msg[len(VALUE_ERROR_PREFIX) :] if msg.startswith(VALUE_ERROR_PREFIX) else msg


Bandwidth = ranged(MIN_BANDWIDTH_BYTES_PER_S, MAX_BANDWIDTH_BYTES_PER_S, "B/s")
ClockHz = ranged(MIN_CLOCK_HZ, MAX_CLOCK_HZ, "Hz")
Bytes = ranged(1, MAX_BYTES, "bytes", integer=True)
PjPerBit = ranged(0, MAX_PJ_PER_BIT, "pJ/bit")
