"""Operator cycle formulas against the golden values of analytic-model §1.5.

The §1.5 tables are read from the spec itself (every cell is checked, exact integer equality: the
reference returns integers and the spec prints them in full).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plena_opt.chip import PerfModel, load_chip
from plena_opt.errors import PlenaInputError, PlenaNotFoundError

PERF = PerfModel()


def _section(spec: str, start: str, end: str) -> str:
    return spec[spec.index(start) : spec.index(end)]


def _golden_tables(shared_dir: Path) -> list[tuple[dict[str, int], list[dict[str, str]]]]:
    """[(shape dict, rows as {column: cell})] for each table of §1.5."""
    text = (shared_dir / "spec" / "analytic-model.md").read_text()
    section = _section(text, "### 1.5 Golden operator values", "## 2. Single-chip")
    tables: list[tuple[dict[str, int], list[dict[str, str]]]] = []
    header: list[str] = []
    for line in section.splitlines():
        if "shapes (" in line:
            shapes = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
            tables.append((shapes, []))
        elif line.startswith("| mode"):
            header = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith(("| prefill", "| decode")):
            cells = [c.strip() for c in line.strip("|").split("|")]
            tables[-1][1].append(dict(zip(header, cells, strict=True)))
    return tables


@pytest.fixture(scope="module")
def tables(shared_dir: Path) -> list[tuple[dict[str, int], list[dict[str, str]]]]:
    found = _golden_tables(shared_dir)
    assert [len(rows) for _, rows in found] == [6, 4]  # the spec's two tables
    return found


def _ints(row: dict[str, str]) -> tuple[str, int, int, int]:
    return row["mode"], int(row["s"]), int(row["b"]), int(row["kv"])


def test_llama_8b_operator_table(tables: list) -> None:
    shapes, rows = tables[0]
    h, H, KV, hd, F = (shapes[k] for k in ("h", "H", "KV", "hd", "F"))
    assert (h, H, KV, hd, F) == (4096, 32, 8, 128, 14336)
    for row in rows:
        mode, s, b, kv = _ints(row)
        got = {
            "rms": PERF.rms_layer(h, s, b, mode),
            "proj": PERF.projection(h, H, KV, hd, s, b, mode),
            "flash attn": PERF.flash_attention(H, KV, hd, s, kv, b, mode),
            "residual": PERF.residual(h, s, b, mode),
            "ffn": PERF.feed_forward(h, F, s, b, mode),
            "emb": PERF.embeddings(h, s, b, mode),
        }
        got["block = 2·rms+proj+attn+res+ffn"] = (
            2 * got["rms"] + got["proj"] + got["flash attn"] + got["residual"] + got["ffn"]
        )
        expected = {k: int(v) for k, v in row.items() if k not in ("mode", "s", "b", "kv")}
        assert got == expected, row
        assert all(type(v) is int for v in got.values())


def test_gpt_oss_20b_operator_table(tables: list) -> None:
    shapes, rows = tables[1]
    h, H, KV, hd, F, E, k, W = (shapes[x] for x in ("h", "H", "KV", "hd", "F", "E", "k", "W"))
    for row in rows:
        mode, s, b, kv = _ints(row)
        got = {
            "rms": PERF.rms_layer(h, s, b, mode),
            "proj": PERF.projection(h, H, KV, hd, s, b, mode),
            "full attn": PERF.flash_attention(H, KV, hd, s, kv, b, mode),
            "sliding attn": PERF.sliding_window_attention(H, KV, hd, s, kv, b, W, 1, mode),
            "mlp_moe": PERF.mlp_moe(h, s, b, E, k, F, mode),
            "residual": PERF.residual(h, s, b, mode),
        }
        expected = {k: int(v) for k, v in row.items() if k not in ("mode", "s", "b", "kv")}
        assert got == expected, row
        assert all(type(v) is int for v in got.values())


def test_lm_head_and_spill_values_stated_in_1_5() -> None:
    assert PERF.lm_head(4096, 128256, 1) == PERF.lm_head(4096, 128256, 4) == 256515
    assert PERF.lm_head(2880, 201088, 4) == 402179
    assert PERF.rms_layer(8192, 4096, 8, "prefill") == 1_056_778  # llama-3.1-70b, with spill
    assert PERF.rms_layer(8192, 2048, 4, "prefill") == 262_154  # no spill
    assert PERF.spill(8192 * 4096 * 8) == 8192 and PERF.spill(PERF.VS) == 0


def test_sliding_decode_dearer_than_flash_at_2048_for_gpt_oss() -> None:
    # §1.4: reproduce, do not fix (68,896 vs 39,744 cycles at b=4)
    sliding = PERF.sliding_window_attention(64, 8, 64, 1, 2048, 4, 128, mode="decode")
    assert sliding == 68896 > PERF.flash_attention(64, 8, 64, 1, 2048, 4, "decode") == 39744


def test_llada_helpers_follow_formulas() -> None:
    # lm_head_full_seq uses b·s rows; softmax_full_seq = b·s·c(Voc/Vl)·6·I[V_BASIC] (§1.4)
    assert PERF.lm_head_full_seq(4096, 128256, 1, 4) == PERF.lm_head(4096, 128256, 4)
    assert PERF.lm_head_full_seq(4096, 128256, 256, 4) == 3 + 8 * 2 * 1002 * 128
    assert PERF.softmax_full_seq(128256, 256, 4) == 4 * 256 * 63 * 6


def test_decode_ignores_s_and_prefill_with_one_token_differs_only_by_spill() -> None:
    args = (4096, 14336)
    assert PERF.feed_forward(*args, 1, 4, "decode") == PERF.feed_forward(*args, 99, 4, "decode")
    assert PERF.feed_forward(*args, 1, 4, "prefill") == PERF.feed_forward(*args, 1, 4, "decode")


@settings(max_examples=60, deadline=None)
@given(
    kv_heads=st.sampled_from([1, 2, 4, 8]),
    group=st.sampled_from([1, 2, 4, 8, 16, 32]),
    hd=st.sampled_from([64, 128, 256]),
    b=st.integers(1, 128),
    kv=st.integers(1, 20000),
)
def test_decode_attention_is_tiles_times_per_tile_cost(
    kv_heads: int, group: int, hd: int, b: int, kv: int
) -> None:
    H = kv_heads * group
    tc = -(-kv // PERF.MLEN)
    per_tile = PERF.flash_attention_decode_tc(H, kv_heads, hd, b)
    assert PERF.flash_attention(H, kv_heads, hd, 1, kv, b, "decode") == tc * per_tile


@settings(max_examples=40, deadline=None)
@given(s=st.integers(1, 8192), b=st.integers(1, 16))
def test_prefill_operators_grow_with_tokens(s: int, b: int) -> None:
    for fn in (
        lambda s_: PERF.rms_layer(4096, s_, b, "prefill"),
        lambda s_: PERF.projection(4096, 32, 8, 128, s_, b, "prefill"),
        lambda s_: PERF.feed_forward(4096, 14336, s_, b, "prefill"),
        lambda s_: PERF.flash_attention(32, 8, 128, s_, s_, b, "prefill"),
    ):
        assert 0 < fn(s) <= fn(s + 1)


def test_bad_mode_and_unknown_instruction() -> None:
    with pytest.raises(PlenaInputError, match="mode must be one of prefill, decode"):
        PERF.rms_layer(4096, 1, 1, "train")
    with pytest.raises(PlenaNotFoundError, match="M_NOPE"):
        PERF.I("M_NOPE")


def test_perf_model_uses_the_given_chip() -> None:
    chip = load_chip({"config": {"VECTOR_SRAM_SIZE": 1}})
    perf = PerfModel(chip)
    assert perf.chip is chip
    # tiny SRAM: a 4096x2048x4 activation spills ((n - VS) // (Vl*Pv)) * 2 prefetches
    n = 4096 * 2048 * 4
    assert perf.spill(n) == ((n - 2048) // (2048 * 16)) * 2
    assert perf.rms_layer(4096, 2048, 4, "prefill") == PERF.rms_layer(
        4096, 2048, 4, "prefill"
    ) + perf.spill(n)
