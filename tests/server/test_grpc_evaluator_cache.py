"""The server's evaluator cache is bounded by bytes as well as entries."""

from __future__ import annotations

import numpy as np
from plena_server.evaluator_cache import EvaluatorCache, deep_size_bytes


def test_deep_size_counts_numpy_buffers_and_shared_objects_once() -> None:
    a = np.zeros(1_000_000, dtype=np.uint8)
    assert deep_size_bytes({"x": a, "y": a}) < 1_000_000 + 10_000
    assert deep_size_bytes([a, np.zeros(1_000_000, dtype=np.uint8)]) > 2_000_000


def test_cache_evicts_by_bytes_least_recently_used_first() -> None:
    cache = EvaluatorCache(max_entries=100, max_bytes=2_500_000)
    made: list[bytes] = []

    def maker(key: bytes):
        def create():
            made.append(key)
            return {"buf": np.zeros(1_000_000, dtype=np.uint8)}

        return create

    for key in (b"a", b"b"):
        cache.get_or_create(key, maker(key))
    cache.get_or_create(b"a", maker(b"a"))  # hit: a is now most recent
    cache.get_or_create(b"c", maker(b"c"))  # over budget: evicts b
    assert made == [b"a", b"b", b"c"]
    assert len(cache) == 2 and cache.total_bytes() <= 2_500_000
    cache.get_or_create(b"a", maker(b"a"))
    assert made == [b"a", b"b", b"c"]  # a stayed
    cache.get_or_create(b"b", maker(b"b"))
    assert made[-1] == b"b"  # b had been evicted


def test_value_larger_than_budget_is_served_but_not_kept() -> None:
    cache = EvaluatorCache(max_entries=10, max_bytes=100_000)
    big = cache.get_or_create(b"k", lambda: np.zeros(1_000_000, dtype=np.uint8))
    assert big.nbytes == 1_000_000
    assert len(cache) == 0


def test_entry_bound_still_applies() -> None:
    cache = EvaluatorCache(max_entries=2, max_bytes=10**9)
    for key in (b"1", b"2", b"3"):
        cache.get_or_create(key, lambda: [1, 2, 3])
    assert len(cache) == 2


def test_servicer_uses_a_byte_bounded_cache() -> None:
    from plena_server import service
    from plena_server.limits import ServerLimits

    servicer = service.PlenaOptServicer(ServerLimits())
    assert isinstance(servicer._evaluators, EvaluatorCache)
    assert servicer._evaluators.max_bytes == service.EVALUATOR_CACHE_BYTES
