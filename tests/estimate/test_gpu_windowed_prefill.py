"""Prefill attention of sliding-window and chunked layers on the GPU path counts the (query, key)
pairs each query really attends (``estimate.gpu_layers._gqa_prefill``). Before, the window was
passed as the KV length of a causal prefill, whose formula falls back to s(s+1)/2 pairs when the
keys are fewer than the queries: gpt-oss-120b's 18 window-128 layers were priced as full causal
attention over an 8k prompt (550 GFLOP a layer instead of 17)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.estimate.gpu_layers import _gqa_prefill

B, H, KV, HD = 1, 64, 8, 64


@pytest.fixture(scope="module")
def perf() -> GpuPerfModel:
    return GpuPerfModel(load_chip("h100-sxm"), "bf16", 2.0, 2.0, 2.0)


def _layer(window: int = 0, chunk: int = 0) -> SimpleNamespace:
    model = SimpleNamespace(head_dim=HD, sliding_window=window, attention_chunk_size=chunk)
    shard = SimpleNamespace(b_dev=B, heads=H, kv_heads=KV)
    return SimpleNamespace(model=model, shard=shard)


def _kind(sliding: bool = False, chunked: bool = False) -> SimpleNamespace:
    return SimpleNamespace(sliding=sliding, chunked=chunked)


def _pairs(q: int, kv: int, keys_of) -> float:  # noqa: ANN001
    """(query, key) pairs of the last ``q`` of ``kv`` positions, by brute force."""
    return float(sum(keys_of(j) for j in range(kv - q + 1, kv + 1)))


@pytest.mark.parametrize(("q", "kv"), [(8192, 8192), (1024, 5120), (100, 100), (64, 200)])
def test_a_sliding_window_query_attends_the_window(perf, q: int, kv: int) -> None:
    w = 128
    t = _gqa_prefill(perf, _layer(window=w), _kind(sliding=True), q, np.array([kv]))
    want = 4.0 * B * H * HD * _pairs(q, kv, lambda j: min(j, w))
    assert t.flops == pytest.approx(want, rel=1e-12)
    # the kernel reads the window before the first query, not the whole cache
    assert t.read_bytes == pytest.approx(B * (q * H + 2 * KV * min(kv, q + w)) * HD * perf.ab)


@pytest.mark.parametrize(("q", "kv"), [(10000, 10000), (3000, 9000), (512, 512)])
def test_a_chunked_query_attends_its_chunk_so_far(perf, q: int, kv: int) -> None:
    c = 8192
    t = _gqa_prefill(perf, _layer(chunk=c), _kind(chunked=True), q, np.array([kv]))
    want = 4.0 * B * H * HD * _pairs(q, kv, lambda j: (j - 1) % c + 1)
    assert t.flops == pytest.approx(want, rel=1e-12)


def test_full_attention_is_the_causal_prefill(perf) -> None:
    kv = np.array([4096.0])
    t = _gqa_prefill(perf, _layer(), _kind(), 4096, kv)
    assert t == perf.attention_prefill(B, H, KV, HD, 4096, kv)


def test_an_8k_prompt_costs_a_window_layer_far_less_than_a_full_one(perf) -> None:
    kv = np.array([8192.0])
    window = _gqa_prefill(perf, _layer(window=128), _kind(sliding=True), 8192, kv)
    full = _gqa_prefill(perf, _layer(window=128), _kind(), 8192, kv)
    assert full.flops / window.flops > 30  # 8192·8193/2 pairs against about 8192·128
    assert window.seconds < full.seconds / 5
