"""Each kind of vLLM row resolves to the async (overlap) scheduling it ran: the InferenceX recipe's
flag at its date, else its version's default (``validate.serving_recipes.vllm_async_scheduling``),
and is priced with it (``serving_score.step_model``)."""

from __future__ import annotations

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.validate.serving_rows import ServingRow, resolve
from plena_opt.validate.serving_score import _parts, step_model

OSS = {"backend": "vllm", "model_path": "openai/gpt-oss-120b", "system": "h100_sxm",
       "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "2", "pp_size": "1",
       "moe_tp_size": "2", "moe_ep_size": "1", "concurrency": "8", "gemm_quant_mode": "nvfp4",
       "moe_quant_mode": "nvfp4"}  # fmt: skip
QWEN = {"backend": "vllm", "model_path": "Qwen/Qwen3-32B", "system": "h100_sxm",
        "mode": "agg", "isl": "1024", "osl": "256", "tp_size": "2", "pp_size": "1",
        "concurrency": "8"}  # fmt: skip
IX = "2026_04_06_openai_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c8_tp2_ep1_1"


def _async(rid: str, fields: dict) -> bool | None:
    return resolve(ServingRow(rid, fields)).async_scheduling


@pytest.mark.parametrize(
    ("fields", "want"),
    [({"measured_on": "2025-11-02"}, True),  # no version: the recipe passed the flag
     ({"measured_on": "2025-12-08", "backend_version": "0.11.2"}, True),  # flag on 0.11.2
     ({"measured_on": "2026-02-25", "backend_version": "0.15.1"}, True),  # default, no flag
     ({"measured_on": "2026-03-27", "backend_version": "0.18.0"}, True),
     # an image tag names the release when the version column is empty
     ({"measured_on": "2026-03-27", "engine_image": "vllm/vllm-openai:v0.18.0"}, True)],
)  # fmt: skip
def test_inferencex_gpt_oss_rows_ran_it_by_flag_or_default(fields: dict, want: bool) -> None:
    assert _async(IX, {**OSS, **fields}) is want


def test_the_recipe_flag_is_dated_per_vendor() -> None:
    from plena_opt.validate.serving_recipes import inferencex_async_flag

    row = ServingRow(IX, {**OSS, "measured_on": "2026-02-24"})
    assert inferencex_async_flag(row, "h100-sxm", "gpt-oss-120b")  # NVIDIA until 2026-02-25
    assert not inferencex_async_flag(row, "mi300x", "gpt-oss-120b")  # dropped 2026-01-21
    assert not inferencex_async_flag(row, "h100-sxm", "qwen3-32b")  # no such recipe
    assert not inferencex_async_flag(ServingRow("grid_row", row.fields), "h100-sxm", "gpt-oss-120b")
    undated = ServingRow("2025_12_20_x", {**OSS})  # the id's dump date bounds the run's
    assert inferencex_async_flag(undated, "h100-sxm", "gpt-oss-120b")


@pytest.mark.parametrize(
    ("fields", "want"),
    [({"backend_version": "0.12.0"}, False),  # the shipped Qwen3-32B rows
     ({"backend_version": "0.14.0"}, True),
     ({"backend_version": "0.14.0", "pp_size": "2"}, False),  # 0.14 resolves it off with PP
     ({"backend_version": "0.15.1", "pp_size": "2"}, True),
     ({"measured_on": "2025-12-01"}, False),  # no version, measured before 0.14.0 existed
     ({"measured_on": "2026-03-01"}, True),  # no version, later: the modelled 0.34.0
     ({}, True)],  # undated, no version: the modelled 0.34.0
)  # fmt: skip
def test_other_rows_run_their_versions_default(fields: dict, want: bool) -> None:
    d = resolve(ServingRow("q", {**QWEN, **fields}))
    assert d.async_scheduling is want
    assert _parts(d, 0.0)[5].overlap_schedule is want  # the engine it is priced with


def test_a_malformed_version_is_refused_naming_the_field() -> None:
    for bad in ("0.14.0rc1", "latest"):
        with pytest.raises(PlenaInputError, match="^backend_version ") as exc:
            resolve(ServingRow("q", {**QWEN, "backend_version": bad}))
        assert exc.value.field == "backend_version"
    sglang = resolve(ServingRow("q", {**QWEN, "backend": "sglang", "backend_version": "0.5.9"}))
    assert sglang.async_scheduling is None  # not vLLM: the engine's own default
    assert step_model(sglang).engine.overlap_schedule


B200 = {**QWEN, "system": "b200_sxm"}


@pytest.mark.parametrize(
    ("fields", "tier", "budget"),
    [({"backend_version": "0.15.1"}, False, 8192),  # the shipped B200 rows' release
     ({"backend_version": "0.27.1"}, False, 8192),
     ({"backend_version": "0.28.0"}, True, 16384),  # the first with the >= 160 GiB tier
     ({"engine_image": "vllm/vllm-openai:v0.28.0"}, True, 16384),
     ({"measured_on": "2025-10-20"}, False, 8192),  # no version, before 0.28.0 existed
     ({"measured_on": "2026-09-01"}, True, 16384),  # no version, later: the modelled 0.34.0
     ({}, True, 16384)],  # undated: the modelled release
)  # fmt: skip
def test_b200_rows_are_priced_at_their_releases_budget(fields: dict, tier: bool,
                                                        budget: int) -> None:  # fmt: skip
    d = resolve(ServingRow("q", {**B200, **fields}))
    assert d.vllm_large_tier is tier
    assert _parts(d, 0.0)[5].budget_tokens == budget
    h100 = resolve(ServingRow("q", {**QWEN, **fields}))  # 80 GB: 8192 in every release
    assert _parts(h100, 0.0)[5].budget_tokens == 8192
    sglang = resolve(ServingRow("q", {**B200, **fields, "backend": "sglang"}))
    assert sglang.vllm_large_tier is None
