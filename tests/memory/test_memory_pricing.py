"""Stage pricing, PhaseTotals and HBM storage precision (analytic-model §3.3, §7.7 "estimate").

The golden check rebuilds the DRAM traffic of llama-3.1-8b from the §3.3 formulas (weights, KV,
activation spill, embedding rows) and prices it with ``price_stage``/``PhaseTotals``. Bytes, memory
time and DRAM energy do not depend on compute cycles, so they must match the reference's phase
totals; tolerance rel 1e-12 (the reference's own parity tolerance, tighter than the README's 1e-9).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.memory import (
    DramEnergyConfig,
    FixedBandwidthMemory,
    HbmStoragePrecision,
    PhaseEstimate,
    PhaseTotals,
    StackedDramModel,
    element_bits,
    fixed_bandwidth,
    load_memory,
    price_stage,
    unbounded,
)
from tests.memory.test_memory_config import fictional_dram

WAVES = StackedDramModel("waves", fictional_dram(apply_wave_quantization=True))


def test_components_are_quantised_separately_then_summed() -> None:
    stage = price_stage(
        0.0, {"a": 1.0, "b": 673.0, "zero": 0.0, "neg": -5.0}, {"w": 10.0}, WAVES, 1e9
    )
    assert stage.read_bytes == 672.0 + 1344.0
    assert stage.write_bytes == 672.0
    # quantising the sum instead would give 1344 for the reads
    assert price_stage(0.0, {"ab": 674.0}, {}, WAVES, 1e9).read_bytes == 1344.0


def test_roofline_takes_the_max_and_serial_the_sum() -> None:
    memory = FixedBandwidthMemory(1e9)
    compute_bound = price_stage(2e6, {"w": 1e6}, {}, memory, 1e9)
    assert compute_bound.compute_seconds == 2e-3 and compute_bound.memory_seconds == 1e-3
    assert compute_bound.seconds == 2e-3 and compute_bound.memory_bound_seconds == 0.0
    memory_bound = price_stage(1e5, {"w": 1e6}, {"k": 1e6}, memory, 1e9)
    assert memory_bound.seconds == memory_bound.memory_seconds == 2e-3
    assert memory_bound.memory_bound_seconds == memory_bound.seconds
    serial = price_stage(2e6, {"w": 1e6}, {}, memory, 1e9, "serial")
    assert serial.seconds == pytest.approx(3e-3)
    assert serial.seconds >= compute_bound.seconds
    assert serial.memory_bound_seconds == 0.0


def test_unknown_overlap_policy_is_rejected() -> None:
    with pytest.raises(PlenaInputError, match="unsupported overlap policy 'max'") as info:
        price_stage(1.0, {}, {}, unbounded(), 1e9, "max")
    assert info.value.field == "overlap_policy"


def test_stage_energy() -> None:
    energy = DramEnergyConfig(read_pj_per_bit=2.47, write_pj_per_bit=2.71)
    memory = FixedBandwidthMemory(1e12, energy=energy)
    stage = price_stage(10.0, {"w": 100.0}, {"k": 40.0}, memory, 1e9)
    assert stage.dram_energy_pj == pytest.approx(8 * (100 * 2.47 + 40 * 2.71))
    assert price_stage(10.0, {"w": 100.0}, {}, unbounded(), 1e9).dram_energy_pj is None


def test_phase_totals_add_repeat_and_freeze() -> None:
    energy = DramEnergyConfig(read_pj_per_bit=1.0, write_pj_per_bit=1.0)
    memory = FixedBandwidthMemory(1e9, energy=energy)
    stage = price_stage(5e5, {"w": 1e6}, {"k": 2e5}, memory, 1e9)
    totals = PhaseTotals.for_memory(memory)
    totals.add(stage, 3)
    totals.add(stage)
    total = totals.freeze()
    assert isinstance(total, PhaseEstimate)
    for field in ("seconds", "compute_seconds", "memory_seconds", "read_bytes", "write_bytes"):
        assert getattr(total, field) == pytest.approx(4 * getattr(stage, field))
    assert total.dram_energy_pj == pytest.approx(4 * stage.dram_energy_pj)
    assert list(total.to_dict()) == [
        "seconds",
        "compute_seconds",
        "memory_seconds",
        "memory_bound_seconds",
        "read_bytes",
        "write_bytes",
        "dram_energy_pj",
    ]
    untracked = PhaseTotals(track_energy=False)
    untracked.add(stage)
    assert untracked.freeze().dram_energy_pj is None
    assert PhaseTotals.for_memory(unbounded()).freeze().dram_energy_pj is None


def test_mxfp8_default_precision() -> None:
    precision = HbmStoragePrecision.default()
    assert precision.to_dict() == {
        "weight_bytes": 1.125,
        "kv_read_bytes": 1.125,
        "kv_write_bytes": 1.125,
        "activation_bytes": 1.125,
    }


@pytest.mark.parametrize(
    ("spec", "bits"),
    [
        (
            {
                "format": "Plain",
                "DATA_TYPE": {"type": "Fp", "sign": True, "exponent": 8, "mantissa": 7},
            },
            16,
        ),
        ({"format": "Plain", "DATA_TYPE": {"type": "Int", "width": 32}}, 32),
        (
            {
                "format": "Mx",
                "block": 32,
                "ELEM": {"type": "Fp", "sign": True, "exponent": 2, "mantissa": 1},
                "SCALE": {"type": "Fp", "sign": False, "exponent": 8, "mantissa": 0},
            },
            4.25,
        ),
        ({"type": "Fp", "sign": True, "exponent": 5, "mantissa": 10}, 16),
        (
            {
                "format": "Mx",
                "block": 8,
                "ELEM": {"type": "Fp", "sign": True, "exponent": 4, "mantissa": 3},
                "SCALE": {"type": "Fp", "sign": False, "exponent": 8, "mantissa": 0},
            },
            9,
        ),
    ],
    ids=["BF16", "Int32", "MXFP4-block32", "FP16", "MXFP8"],
)
def test_element_bits(spec: dict, bits: float) -> None:
    assert element_bits(spec) == bits


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"format": "Tiled"}, "p.format"),
        ({"format": "Mx", "block": 0, "ELEM": {}, "SCALE": {}}, "p.block"),
        ({"format": "Plain", "DATA_TYPE": {"type": "Int", "width": True}}, "p.DATA_TYPE.width"),
        ({"format": "Plain", "DATA_TYPE": {"type": "Complex"}}, "p.DATA_TYPE.type"),
    ],
)
def test_element_bits_errors_name_the_field(spec: dict, field: str) -> None:
    with pytest.raises(PlenaInputError) as info:
        element_bits(spec, "p")
    assert info.value.field == field and field in str(info.value)


def test_precision_from_tables_and_settings(tmp_path: Path) -> None:
    bf16 = {
        "format": "Plain",
        "DATA_TYPE": {"type": "Fp", "sign": True, "exponent": 8, "mantissa": 7},
    }
    tables = {
        "HBM_M_WEIGHT_TYPE": bf16,
        "HBM_M_KV_TYPE": bf16,
        "HBM_V_KV_TYPE": bf16,
        "HBM_V_ACT_TYPE": {"format": "Plain", "DATA_TYPE": {"type": "Int", "width": 32}},
    }
    precision = HbmStoragePrecision.from_precision_tables(tables)
    assert (precision.weight_bytes, precision.activation_bytes) == (2.0, 4.0)
    settings = tmp_path / "plena_settings.toml"
    settings.write_text(
        "[ANALYTIC.PRECISION.HBM_M_WEIGHT_TYPE]\nformat = 'Mx'\nblock = 8\n"
        "[ANALYTIC.PRECISION.HBM_M_WEIGHT_TYPE.ELEM]\n"
        "type = 'Fp'\nsign = true\nexponent = 4\nmantissa = 3\n"
        "[ANALYTIC.PRECISION.HBM_M_WEIGHT_TYPE.SCALE]\n"
        "type = 'Fp'\nsign = false\nexponent = 8\nmantissa = 0\n"
    )
    with pytest.raises(PlenaInputError, match="HBM_M_KV_TYPE is required"):
        HbmStoragePrecision.from_settings(settings)
    with pytest.raises(PlenaInputError, match="weight_bytes"):
        HbmStoragePrecision(0.0, 1.0, 1.0, 1.0)


# --- golden phase totals -------------------------------------------------------------------------

MLEN = 2048  # §1.1 default MLEN
VECTOR_SRAM_ELEMENTS = 65536 * 2048  # §1.3 VS


def _llama_traffic(cfg: dict, precision: HbmStoragePrecision, b: int, s: int):
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads, hd = cfg["num_key_value_heads"], cfg.get("head_dim") or h // heads
    block = 2 * h * (heads * hd) + 2 * h * (kv_heads * hd) + 3 * h * cfg["intermediate_size"]
    tokens = b * s
    ekv = 2 * tokens * kv_heads * hd
    spill = 4 * max(0, h * tokens - VECTOR_SRAM_ELEMENTS) * precision.activation_bytes
    prefill = (
        {
            "weights": block * precision.weight_bytes,
            "kv_cache": math.ceil(s / MLEN) * ekv * precision.kv_read_bytes,
            "activation_spill": spill,
        },
        {"kv_cache": ekv * precision.kv_write_bytes, "activation_spill": spill},
    )
    embedding = {"embedding_rows": b * s * h * precision.activation_bytes}

    def decode(kv: int):
        reads = {
            "weights": block * precision.weight_bytes,
            "kv_cache": 2 * b * kv * kv_heads * hd * precision.kv_read_bytes,
        }
        return reads, {"kv_cache": 2 * b * kv_heads * hd * precision.kv_write_bytes}

    return embedding, prefill, decode


def _golden_cases(shared_dir: Path):
    golden = json.loads((shared_dir / "golden" / "single_chip.json").read_text())
    for case in golden["cases"]:
        inputs = case["inputs"]
        if case.get("kind") != "estimate_decoder_latency" or inputs["include_lm_head"]:
            continue
        if golden["models"][inputs["model"]].get("model_type") != "llama":
            continue
        yield golden["models"][inputs["model"]], inputs, case["output"]


def _memory(key: str):
    return {
        "unbounded": lambda: load_memory("unbounded"),
        "fixed_1000GBps": lambda: fixed_bandwidth(1000),
        "fixed_1000GBps_64GiB": lambda: fixed_bandwidth(1000, 64),
        "fictional_stacked_dram": lambda: load_memory("fictional_stacked_dram"),
    }[key]()


def test_golden_phase_traffic_energy_and_memory_time(shared_dir: Path) -> None:
    precision = HbmStoragePrecision.default()
    checked = 0
    for cfg, inputs, output in _golden_cases(shared_dir):
        memory = _memory(inputs["memory"])
        assert output["precision"] == precision.to_dict()
        b, s, out = inputs["batch_size"], inputs["input_seq_len"], inputs["output_seq_len"]
        layers = cfg["num_hidden_layers"]
        embedding, block, decode = _llama_traffic(cfg, precision, b, s)
        hz, policy = 1e9, inputs["overlap_policy"]

        prefill = PhaseTotals.for_memory(memory)
        prefill.add(price_stage(0.0, embedding, {}, memory, hz, policy))
        prefill.add(price_stage(0.0, *block, memory, hz, policy), layers)
        phases = {"prefill": prefill.freeze()}

        totals = PhaseTotals.for_memory(memory)
        for step in range(out):
            token = PhaseTotals.for_memory(memory)
            token.add(price_stage(0.0, *decode(s + step), memory, hz, policy), layers)
            frozen = token.freeze()
            phases.setdefault("first_token_decode", frozen)
            totals.add(frozen)
        phases["decode"] = totals.freeze()

        for phase, estimate in phases.items():
            expected = output[phase]
            for field in ("read_bytes", "write_bytes", "memory_seconds"):
                assert getattr(estimate, field) == pytest.approx(expected[field], rel=1e-12), (
                    inputs,
                    phase,
                    field,
                )
            if expected["dram_energy_pj"] is None:
                assert estimate.dram_energy_pj is None
            else:
                assert estimate.dram_energy_pj == pytest.approx(
                    expected["dram_energy_pj"], rel=1e-12
                )
        checked += 1
    assert checked >= 8
