"""Stacked-DRAM and fixed-bandwidth memories (analytic-model §3.1, §7.7 "model")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.memory import (
    BufferingPolicy,
    DramEnergyConfig,
    FixedBandwidthMemory,
    Memory,
    StackedDramModel,
    fixed_bandwidth,
    unbounded,
)
from tests.memory.test_memory_config import fictional_dram, fictional_thermal, fictional_timing

PEAK_3 = 3 * 7 * 5.5 * 1.25 * 345_678_901.0  # B/s with 3 connected layers (§3.2)


def test_efficiency_is_applied_to_the_peak() -> None:
    model = StackedDramModel("fixture", fictional_dram(connected_layers=7))
    assert model.connectivity_efficiency == pytest.approx(0.748, rel=1e-12)
    assert model.effective_bandwidth_bytes_per_s == pytest.approx(7 / 3 * PEAK_3 * 0.748)
    assert model.usable_bandwidth_bytes_per_s == model.effective_bandwidth_bytes_per_s
    assert model.capacity_bytes == 1_234_567_890
    assert model.compute_frequency_scale == 1.0
    assert isinstance(model, Memory)


def _buffered(buffer_bytes: int) -> StackedDramModel:
    policy = BufferingPolicy(
        requesters=3, buffer_bytes_per_requester=buffer_bytes, buffering_factor=1.75
    )
    config = fictional_dram(fully_connected_efficiency=None, bank_timing=fictional_timing())
    return StackedDramModel("buffered", config, buffering=policy)


def test_littles_law_unlimited_with_large_buffers() -> None:
    model = _buffered(54_321)
    bound = model.littles_law()
    latency = 137.5 / 654_321_987.0
    required = PEAK_3 / 3 * latency * 1.75
    assert not bound.limited
    assert bound.required_buffer_bytes_per_requester == pytest.approx(required)
    assert bound.required_buffer_bytes_per_requester == pytest.approx(6117.8, abs=0.05)
    assert model.usable_bandwidth_bytes_per_s == model.effective_bandwidth_bytes_per_s
    assert model.warnings() == []


def test_littles_law_limited_scales_bandwidth_by_buffer_over_required() -> None:
    model = _buffered(3000)
    bound = model.littles_law()
    assert bound.limited
    ratio = 3000 / bound.required_buffer_bytes_per_requester
    assert model.usable_bandwidth_bytes_per_s == pytest.approx(PEAK_3 * ratio)
    (warning,) = model.warnings()
    assert warning == (
        f"buffering limits usable bandwidth to {PEAK_3 * ratio / 1e9:.3f} GB/s "
        f"(needs {bound.required_buffer_bytes_per_requester:.0f} B per requester, has 3000)"
    )


def test_buffering_without_a_latency_source_is_rejected() -> None:
    policy = BufferingPolicy(requesters=3, buffer_bytes_per_requester=100, buffering_factor=1.0)
    with pytest.raises(PlenaInputError, match="buffering needs"):
        StackedDramModel("no-latency", fictional_dram(), buffering=policy)


@pytest.mark.parametrize(
    ("nbytes", "expected"), [(1, 672.0), (672, 672.0), (673, 1344.0), (0, 0.0)]
)
def test_wave_quantisation(nbytes: float, expected: float) -> None:
    model = StackedDramModel("waves", fictional_dram(apply_wave_quantization=True))
    assert model.quantize_bytes(nbytes) == expected
    plain = StackedDramModel("plain", fictional_dram())
    assert plain.quantize_bytes(nbytes) == float(nbytes)


def test_quantize_array_matches_scalar() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([[0.0, -3.0, 1.0, 672.0, 673.0], rng.uniform(0, 1e7, 200)])
    for memory in (
        StackedDramModel("waves", fictional_dram(apply_wave_quantization=True)),
        StackedDramModel("plain", fictional_dram()),
        FixedBandwidthMemory(1e12, transaction_bytes=64),
        FixedBandwidthMemory(1e12),
    ):
        expected = np.array([memory.quantize_bytes(float(v)) for v in values])
        np.testing.assert_array_equal(memory.quantize_array(values), expected)


def test_transfer_quantum_is_what_transfers_round_to() -> None:
    """``transfer_quantum_bytes`` is the rounding unit of ``quantize_bytes`` (None: no rounding)."""
    cases = (
        (StackedDramModel("waves", fictional_dram(apply_wave_quantization=True)), True),
        (StackedDramModel("plain", fictional_dram()), False),
        (FixedBandwidthMemory(1e12, transaction_bytes=64), True),
        (FixedBandwidthMemory(1e12), False),
    )
    for memory, rounds in cases:
        quantum = memory.transfer_quantum_bytes
        assert (quantum is not None) == rounds
        if quantum is None:
            assert memory.quantize_bytes(1.5) == 1.5
            continue
        assert isinstance(quantum, int) and quantum > 0
        for k in (1, 2, 7):
            assert memory.quantize_bytes(k * quantum) == k * quantum
            assert memory.quantize_bytes(k * quantum - 0.5) == k * quantum
            assert memory.quantize_bytes(k * quantum + 0.5) == (k + 1) * quantum


def test_thermal_policy_in_the_model() -> None:
    model = StackedDramModel("hot", fictional_dram(), thermal=fictional_thermal())
    assert model.compute_frequency_scale == pytest.approx(0.95347, abs=5e-6)
    assert model.warnings() == [
        f"thermal policy scales the compute clock by {model.compute_frequency_scale:.4f}"
    ]
    assert model.with_layers(3, 3).compute_frequency_scale == 1.0
    assert model.with_layers(3, 3).warnings() == []
    assert model.with_layers(1).compute_frequency_scale > 1.0
    with pytest.raises(PlenaInputError, match="no dynamic-power budget"):
        model.with_layers(10_000)


def test_with_layers_keeps_policies_and_provenance() -> None:
    buffering = BufferingPolicy(requesters=2, buffer_bytes_per_requester=10, buffering_factor=1.0)
    energy = DramEnergyConfig(read_pj_per_bit=2.47, write_pj_per_bit=2.71)
    model = StackedDramModel(
        "full",
        fictional_dram(fully_connected_efficiency=None, bank_timing=fictional_timing()),
        buffering=buffering,
        thermal=fictional_thermal(),
        energy=energy,
        provenance={"source": "test"},
    )
    taller = model.with_layers(12)
    assert taller.buffering is buffering and taller.energy is energy
    assert taller.thermal == model.thermal
    assert dict(taller.provenance) == {"source": "test"}
    assert (taller.config.total_layers, taller.config.connected_layers) == (12, 12)
    assert taller.connectivity_efficiency == pytest.approx(165 / 206)
    assert taller.capacity_bytes == 12 * 123_456_789


def test_energy_model() -> None:
    energy = DramEnergyConfig(read_pj_per_bit=2.47, write_pj_per_bit=2.71)
    model = StackedDramModel("e", fictional_dram(), energy=energy)
    assert model.energy_pj(100.0, 40.0) == pytest.approx(8 * (100 * 2.47 + 40 * 2.71))
    assert StackedDramModel("none", fictional_dram()).energy_pj(100.0, 40.0) is None


def test_describe_is_json_ready() -> None:
    model = StackedDramModel("d", fictional_dram(connected_layers=7), thermal=fictional_thermal())
    data = json.loads(json.dumps(model.describe()))
    assert data["kind"] == "stacked_dram"
    assert data["connectivity_efficiency"] == pytest.approx(0.748)
    assert data["littles_law"] is None and data["energy"] is None
    assert data["wave_bytes"] == 672 and data["apply_wave_quantization"] is False


def test_models_are_immutable() -> None:
    model = StackedDramModel("d", fictional_dram())
    with pytest.raises(AttributeError):
        model.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        FixedBandwidthMemory(1e12).capacity_bytes = 3  # type: ignore[misc]


def test_stacked_model_rejects_wrong_types() -> None:
    with pytest.raises(PlenaTypeError):
        StackedDramModel("x", {"total_layers": 3})  # type: ignore[arg-type]
    with pytest.raises(PlenaInputError, match="name must be a non-empty string"):
        StackedDramModel(" ", fictional_dram())


def test_fixed_bandwidth_basics() -> None:
    memory = FixedBandwidthMemory(98_765_432_100.0, 12_345_678_901, name="fixed")
    assert memory.usable_bandwidth_bytes_per_s == 98_765_432_100.0
    assert memory.capacity_bytes == 12_345_678_901
    assert memory.compute_frequency_scale == 1.0
    assert memory.quantize_bytes(65.0) == 65.0
    assert memory.energy_pj(1.0, 1.0) is None
    assert memory.warnings() == []
    assert isinstance(memory, Memory)


def test_fixed_bandwidth_transaction_rounding() -> None:
    memory = FixedBandwidthMemory(1e12, None, transaction_bytes=64)
    assert memory.quantize_bytes(65) == 128.0
    assert memory.quantize_bytes(64) == 64.0
    assert memory.quantize_bytes(0) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"bandwidth_bytes_per_s": 0.0}, "bandwidth_bytes_per_s", "must be > 0"),
        ({"bandwidth_bytes_per_s": True}, "bandwidth_bytes_per_s", "must be a number"),
        ({"bandwidth_bytes_per_s": float("nan")}, "bandwidth_bytes_per_s", "finite"),
        ({"capacity_bytes": 0}, "capacity_bytes", "must be > 0"),
        ({"capacity_bytes": 2.5}, "capacity_bytes", "must be an integer"),
        ({"transaction_bytes": 0}, "transaction_bytes", "must be > 0"),
        ({"energy": {"read_pj_per_bit": 1.0}}, "energy.write_pj_per_bit", "is required"),
    ],
)
def test_fixed_bandwidth_rejects_bad_values(kwargs: dict, field: str, rule: str) -> None:
    with pytest.raises(PlenaInputError) as info:
        FixedBandwidthMemory(**{"bandwidth_bytes_per_s": 1e12, **kwargs})
    assert info.value.field == field
    assert field in str(info.value) and rule in str(info.value)


def test_fixed_bandwidth_helper_uses_cli_units_and_reference_names() -> None:
    memory = fixed_bandwidth(1000)
    assert memory.name == "fixed-1000GBps"
    assert memory.usable_bandwidth_bytes_per_s == 1e12
    assert memory.capacity_bytes is None
    sized = fixed_bandwidth(1000, 64)
    assert sized.name == "fixed-1000GBps-64GiB"
    assert sized.capacity_bytes == 64 * 2**30
    assert fixed_bandwidth(98.765, 0.5).capacity_bytes == 2**29
    with pytest.raises(PlenaInputError, match="fixed_bandwidth_gbs"):
        fixed_bandwidth(-1)
    with pytest.raises(PlenaInputError, match="fixed_capacity_gib"):
        fixed_bandwidth(1, 0)


def test_unbounded_memory() -> None:
    memory = unbounded()
    assert memory.name == "unbounded"
    assert memory.usable_bandwidth_bytes_per_s == 1e30
    assert memory.capacity_bytes is None
