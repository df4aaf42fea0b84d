"""A small, bounded run of the gRPC fuzzer of ``benchmarks/bench_fuzz.py`` (issue 10): every RPC,
the audit's cases, 0 INTERNAL / UNKNOWN / UNAVAILABLE, RESOURCE_EXHAUSTED only for requests over
a server limit, the server healthy and its RSS bounded. The full run (10,000 requests) is the
benchmark; its results are in benchmarks/README.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fuzz.py"


def _fuzzer():
    spec = importlib.util.spec_from_file_location("bench_fuzz", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_fuzz"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_bounded_fuzz_of_every_rpc():
    fuzz = _fuzzer()
    # 500 requests from 4 clients, at most 120 s, server capped at 4 GiB of address space
    rep = fuzz.run(500, 4, seed=11, max_seconds=120, memory_gib=4.0, sizes=False)
    assert rep.requests >= 300, rep.requests
    assert set(rep.by_rpc) == set(fuzz.RPCS)  # every RPC was called
    assert not rep.failures, {k: rep.examples[k] for k in set(rep.failures)}
    assert rep.healthy
    assert rep.peak_rss_mib < 1024, rep.peak_rss_mib
    assert rep.codes["OK"] > 0 and rep.codes["INVALID_ARGUMENT"] > 0
