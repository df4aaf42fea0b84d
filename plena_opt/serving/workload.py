"""A serving benchmark's workload (closed loop) and the metrics it reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from plena_opt.errors import PlenaInputError

MAX_CONCURRENCY = 1 << 16  # clients a workload may name (bounds the replay)
MAX_TOKENS = 1 << 20  # input or output tokens per request


@dataclass(frozen=True)
class ServingWorkload:
    """``concurrency`` clients, each sending its next request of ``input_len`` prompt tokens and
    ``output_len`` generated tokens as soon as its last one finishes (``vllm bench serve
    --max-concurrency``, aiperf/genai-perf ``--concurrency``, InferenceX)."""

    concurrency: int
    input_len: int
    output_len: int
    # lengths drawn uniformly in [L·(1 − r), L·(1 + r)] (``vllm bench serve --random-range-ratio``
    # in its symmetric form); the steady-state model uses the means, the replay draws them
    range_ratio: float = 0.0

    def __post_init__(self) -> None:
        r = self.range_ratio
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 <= r < 1:
            raise PlenaInputError("range_ratio", f"range_ratio must be in [0, 1); got {r!r}")
        for name, v, hi in (("concurrency", self.concurrency, MAX_CONCURRENCY),
                            ("input_len", self.input_len, MAX_TOKENS),
                            ("output_len", self.output_len, MAX_TOKENS)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
                raise PlenaInputError(name, f"{name} must be an integer 1..{hi}; got {v!r}")


@dataclass(frozen=True)
class ServingMetrics:
    """What a serving benchmark reports, as its tools compute them (seconds, tokens/s).
    ``tpot_seconds`` = (E2E − TTFT) / (output − 1) per request; means over requests; the
    percentiles are None for the steady-state model (only the replay has a distribution)."""

    ttft_seconds: float
    tpot_seconds: float
    e2e_seconds: float
    request_throughput_per_s: float
    output_tps: float
    output_tps_per_gpu: float
    output_tps_per_user: float
    decode_batch: float  # mean requests decoding in a step
    ttft_p50_seconds: float | None = None
    ttft_p90_seconds: float | None = None
    ttft_p99_seconds: float | None = None
    tpot_p50_seconds: float | None = None
    tpot_p90_seconds: float | None = None
    tpot_p99_seconds: float | None = None
    # the replay only: inter-token latency (every gap between two tokens of a request, pooled
    # over requests, as vllm bench serve's ITL) and E2E percentiles
    itl_seconds: float | None = None
    itl_p50_seconds: float | None = None
    itl_p90_seconds: float | None = None
    itl_p99_seconds: float | None = None
    e2e_p50_seconds: float | None = None
    e2e_p90_seconds: float | None = None
    e2e_p99_seconds: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def means(cls, ttft_seconds: float, tpot_seconds: float, e2e_seconds: float,
              request_throughput_per_s: float, output_tps: float, output_tps_per_gpu: float,
              output_tps_per_user: float, decode_batch: float) -> ServingMetrics:  # fmt: skip
        """The metrics with the means only (no percentiles: the steady-state model's), as
        ``ServingMetrics(...)`` builds them but without the frozen ``__init__``'s one
        ``object.__setattr__`` per field (the fixed points' result, built once a call)."""
        out = object.__new__(cls)
        d = out.__dict__
        d.update(ttft_seconds=ttft_seconds, tpot_seconds=tpot_seconds, e2e_seconds=e2e_seconds,
                 request_throughput_per_s=request_throughput_per_s, output_tps=output_tps,
                 output_tps_per_gpu=output_tps_per_gpu, output_tps_per_user=output_tps_per_user,
                 decode_batch=decode_batch)  # fmt: skip
        d.update(_NO_PERCENTILES)  # the other fields, in field order
        return out


_NO_PERCENTILES = {f.name: None for f in fields(ServingMetrics) if f.default is None}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank ``q``-th percentile (0–100) of ``values`` (non-empty)."""
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def weighted_percentile(pairs: list[tuple[float, int]], q: float) -> float:
    """Nearest-rank ``q``-th percentile (0–100) of values given as (value, count) pairs (the
    counts summing to at least 1)."""
    s = sorted(p for p in pairs if p[1] > 0)
    rank = max(1, math.ceil(q / 100 * sum(n for _, n in s)))
    seen = 0
    for v, n in s:
        seen += n
        if seen >= rank:
            return v
    return s[-1][0]
