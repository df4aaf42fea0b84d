"""Chip profiles: built-in defaults (analytic-model §1.1–§1.3), overrides and validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plena_opt.chip import INSTRUCTIONS, ChipProfile, PerfModel, list_chip_profiles, load_chip
from plena_opt.errors import PlenaInputError, PlenaNotFoundError, PlenaTypeError

# §1.2 "value at defaults" column, one entry per table row (the row's instructions share a value).
SPEC_1_2_DEFAULTS = {
    ("M_MM", "M_TMM"): 128,
    ("M_BMM", "M_BTMM"): 32768,
    ("M_MM_WO", "M_BMM_WO", "M_MV_WO", "M_BMV_WO"): 1,
    ("M_MV", "M_TMV", "M_BMV", "M_BTMV"): 129,
    ("V_BASIC",): 1,
    ("V_ADD_VV", "V_ADD_VF", "V_SUB_VV", "V_SUB_VF"): 1,
    ("V_MUL_VV", "V_MUL_VF"): 1,
    ("V_EXP_V", "V_RECI_V"): 2,
    ("V_RED_SUM",): 8,
    ("V_RED_MAX", "V_TOPK"): 5,
    ("S_BASIC", "S_ADD_FP", "S_SUB_FP", "S_MAX_FP", "S_MUL_FP"): 1,
    ("S_EXP_FP", "S_RECI_FP", "S_SQRT_FP"): 1,
    ("S_LD_FP", "S_ST_FP", "S_MAP_V_FP", "S_LD_INT", "S_ST_INT"): 1,
    ("S_ADD_INT", "S_ADDI_INT", "S_SUB_INT", "S_MUL_INT", "S_LUI_INT"): 1,
    ("H_PREFETCH_M", "H_PREFETCH_V", "H_STORE_V"): 1,
    (
        "C_SET_ADDR_REG",
        "C_SET_SCALE_REG",
        "C_SET_STRIDE_REG",
        "C_SET_V_MASK_REG",
        "C_LOOP_START",
        "C_LOOP_END",
        "C_BREAK",
    ): 1,
}


def test_default_instruction_table_matches_spec() -> None:
    costs = load_chip().instruction_costs
    expected = {op: v for ops, v in SPEC_1_2_DEFAULTS.items() for op in ops}
    assert set(expected) == set(INSTRUCTIONS) == set(costs)
    assert costs == expected
    perf = PerfModel()
    assert all(perf.I(op) == v and type(perf.I(op)) is int for op, v in expected.items())


def test_default_config_and_derived_constants() -> None:
    chip = load_chip()
    assert chip.name == "plena-default"
    cfg = chip.config
    assert (cfg.MLEN, cfg.BLEN, cfg.VLEN, cfg.HLEN) == (2048, 128, 2048, 128)
    assert cfg.HBM_SIZE == 128 * 2**30
    assert chip.latency.VECTOR_SUM_CYCLES == 8  # dc_lib_en, not dc_lib_dis (20)
    assert chip.namespace()["SA_ACC_CYCLES"] == 5
    perf = PerfModel(chip)
    assert perf.VS == 134_217_728  # §1.3
    assert perf.Pv == 16
    assert (perf.MLEN, perf.BLEN, perf.VLEN, perf.HLEN) == (2048, 128, 2048, 128)


def test_builtin_profiles_listed_and_variant_differs_only_where_spec_says() -> None:
    assert {"plena-default", "plena-rtl-aligned"} <= set(list_chip_profiles())
    base = load_chip("plena-default").instruction_costs
    rtl = load_chip("plena-rtl-aligned").instruction_costs
    assert rtl["M_MM"] == rtl["M_TMM"] == 3 * 128 + 11
    assert all(rtl[op] == 6 + 128 + 3 for op in ("M_MV", "M_TMV", "M_BMV", "M_BTMV"))
    changed = {op for op in base if base[op] != rtl[op]}
    assert changed == {"M_MM", "M_TMM", "M_MV", "M_TMV", "M_BMV", "M_BTMV"}


def test_dict_override_changes_costs_and_operators() -> None:
    chip = load_chip({"name": "narrow", "config": {"BLEN": 64}})
    assert chip.name == "narrow"
    assert chip.config.BLEN == 64 and chip.config.MLEN == 2048  # the rest comes from the base
    assert chip.instruction_costs["M_BTMM"] == (2048 // 64) ** 2 * 64
    assert chip.instruction_costs["M_MV"] == 65
    default, narrow = PerfModel(), PerfModel(chip)
    # prefill FFN, T=8192 (§1.4):
    # 2*c(T/64)*c(h/M)*c(F/64)*64 + c(F/Vl)*6*T + c(T/64)*c(F/M)*c(h/64)*64
    expected = 2 * 128 * 2 * 224 * 64 + 7 * 6 * 8192 + 128 * 7 * 64 * 64
    assert narrow.feed_forward(4096, 14336, 2048, 4, "prefill") == expected
    assert default.feed_forward(4096, 14336, 2048, 4, "prefill") == 5849088  # §1.5
    # decode attention: c(hd/Bl)*I[M_MV] per head grows from 1*129 to 2*65
    assert narrow.flash_attention(32, 8, 128, 1, 2048, 1, "decode") - default.flash_attention(
        32, 8, 128, 1, 2048, 1, "decode"
    ) == 8 * 4 * (2 * 65 - 129) + 8 * (65 - 129)


def test_instruction_and_latency_overrides() -> None:
    chip = load_chip({"instructions": {"M_MM": "2*BLEN+3"}, "latency": {"VECTOR_EXP_CYCLES": 5}})
    assert chip.instruction_costs["M_MM"] == 259
    assert chip.instruction_costs["V_EXP_V"] == 6
    assert chip.instruction_costs["V_RECI_V"] == 6  # RECI uses the EXP constant (§1.2)
    assert PerfModel(chip).lm_head(4096, 128256, 1) == 3 + 2 * 1002 * 259


def test_json_file_override(tmp_path: Path) -> None:
    path = tmp_path / "my-chip.json"
    path.write_text(json.dumps({"config": {"VECTOR_SRAM_SIZE": 1024}}))
    chip = load_chip(path)
    assert chip.name == "my-chip"
    assert PerfModel(chip).VS == 1024 * 2048
    assert load_chip(str(path)).config.VECTOR_SRAM_SIZE == 1024


def test_override_on_another_base() -> None:
    chip = load_chip({"base": "plena-rtl-aligned", "config": {"BLEN": 64}})
    assert chip.instruction_costs["M_MM"] == 3 * 64 + 11


def test_profile_instance_passes_through_and_is_frozen() -> None:
    chip = load_chip()
    assert load_chip(chip) is chip
    with pytest.raises(ValueError):
        chip.name = "other"  # type: ignore[misc]
    assert isinstance(chip, ChipProfile)
    assert chip.describe()["instruction_costs"]["M_BTMM"] == 32768


@pytest.mark.parametrize(
    ("override", "error", "field", "fragment"),
    [
        ({"config": {"BLEN": 96}}, PlenaInputError, "config.MLEN", "multiple of config.BLEN"),
        ({"config": {"VLEN": 64}}, PlenaInputError, "config.VLEN", "at least config.BLEN"),
        ({"config": {"HLEN": 4096}}, PlenaInputError, "config.HLEN", "must not exceed"),
        ({"config": {"MLEN": 0}}, PlenaInputError, "config.MLEN", "greater than 0"),
        ({"config": {"MLEN": -2048}}, PlenaInputError, "config.MLEN", "greater than 0"),
        ({"config": {"MLEN": 2048.0}}, PlenaTypeError, "config.MLEN", "valid integer"),
        ({"config": {"MLEN": "2048"}}, PlenaTypeError, "config.MLEN", "valid integer"),
        ({"config": {"BLEN": True}}, PlenaTypeError, "config.BLEN", "valid integer"),
        ({"config": {"COLOUR": 1}}, PlenaInputError, "config.COLOUR", "unknown key"),
        (
            {"latency": {"VECTOR_ADD_CYCLES": -1}},
            PlenaInputError,
            "latency.VECTOR_ADD_CYCLES",
            "greater than or equal to 0",
        ),
        ({"colour": "red"}, PlenaInputError, "colour", "unknown key"),
        ({"config": [1, 2]}, PlenaTypeError, "config", "JSON object"),
        (
            {"instructions": {"M_MM": "BLEN-128"}},
            PlenaInputError,
            "instructions.M_MM",
            "greater than zero",
        ),
        ({"instructions": {"M_MM": "BLEN/3"}}, PlenaInputError, "instructions.M_MM", "whole"),
        ({"instructions": {"M_MM": "open('x')"}}, PlenaInputError, "instructions.M_MM", "only"),
        ({"instructions": {"M_MM": "FOO"}}, PlenaInputError, "instructions.M_MM", "unknown name"),
        ({"instructions": {"M_FOO": "1"}}, PlenaInputError, "instructions.M_FOO", "unknown"),
        ({"instructions": {"M_MM": 1.5}}, PlenaTypeError, "instructions.M_MM", "M_MM"),
        ({"base": "nope"}, PlenaNotFoundError, "chip", "plena-default"),
    ],
)
def test_invalid_overrides_name_the_field(
    override: dict, error: type[Exception], field: str, fragment: str
) -> None:
    with pytest.raises(error) as info:
        load_chip(override)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_unknown_name_lists_profiles() -> None:
    with pytest.raises(PlenaNotFoundError, match="plena-default"):
        load_chip("no-such-chip")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot read"),
        ("{not json", "not valid JSON"),
        (b"\xff\xfe\x00", "is not UTF-8 text"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_profile_files_name_the_path(
    tmp_path: Path, content: str | bytes | None, fragment: str
) -> None:
    path = tmp_path / "chip.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(PlenaInputError, match=fragment) as info:
        load_chip(path)
    assert str(path) in str(info.value)
