"""The routed EP dispatch's memo key reads the rows' content (r9vec, issue 26).

Large rows whose expert ids fit one byte are hashed one byte per id; the key must still be
equal exactly for equal rows (a copy of the rows hits the memo and prices the same) and differ
for other rows, in both forms.
"""

from __future__ import annotations

import deepstack as ds
import numpy as np
import pytest
from deepstack.ep_dispatch import COMPACT_KEY_IDS, _content_key
from deepstack.topology import Level


def _rows(tokens: int, experts: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(rng.integers(0, experts, (tokens, 8)), dtype=np.int64)


@pytest.mark.parametrize("tokens", [8, COMPACT_KEY_IDS // 8 - 1, COMPACT_KEY_IDS // 8, 7168])
@pytest.mark.parametrize("experts", [128, 256, 300])
def test_equal_rows_equal_keys_other_rows_other_keys(tokens: int, experts: int) -> None:
    rows = _rows(tokens, experts)
    key = _content_key(rows)
    assert key == _content_key(rows.copy())
    form = "u8" if rows.size >= COMPACT_KEY_IDS and rows.max() < 256 else "i8"
    assert key[0] == form
    other = rows.copy()
    other[tokens // 2, 3] = (other[tokens // 2, 3] + 1) % experts
    assert _content_key(other) != key


def test_a_copy_of_the_rows_hits_the_pattern_memo_and_prices_the_same() -> None:
    one, eight = Level("switch", 1, 1, 0.0, 450e9), Level("switch", 1, 8, 1e-6, 450e9)
    net = ds.Network(ds.make_hierarchy("t", one, one, eight))
    scheme = ds.ParallelScheme(ep=8, ep1=8)
    rows = _rows(4096, 128, seed=3)  # 4,096 tokens < 8,192: the routed branch, compact key
    args = {"bytes_per_token": 7168, "num_experts": 128, "top_k": 8, "micro_batch": 1,
            "seq": 4096}  # fmt: skip
    first = net.ep_all_to_all(scheme, rows=rows, **args)
    patterns = net.cache_info()["patterns"]
    again = net.ep_all_to_all(scheme, rows=rows.copy(), **args)
    assert net.cache_info()["patterns"] == patterns and again == first
    net.ep_all_to_all(scheme, rows=_rows(4096, 128, seed=4), **args)
    assert net.cache_info()["patterns"] == patterns + 1


def test_read_only_rows_keep_their_key_by_identity_and_price_the_same() -> None:
    """r11cold: read-only rows (the evaluator's frozen routing rows) keep their content key by
    identity: a second call neither copies nor hashes them, and prices as a writeable copy
    (hashed anew) does; rows that can change are hashed on every call."""
    import deepstack.ep_dispatch as col

    one, eight = Level("switch", 1, 1, 0.0, 450e9), Level("switch", 1, 8, 1e-6, 450e9)
    net = ds.Network(ds.make_hierarchy("t", one, one, eight))
    scheme = ds.ParallelScheme(ep=8, ep1=8)
    rows = _rows(2048, 128, seed=5)
    rows.setflags(write=False)
    args = {"bytes_per_token": 7168, "num_experts": 128, "top_k": 8, "micro_batch": 1,
            "seq": 1024}  # fmt: skip
    first = net.ep_all_to_all(scheme, rows=rows, **args)
    hashed: list[int] = []
    key = col._content_key
    mp = pytest.MonkeyPatch()
    mp.setattr(col, "_content_key", lambda a: hashed.append(a.size) or key(a))
    try:
        assert net.ep_all_to_all(scheme, rows=rows, **args) == first
        assert hashed == []  # kept by identity
        assert net.ep_all_to_all(scheme, rows=rows.copy(), **args) == first
        assert hashed == [1024 * 8]  # a writeable copy: hashed
    finally:
        mp.undo()
    base = _rows(2048, 128, seed=5)
    view = base[:]
    view.setflags(write=False)  # read-only, but its memory is a writeable array's
    hashed.clear()
    mp.setattr(col, "_content_key", lambda a: hashed.append(a.size) or key(a))
    try:
        net.ep_all_to_all(scheme, rows=view, **args)
        net.ep_all_to_all(scheme, rows=view, **args)
        assert hashed == [1024 * 8, 1024 * 8]  # not kept: hashed on every call
    finally:
        mp.undo()
    fresh = ds.Network(ds.make_hierarchy("t", one, one, eight))
    assert fresh.ep_all_to_all(scheme, rows=rows.copy(), **args) == first
