"""Result files of serving benchmarks, read for ``validate --measurements`` with a deployment.

Two formats, each one JSON object per run (a file holds one object, or one per line):

* ``vllm bench serve --save-result`` (``vllm/benchmarks/serve.py``, ``main``: ``result_json``
  holds ``date``, ``endpoint_type``, ``backend``, ``label``, ``model_id``, ``num_prompts``,
  ``request_rate`` — the string ``"inf"`` when unset — ``burstiness`` and ``max_concurrency``
  (null when unset), merged with what ``benchmark()`` returns: ``duration``, ``completed``,
  ``failed``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
  ``output_throughput``, and per metric of ``--percentile-metrics`` (default ``ttft,tpot,itl``)
  ``mean_<m>_ms``, ``median_<m>_ms``, ``std_<m>_ms`` and ``p<q>_<m>_ms`` for each
  ``--metric-percentiles`` (default 99): ``mean_ttft_ms``, ``median_tpot_ms``, ``p99_itl_ms``, …
  ``--append-result`` appends one object per line. TensorRT-LLM's
  ``tensorrt_llm/serve/scripts/benchmark_serving.py`` writes the same fields.
* SGLang ``python -m sglang.bench_serving --output-file F.jsonl`` (``sglang/bench_serving.py``,
  ``benchmark``: one line appended per run): ``backend``, ``dataset_name``, ``request_rate``
  (``Infinity`` when unset), ``max_concurrency``, ``random_input_len``, ``random_output_len``,
  ``random_range_ratio``, ``duration``, ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``mean_e2e_latency_ms``, ``mean_ttft_ms``/``median_ttft_ms``/
  ``p99_ttft_ms``, ``mean_tpot_ms``/``median_tpot_ms``/``p99_tpot_ms``, ``mean_itl_ms``/
  ``median_itl_ms``/``p95_itl_ms``/``p99_itl_ms``, ``concurrency``.

* AIPerf ``aiperf profile`` (NVIDIA's successor of genai-perf): ``profile_export_aiperf.json``,
  one object a run: per metric an object with ``unit``, ``avg`` and percentiles ``p1`` … ``p99``
  (``time_to_first_token``, ``inter_token_latency`` — per request (latency − TTFT) / (output −
  1), TPOT as the other tools define it — ``request_count``, ``total_isl``, ``total_osl``), and
  the run's settings under ``input_config`` (``loadgen.concurrency``, ``loadgen.request_rate``,
  ``input.prompt.input_tokens`` / ``output_tokens`` ``mean`` and ``stddev``). Lengths drawn
  with a standard deviation (``--isl-stddev`` / ``--osl-stddev`` > 0) are normal, not the
  uniform range the serving model draws: refused naming the field.

A run is known by its keys: ``dataset_name`` (SGLang's), ``date``/``endpoint_type`` (vLLM's) or
``input_config`` with a ``time_to_first_token`` object (AIPerf's).
Needed from every run: ``completed``, ``total_input_tokens``, ``total_output_tokens`` (the mean
lengths are their ratios), ``mean_ttft_ms``, ``mean_tpot_ms``, ``max_concurrency`` and
``request_rate``. A missing or malformed one is an input error naming the field and the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plena_opt.errors import PlenaInputError

MAX_FILE_BYTES = 64 << 20
MAX_RUNS = 10_000  # runs one file may hold
FORMATS = {"vllm": "vllm bench serve --save-result", "sglang": "sglang bench_serving",
           "aiperf": "aiperf profile (profile_export_aiperf.json)"}  # fmt: skip
# A run's ``backend`` (the client the tool used) that only one engine serves: SGLang 0.5.23
# sglang/benchmark/serving.py ASYNC_REQUEST_FUNCS, "sglang"/"sglang-native" post to SGLang's own
# /generate, "trt" to Triton's TensorRT-LLM /v2/models/ensemble/generate_stream. The OpenAI-API
# clients ("vllm", "openai", "sglang-oai", …: /v1/completions; vLLM 0.34.0
# vllm/benchmarks/lib/endpoint_request_func.py) reach any engine: they name none.
BACKEND_ENGINES = {"sglang": "sglang", "sglang-native": "sglang", "trt": "trtllm"}


@dataclass(frozen=True)
class BenchRun:
    """One benchmark run as measured: load (concurrency or Poisson rate), mean lengths
    (tokens), requests completed, and mean/percentile latencies (ms; None where not saved)."""

    id: str
    source: str  # a FORMATS key
    concurrency: int | None
    request_rate_per_s: float | None  # None: "inf" (every request sent at once)
    input_len: int
    output_len: int
    completed: int
    ttft_ms: float
    tpot_ms: float
    # lengths drawn around the means, as ``ServingWorkload.range_ratio`` (0: fixed): SGLang saves
    # ``random_range_ratio`` r (lengths in [r·L, L]: ratio (1 − r) / (1 + r) about the mean);
    # vllm bench serve does not save it: fixed, as the benchmark plena-opt export writes
    # (``--random-range-ratio 0.0``)
    range_ratio: float = 0.0
    itl_ms: float | None = None
    p99_ttft_ms: float | None = None
    p99_tpot_ms: float | None = None
    engine: str | None = None  # the engine its ``backend`` names (``BACKEND_ENGINES``); None: any
    unmodelled: str = (
        ""  # why its arrivals are not the open loop's Poisson at one rate ("": they are)
    )


def read_bench_runs(path: Path) -> list[BenchRun]:
    """The runs of a ``vllm bench serve`` or SGLang ``bench_serving`` result file."""
    from plena_opt.jsonio import load_document

    if not path.is_file():
        raise PlenaInputError("measurements", f"no such file: {path}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise PlenaInputError("measurements", f"file is over {MAX_FILE_BYTES >> 20} MiB")
    text = path.read_bytes()
    if not text.strip():
        raise PlenaInputError("measurements", f"{path.name!r} is empty: no benchmark run")
    try:
        docs = [load_document(text, "measurements", f"result file {path.name!r}")]
    except PlenaInputError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > MAX_RUNS:
            raise PlenaInputError("measurements", f"more than {MAX_RUNS} runs") from None
        docs = [
            load_document(ln, "measurements", f"line {i + 1} of {path.name!r}")
            for i, ln in enumerate(lines)
        ]
    if not docs:
        raise PlenaInputError("measurements", f"{path.name!r} holds no benchmark run")
    return [_run(doc, f"{path.stem}#{i + 1}") for i, doc in enumerate(docs)]


def _run(doc: Any, rid: str) -> BenchRun:
    where = f"run {rid}"
    if not isinstance(doc, dict):
        raise PlenaInputError("measurements", f"{where} is not a JSON object")
    if "input_config" in doc and isinstance(doc.get("time_to_first_token"), dict):
        return _aiperf_run(doc, rid, where)
    if "dataset_name" in doc:
        source = "sglang"
    elif "date" in doc or "endpoint_type" in doc:
        source = "vllm"
    else:
        raise PlenaInputError(
            "measurements",
            f"{where}: neither a {FORMATS['vllm']} result "
            f"(no 'date'), a {FORMATS['sglang']} line (no 'dataset_name') nor an "
            f"{FORMATS['aiperf']} (no 'input_config')",
        )
    completed = _count(doc, "completed", where)
    total_in = _count(doc, "total_input_tokens", where)
    total_out = _count(doc, "total_output_tokens", where)
    conc = doc.get("max_concurrency", "missing")
    if conc == "missing":
        raise PlenaInputError("max_concurrency", f"{where}: field 'max_concurrency' is missing")
    if conc is not None:
        conc = _count(doc, "max_concurrency", where)
    return BenchRun(
        rid, source, conc, _rate(doc, where), max(1, round(total_in / completed)),
        max(1, round(total_out / completed)), completed, _ms(doc, "mean_ttft_ms", where),
        _ms(doc, "mean_tpot_ms", where),
        _range_ratio(doc, source, where), _ms(doc, "mean_itl_ms", where, need=False),
        _ms(doc, "p99_ttft_ms", where, need=False), _ms(doc, "p99_tpot_ms", where, need=False),
        BACKEND_ENGINES.get(doc["backend"]) if isinstance(doc.get("backend"), str) else None,
        _arrivals(doc),
    )  # fmt: skip


def _arrivals(doc: dict) -> str:
    """Why a rate run's arrivals are not Poisson at one rate (vllm bench serve ``--burstiness``:
    gamma inter-arrivals, Poisson only at 1; ``--ramp-up-strategy``: the rate moves), else ""."""
    b = doc.get("burstiness", 1.0)
    if doc.get("ramp_up_strategy") is not None:
        return (
            f"ramp_up_strategy {str(doc['ramp_up_strategy'])[:16]!r}: a moving rate is not modelled"
        )
    if b != 1 and not isinstance(b, bool) and isinstance(b, int | float):
        return f"burstiness {b:g}: gamma arrivals other than Poisson (1) are not modelled"
    return ""


def _count(doc: dict, name: str, where: str) -> int:
    v = doc.get(name)
    if v is None:
        raise PlenaInputError(name, f"{where}: field {name!r} is missing")
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or not 1 <= v < 2**53:
        raise PlenaInputError(name, f"{where}: field {name!r} must be a positive integer, got "
                              f"{str(v)[:32]!r}")  # fmt: skip
    return int(v)


def _ms(doc: dict, name: str, where: str, need: bool = True) -> float | None:
    v = doc.get(name)
    if v is None:
        if need:
            raise PlenaInputError(name, f"{where}: field {name!r} is missing")
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise PlenaInputError(name, f"{where}: field {name!r} must be a finite number of ms "
                              f">= 0, got {str(v)[:32]!r}")  # fmt: skip
    return float(v)


def _rate(doc: dict, where: str) -> float | None:
    if "request_rate" not in doc:
        raise PlenaInputError("request_rate", f"{where}: field 'request_rate' is missing")
    v = doc["request_rate"]
    if v == "inf" or (isinstance(v, float) and math.isinf(v) and v > 0):
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise PlenaInputError("request_rate", f"{where}: field 'request_rate' must be a rate "
                              f"above 0 or 'inf', got {str(v)[:32]!r}")  # fmt: skip
    return float(v)


def _range_ratio(doc: dict, source: str, where: str) -> float:
    if source != "sglang" or doc.get("dataset_name") != "random":
        return 0.0
    r = doc.get("random_range_ratio", 1.0)
    if isinstance(r, bool) or not isinstance(r, int | float) or not 0 <= r <= 1:
        raise PlenaInputError("random_range_ratio", f"{where}: field 'random_range_ratio' must "
                              f"be 0 to 1, got {str(r)[:32]!r}")  # fmt: skip
    return (1 - r) / (1 + r)


def _aiperf_run(doc: dict, rid: str, where: str) -> BenchRun:
    """One ``profile_export_aiperf.json`` run (module docstring)."""
    for part in ("input_tokens", "output_tokens"):
        sd = _dig(doc, "input_config", "input", "prompt", part, "stddev")
        if sd not in (0, None):
            raise PlenaInputError(
                f"input_config.input.prompt.{part}.stddev",
                f"{where}: lengths drawn with a standard deviation ({str(sd)[:16]!r}) are not "
                "modelled (the serving model draws a uniform range); run with a stddev of 0",
            )
    conc = _dig(doc, "input_config", "loadgen", "concurrency")
    rate = _dig(doc, "input_config", "loadgen", "request_rate")
    if conc is None and rate is None:
        raise PlenaInputError(
            "input_config.loadgen.concurrency",
            f"{where}: neither 'concurrency' nor 'request_rate' in input_config.loadgen",
        )
    stat = {k: _stat(doc, k, where) for k in ("request_count", "total_isl", "total_osl")}
    loads = {"concurrency": conc} if conc is not None else {}
    completed = _count(stat, "request_count", where)
    return BenchRun(
        rid, "aiperf", _count(loads, "concurrency", where) if loads else None,
        None if rate is None else _rate({"request_rate": rate}, where),
        max(1, round(_count(stat, "total_isl", where) / completed)),
        max(1, round(_count(stat, "total_osl", where) / completed)), completed,
        _aiperf_ms(doc, "time_to_first_token", "avg", where),
        _aiperf_ms(doc, "inter_token_latency", "avg", where), 0.0, None,
        _aiperf_ms(doc, "time_to_first_token", "p99", where, need=False),
        _aiperf_ms(doc, "inter_token_latency", "p99", where, need=False),
    )  # fmt: skip


def _stat(doc: dict, name: str, where: str) -> object:
    """The ``avg`` of AIPerf metric ``name`` (a count: request_count, total_isl, total_osl)."""
    v = doc.get(name)
    if not isinstance(v, dict) or "avg" not in v:
        raise PlenaInputError(name, f"{where}: field {name!r} (an object with 'avg') is missing")
    return v["avg"]


def _aiperf_ms(doc: dict, name: str, key: str, where: str, need: bool = True) -> float | None:
    """AIPerf metric ``name``'s ``key`` statistic, in ms (its ``unit`` must say ms)."""
    v = doc.get(name)
    if not isinstance(v, dict):
        if need:
            raise PlenaInputError(name, f"{where}: field {name!r} is missing")
        return None
    if v.get("unit", "ms") != "ms":
        raise PlenaInputError(name, f"{where}: field {name!r} is in {str(v['unit'])[:16]!r}, "
                              "not ms")  # fmt: skip
    return _ms(v, key, f"{where} {name}", need)


def _dig(doc: object, *keys: str) -> object:
    """``doc[k1][k2]…``, or None where a level is missing or not an object."""
    for k in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(k)
    return doc
