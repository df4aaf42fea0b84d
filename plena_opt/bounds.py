"""Plausible ranges of physical inputs (memory and chip profiles, fixed-bandwidth memories).

A value outside its range (a denormal bandwidth such as 5e-324 B/s, a 1e300 Hz clock) is an
input error that names the field and says the range, instead of pricing into ``inf`` or 0. The
ranges are wide enough for any built or announced device and are not fitted to data:

* bandwidth 1 MB/s – 100 PB/s: the fastest published memory systems are wafer-scale on-chip
  SRAM at about 21 PB/s (Cerebras WSE-3); an HBM3E stack is about 1.2 TB/s.
* clocks 1 MHz – 100 GHz: DRAM interface and logic clocks are 0.1–10 GHz.
* capacity 1 byte – 16 EiB (2**64 bytes), the 64-bit address space.
* energy 0 – 10,000 pJ/bit: DRAM access costs a few pJ/bit, off-package links tens.

It also holds the request sizes every front end (CLI, gRPC server, web app) bounds the same way
(``MAX_SAMPLES`` …): the work one request may ask for, so that no command, RPC or HTTP call runs
for hours or allocates gigabytes because of a typo. :func:`check_count` / :func:`check_seconds`
refuse a value outside them naming the flag and the range.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from plena_opt.errors import PlenaInputError

MAX_BANDWIDTH_BYTES_PER_S = 1e17
MIN_BANDWIDTH_BYTES_PER_S = 1e6
MIN_CLOCK_HZ, MAX_CLOCK_HZ = 1e6, 1e11
MAX_BYTES = 2**64
MAX_PJ_PER_BIT = 1e4
# Request sizes shared by every front end (a server's configurable limits default to these).
#: Monte Carlo samples per simulated plan (a 100,000-sample p99 is stable to ~0.1 %).
MAX_SAMPLES = 100_000
#: Ops of one training schedule (pp × vpp × micro-batches × 4 op types at most); building and
#: simulating one takes about 1.5 KB per op (server/plena_server/simulate_job.py).
MAX_SCHEDULE_OPS = 200_000
#: Op types per (stage, micro-batch, chunk) a schedule may hold (ZB: F, B, I, W).
SCHEDULE_OPS_PER_SLOT = 4
#: Decode steps in one simulated serving window.
MAX_WINDOW_STEPS = 1024
#: Ops × samples one simulation request may ask for.
MAX_WORK = 200_000_000
#: New plans one search may score (the sampler budget ``trials``).
MAX_TRIALS = 1_000_000
#: Plans of a search's front re-checked by simulation, or exported as launch files.
MAX_TOP_K = 1000
#: A search's time budget, seconds (30 days: a longer one is a typo, not a plan).
MAX_SEARCH_SECONDS = 30 * 24 * 3600.0
#: Upper bound of an SLA or cost cap (TTFT/TPOT ms, tokens/s per sequence, USD per million
#: output tokens): 1e9 ms is 11.6 days, 1e9 USD/Mtok a thousand dollars a token; a larger value
#: constrains nothing a real deployment meets and is a typo (not fitted).
MAX_SLA = 1e9
#: Clients of a serving workload (``estimate --concurrency``): above every engine's default cap
#: of running requests (vLLM 1024, SGLang/TensorRT-LLM 2048), so more only queue; the replay
#: runs about 8·C requests.
MAX_CONCURRENCY = 4096
#: Poisson request rate of a serving workload, requests/s (``estimate --request-rate``).
MAX_REQUEST_RATE = 10_000.0
#: Tokens one serving replay may generate (requests × output tokens; ~10 s of replay).
MAX_REPLAY_TOKENS = 20_000_000
#: Draft tokens per speculative decoding step (``estimate --speculative K``): engines run 1-8
#: (vLLM num_speculative_tokens, SGLang speculative-num-steps); past 8 the chain's acceptance
#: product is negligible.
MAX_SPECULATIVE_TOKENS = 8
#: Sequences, prompt tokens and generated tokens of a workload (``--batch-size``, ``--input-seq``,
#: ``--output-seq``; gRPC ``Workload``; the web's forms): far beyond any served model, small
#: enough that the per-token decode arrays (8 bytes a token) and integer byte counts stay exact.
MAX_BATCH_SIZE = 2**24
MAX_INPUT_SEQ = 2**26
MAX_OUTPUT_SEQ = 2**24
#: Prefix pydantic puts before a ``ValueError`` raised in a validator (stripped from messages).
VALUE_ERROR_PREFIX = "Value error, "


def range_rule(lo: float, hi: float, unit: str = "") -> str:
    """``must be between <lo> and <hi> <unit>`` (the text every range error uses)."""
    return f"must be between {lo:g} and {hi:g}{' ' + unit if unit else ''}"


def check_count(value: int, field: str, flag: str, lo: int, hi: int) -> int:
    """``value`` if ``lo <= value <= hi``, else :class:`PlenaInputError` ``<flag> must be between
    lo and hi, got value`` (the number echoed shortened)."""
    if lo <= value <= hi:
        return value
    raise PlenaInputError(field, f"{flag} must be between {lo:,} and {hi:,}, got {_short(value)}")


def check_seconds(value: float | None, field: str, flag: str, hi: float) -> float | None:
    """``value`` (seconds; None passes) if finite and ``0 < value <= hi``, else
    :class:`PlenaInputError` with the range."""
    if value is None or (math.isfinite(value) and 0 < value <= hi):
        return value
    raise PlenaInputError(
        field, f"{flag} must be a number of seconds above 0 and at most {hi:,.0f}, got {value!r}"
    )


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}… ({len(text)} digits)"


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

# A load curve (``plena-opt capacity --load``): one row per interval. A week at 5-minute
# intervals is 2,016 rows; the file may hold that many and no more (each row is priced).
MAX_LOAD_ROWS = 2016
MAX_LOAD_FILE_BYTES = 1 << 20
# Distinct (input, output, input p90) length profiles in one load file: each is priced apart
# (about 20 ms per candidate deployment on one core, 12 candidates: ~20 s at the bound).
MAX_LOAD_LENGTH_PROFILES = 96
#: The KV pool's share of GPU memory a serving engine is priced with and launched at
#: (``estimate``/``search``/``export --memory-fraction``: vLLM ``--gpu-memory-utilization``,
#: SGLang ``--mem-fraction-static``, TensorRT-LLM ``free_gpu_memory_fraction``): above 0 and at
#: most this (each engine takes up to the whole device).
MAX_MEMORY_FRACTION = 1.0
