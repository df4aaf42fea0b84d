"""vLLM's default step budget by release and GPU memory (``serving.vllm_budget``; issue 23): the
>= 160 GiB tier (16384 tokens) exists from 0.28.0; before it such GPUs ran 8192."""

from __future__ import annotations

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.serving import engine_model
from plena_opt.serving.engines import VERSIONS
from plena_opt.serving.vllm_budget import (
    GIB,
    vllm_batch_defaults,
    vllm_default_budget,
    vllm_large_tier,
)


@pytest.mark.parametrize(
    ("gib", "large", "want"),
    [(160, True, (16384, 1024)), (160 - 1 / GIB, True, (8192, 1024)),  # the tier's edge
     (192, False, (8192, 1024)),  # a release without the tier
     (70, True, (8192, 1024)), (70 - 1 / GIB, True, (2048, 256)), (24, False, (2048, 256))],
)  # fmt: skip
def test_memory_tiers_and_their_edges(gib: float, large: bool, want: tuple[int, int]) -> None:
    assert vllm_batch_defaults(gib * GIB, large) == want


@pytest.mark.parametrize(
    ("version", "want"),
    [("0.15.1", 8192), ("0.27.1", 8192), ("0.28.0", 16384), ("v0.28.0.post1", 16384),
     ("0.28", 16384), ("0.34.0", 16384), ("1.0.0", 16384)],
)  # fmt: skip
def test_a_b200_budget_by_release(version: str, want: int) -> None:
    b200 = 180e9  # bytes: above 160 GiB
    assert vllm_default_budget(b200, version) == want
    assert vllm_default_budget(141e9, version) == 8192  # H200: 8192 in every release


def test_a_pre_release_is_refused_naming_the_field() -> None:
    with pytest.raises(PlenaInputError, match="^backend_version ") as exc:
        vllm_large_tier("0.28.0rc1")
    assert exc.value.field == "backend_version"


@pytest.mark.parametrize(("chip", "want"), [("h100-sxm", 8192), ("h200-sxm", 8192),
                                             ("b200", 16384), ("gb200", 16384),
                                             ("mi325x", 16384)])  # fmt: skip
def test_the_modelled_release_prices_its_own_rule(chip: str, want: int) -> None:
    from plena_opt.chip import load_chip

    hbm = float(load_chip(chip).hbm.capacity_bytes.value)
    eng = engine_model("vllm", hbm)
    assert eng.budget_tokens == want == vllm_default_budget(hbm, VERSIONS["vllm"])
    assert eng.max_running == 1024
