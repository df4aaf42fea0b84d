"""Cross-check PerfModel + the catalog against the single-chip script values of analytic-model §2.4.

The scripts (§2.1 llama, §2.2 gpt-oss) are rebuilt here from the operator methods, so the whole
§2.4 table exercises every operator at real model shapes (spill, sliding windows, MoE, LM head).
The spec prints milliseconds with 4 decimals and TPS with 3: tolerance = half a unit in the last
printed digit (plus float slack).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plena_opt.chip import PerfModel
from plena_opt.models import ModelSpec, load_model

PERF = PerfModel()
FREQ = 1e9
NAMES = {"est-405b": "estimated-llama-3.1-405b"}


def _llama_prefill(m: ModelSpec, s: int, b: int) -> int:
    h, H, KV, hd = m.hidden_size, m.num_heads, m.num_kv_heads, m.hidden_size // m.num_heads
    p = "prefill"
    layer = (
        2 * PERF.rms_layer(h, s, b, p)
        + PERF.projection(h, H, KV, hd, s, b, p)
        + PERF.flash_attention(H, KV, hd, s, s, b, p)
        + PERF.residual(h, s, b, p)
        + PERF.feed_forward(h, m.intermediate_size, s, b, p)
    )
    return PERF.embeddings(h, s, b, p) + m.num_layers * layer


def _llama_decode(m: ModelSpec, s_in: int, tokens: int, b: int) -> int:
    h, H, KV, hd = m.hidden_size, m.num_heads, m.num_kv_heads, m.hidden_size // m.num_heads
    d = "decode"
    fixed = (
        2 * PERF.rms_layer(h, 1, b, d)
        + PERF.projection(h, H, KV, hd, 1, b, d)
        + PERF.residual(h, 1, b, d)
        + PERF.feed_forward(h, m.intermediate_size, 1, b, d)
    )
    total = sum(fixed + PERF.flash_attention(H, KV, hd, 1, s_in + t, b, d) for t in range(tokens))
    return 2 * m.num_layers * total


def _oss_layer(m: ModelSpec, i: int, s: int, kv: int, b: int, mode: str) -> int:
    h, H, KV, hd = m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim
    if m.layer_types[i] == "sliding_attention":
        attn = PERF.sliding_window_attention(H, KV, hd, s, kv, b, m.sliding_window, 1, mode)
    else:
        attn = PERF.flash_attention(H, KV, hd, s, kv, b, mode)
    if m.mlp_types[i] == "moe":  # the script passes the dense intermediate_size (§2.2)
        mlp = PERF.mlp_moe(h, s, b, m.num_experts, m.top_k, m.intermediate_size, mode)
    else:
        mlp = PERF.feed_forward(h, m.intermediate_size, s, b, mode)
    return (
        2 * PERF.rms_layer(h, s, b, mode)
        + PERF.projection(h, H, KV, hd, s, b, mode)
        + attn
        + 2 * PERF.residual(h, s, b, mode)
        + mlp
    )


def _oss_prefill(m: ModelSpec, s: int, b: int) -> int:
    layers = sum(_oss_layer(m, i, s, s, b, "prefill") for i in range(m.num_layers))
    return (
        PERF.embeddings(m.hidden_size, s, b, "prefill")
        + layers
        + PERF.lm_head(m.hidden_size, m.vocab_size, b)
    )


def _oss_decode(m: ModelSpec, s_in: int, tokens: int, b: int) -> int:
    return 2 * sum(
        _oss_layer(m, i, 1, s_in + t, b, "decode")
        for t in range(tokens)
        for i in range(m.num_layers)
    )


def _rows(shared_dir: Path) -> list[list[str]]:
    text = (shared_dir / "spec" / "analytic-model.md").read_text()
    section = text[text.index("### 2.4 Golden end-to-end") : text.index("## 3. Memory model")]
    rows = []
    for line in section.splitlines():
        if line.startswith(("| llama /", "| gpt_oss /")):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_section_2_4_values(shared_dir: Path) -> None:
    rows = _rows(shared_dir)
    assert len(rows) == 13
    for script_model, batch, s_in, out, dev, prefill_ms, ttft_ms, tps in rows:
        script, name = (x.strip() for x in script_model.split("/"))
        model = load_model(NAMES.get(name, name))
        b, s, n, d = int(batch), int(s_in), int(out), int(dev)
        db = b // d
        if script == "llama":
            prefill = _llama_prefill(model, s, db)
            first, decode = _llama_decode(model, s, 1, db), _llama_decode(model, s, n, db)
        else:
            prefill = _oss_prefill(model, s, db)
            first, decode = _oss_decode(model, s, 1, db), _oss_decode(model, s, n, db)
        assert prefill / FREQ * 1e3 == pytest.approx(float(prefill_ms), abs=5.1e-5)
        assert (prefill + first) / FREQ / d * 1e3 == pytest.approx(float(ttft_ms), abs=5.1e-5)
        assert b * n / (decode / FREQ) == pytest.approx(float(tps), abs=5.1e-4)
