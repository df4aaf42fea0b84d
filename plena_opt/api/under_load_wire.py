"""A plan under a serving workload (``UnderLoad``) ↔ ``UnderLoadMetrics``, and the request's
``ServingLoad`` → the keyword arguments of ``serve_under_load``.

One place for both directions, so that ``under_load_from_proto(under_load_to_proto(u)) == u``
and ``plena-opt estimate --server … --concurrency …`` prints what local mode prints. None is an
unset ``optional`` field (or an unset ``error_band`` message).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api.under_load import Stats, UnderLoad
from plena_opt.serving.error_bars import ErrorBand
from plena_opt.serving.workload import ServingMetrics

_STEADY = (
    "ttft_seconds",
    "tpot_seconds",
    "e2e_seconds",
    "request_throughput_per_s",
    "output_tps",
    "output_tps_per_gpu",
    "output_tps_per_user",
    "decode_batch",
)
_BAND = ("group", "rows", "ttft_low", "ttft_high", "tpot_low", "tpot_high", "level")
_BAND_ENDS = ("ttft_mean_seconds_low", "ttft_mean_seconds_high", "tpot_mean_seconds_low",
              "tpot_mean_seconds_high")  # fmt: skip
_PLAIN = (
    "engine",
    "engine_version",
    "host_step_seconds",
    "engine_source",
    "range_ratio",
    "gpus",
    "replayed_requests",
    "output_tps_per_gpu",
    "output_tps_per_user",
    "request_throughput_per_s",
    "replicas",
    "max_running_source",
)
# UnderLoad attribute -> proto field, where the names differ
_RENAMED = {
    "budget_tokens": "max_num_batched_tokens",
    "input_len": "input_seq_len",
    "output_len": "output_seq_len",
    "pp": "pipeline_stages",
    "in_flight_batches": "batches_in_flight",
}
_OPTIONAL = {
    "max_running": "max_running_requests",
    "cuda_graph_max_batch": "cuda_graph_max_batch",
    "concurrency": "concurrency",
    "request_rate_per_s": "request_rate_per_s",
    "run_ttft_seconds": "benchmark_run_ttft_seconds",
    "attention_dp_imbalance": "attention_dp_imbalance",
}
_STATS = ("ttft", "tpot", "itl", "e2e")


def load_kwargs(msg: pb.ServingLoad) -> dict[str, Any]:
    """``serve_under_load`` keyword arguments of a request's ``load`` (0 / empty = unset; the
    values are checked there, naming ``concurrency``, ``request_rate``, ``range_ratio``, …)."""
    return {
        "engine": msg.engine or "vllm",
        "concurrency": msg.concurrency if msg.concurrency != 0 else None,
        "request_rate": msg.request_rate if msg.request_rate != 0 else None,
        "engine_version": msg.engine_version or None,
        "range_ratio": msg.range_ratio,
    }


def under_load_to_proto(u: UnderLoad) -> pb.UnderLoadMetrics:
    """The typed message of a plan under load (seconds, tokens/s, requests/s)."""
    out = pb.UnderLoadMetrics()
    for name in _PLAIN:
        setattr(out, name, getattr(u, name))
    for attr, field in {**_RENAMED, **_OPTIONAL}.items():
        value = getattr(u, attr)
        if value is not None:
            setattr(out, field, value)
    for name in _STATS:
        s: Stats = getattr(u, name)
        getattr(out, name).CopyFrom(
            pb.LoadStats(
                mean_seconds=s.mean, p50_seconds=s.p50, p90_seconds=s.p90, p99_seconds=s.p99
            )  # fmt: skip
        )
    for name in _STEADY:
        setattr(out.steady, name, getattr(u.steady, name))
    if u.error_band is not None:
        for name in _BAND:
            setattr(out.error_band, name, getattr(u.error_band, name))
        bars = u.error_bars() or {}  # the interval ends in seconds, as ``--json`` has them
        for name in _BAND_ENDS:
            setattr(out.error_band, name, bars[name])
    return out


def under_load_from_proto(msg: pb.UnderLoadMetrics) -> UnderLoad:
    """The ``UnderLoad`` a reply carries (the steady state's percentiles are None, as local)."""
    kw: dict[str, Any] = {name: getattr(msg, name) for name in _PLAIN}
    kw.update({attr: getattr(msg, field) for attr, field in _RENAMED.items()})
    kw["pp"], kw["in_flight_batches"] = kw["pp"] or 1, kw["in_flight_batches"] or 1  # 0: unset
    kw.update({attr: getattr(msg, f) if msg.HasField(f) else None for attr, f in _OPTIONAL.items()})
    for name in _STATS:
        s = getattr(msg, name)
        kw[name] = Stats(s.mean_seconds, s.p50_seconds, s.p90_seconds, s.p99_seconds)
    kw["steady"] = ServingMetrics(**{name: getattr(msg.steady, name) for name in _STEADY})
    band = None
    if msg.HasField("error_band"):
        band = ErrorBand(**{name: getattr(msg.error_band, name) for name in _BAND})
    return UnderLoad(**kw, error_band=band)


_PLAN_LOAD = ("ttft_seconds", "tpot_seconds", "ttft_mean_seconds", "tpot_mean_seconds",
              "e2e_mean_seconds", "output_tps_per_gpu", "output_tps_per_user",
              "request_throughput_per_s", "running_requests", "kv_pool_bytes_per_device",
              "memory_fraction")  # fmt: skip


def plan_under_load_to(s: Mapping[str, Any], out: pb.PlanUnderLoad) -> None:
    """A summary's ``under_load`` block and static figures → ``PlanUnderLoad`` (SI)."""
    u = s["under_load"]
    out.SetInParent()
    out.refused = u.get("refused", "")
    out.percentile = u.get("percentile", "")
    for name in _PLAN_LOAD:
        if u.get(name) is not None:
            setattr(out, name, u[name])
    out.static_ttft_seconds = s["static_ttft_ms"] / 1e3
    out.static_tps, out.static_tps_per_sequence = s["static_tps"], s["static_tps_per_sequence"]


def load_basis_to_proto(doc: Mapping[str, Any]) -> pb.SearchLoadBasis:
    """A search result's ``under_load`` document → proto."""
    out = pb.SearchLoadBasis(
        kind=doc["kind"], range_ratio=doc["range_ratio"], engine=doc["engine"],
        engine_version=doc["engine_version"], percentile=doc["percentile"], basis=doc["basis"],
        static_basis=doc["static_basis"],
    )  # fmt: skip
    if doc.get("concurrency") is not None:
        out.concurrency = doc["concurrency"]
    if doc.get("request_rate_per_s") is not None:
        out.request_rate_per_s = doc["request_rate_per_s"]
    return out


_POOLS = ("prefill_workers", "prefill_tp", "decode_workers", "decode_tp")
# DisaggMetrics attribute -> proto field
_DISAGG = {
    "request_rate_per_s": "request_throughput_per_s",
    "prefill_wait_seconds": "prefill_wait_seconds",
    "prefill_seconds": "prefill_seconds",
    "transfer_seconds": "kv_transfer_seconds",
    "prefill_utilisation": "prefill_utilisation",
    "decode_batch_per_worker": "decode_batch_per_worker",
    "ttft_seconds": "ttft_seconds",
    "tpot_seconds": "tpot_seconds",
    "e2e_seconds": "e2e_seconds",
    "output_tps": "output_tps",
    "output_tps_per_gpu": "output_tps_per_gpu",
    "output_tps_per_user": "output_tps_per_user",
    "decode_wait_seconds": "decode_wait_seconds",
}
_DISAGG_PLAIN = ("engine", "engine_version", "host_step_seconds", "engine_source", "range_ratio",
                 "decode_max_running_source")  # fmt: skip


def pools_of(msg: pb.ServingLoad) -> Any:
    """The request's disaggregated pools (None: none given); errors name the field."""
    from plena_opt.api.under_load_disagg import check_pools

    return check_pools({f: getattr(msg, f) for f in _POOLS})


def disagg_to_proto(d: Any) -> pb.DisaggUnderLoadMetrics:
    """``DisaggUnderLoad`` → proto (SI)."""
    out = pb.DisaggUnderLoadMetrics(
        max_num_batched_tokens=d.budget_tokens,
        input_seq_len=d.input_len,
        output_seq_len=d.output_len,
    )
    for name in _DISAGG_PLAIN:
        setattr(out, name, getattr(d, name))
    for name in _POOLS:
        setattr(out, name, getattr(d.pools, name))
    for attr, field in _DISAGG.items():
        setattr(out, field, getattr(d.metrics, attr))
    out.ttft_quantiles_seconds.extend(d.metrics.ttft_quantiles_seconds)
    out.e2e_quantiles_seconds.extend(d.metrics.e2e_quantiles_seconds)
    if d.concurrency is not None:
        out.concurrency = d.concurrency
    if d.request_rate_per_s is not None:
        out.request_rate_per_s = d.request_rate_per_s
    if d.decode_max_running is not None:
        out.decode_max_running_requests = d.decode_max_running
    return out


def disagg_from_proto(msg: pb.DisaggUnderLoadMetrics) -> Any:
    """The ``DisaggUnderLoad`` a reply carries."""
    from plena_opt.api.under_load_disagg import DisaggUnderLoad
    from plena_opt.serving.disaggregated import DisaggMetrics, Pools

    m = {attr: getattr(msg, field) for attr, field in _DISAGG.items()}
    m["ttft_quantiles_seconds"] = tuple(msg.ttft_quantiles_seconds)
    m["e2e_quantiles_seconds"] = tuple(msg.e2e_quantiles_seconds)
    return DisaggUnderLoad(
        msg.engine, msg.engine_version, msg.max_num_batched_tokens, msg.host_step_seconds,
        msg.engine_source, Pools(*(getattr(msg, f) for f in _POOLS)),
        msg.concurrency if msg.HasField("concurrency") else None,
        msg.request_rate_per_s if msg.HasField("request_rate_per_s") else None,
        msg.input_seq_len, msg.output_seq_len, msg.range_ratio, DisaggMetrics(**m),
        msg.decode_max_running_requests if msg.HasField("decode_max_running_requests") else None,
        msg.decode_max_running_source,
    )  # fmt: skip
