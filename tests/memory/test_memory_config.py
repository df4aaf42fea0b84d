"""Stacked-DRAM configuration and policies (analytic-model §3.1, §7.7 "config")."""

from __future__ import annotations

import pytest

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.memory import (
    BufferingPolicy,
    DramEnergyConfig,
    DramTimingConfig,
    StackedDramConfig,
    ThermalPolicy,
    dram_connectivity_efficiency,
)


def fictional_dram(**changes: object) -> StackedDramConfig:
    """The spec's test-fixture DRAM (§3.2): 123,456,789 B/layer, e_fc = 0.37."""
    values: dict[str, object] = {
        "total_layers": 10,
        "connected_layers": 3,
        "channels_per_connected_layer": 7,
        "bytes_per_channel_transfer": 5.5,
        "transfers_per_memory_clock": 1.25,
        "memory_frequency_hz": 345_678_901.0,
        "capacity_per_layer_bytes": 123_456_789,
        "transaction_bytes": 96,
        "fully_connected_efficiency": 0.37,
    }
    values.update(changes)
    return StackedDramConfig(**{k: v for k, v in values.items() if v is not None})


def fictional_timing(**changes: object) -> DramTimingConfig:
    values: dict[str, object] = {
        "row_bytes": 4070,
        "sector_bytes": 74,
        "sector_cycles": 3,
        "recharge_cycles": 41,
        "round_trip_latency_cycles": 137.5,
        "latency_clock_hz": 654_321_987.0,
    }
    values.update(changes)
    return DramTimingConfig(**values)


def fictional_thermal(**changes: object) -> ThermalPolicy:
    values: dict[str, object] = {
        "resistance_base_c_per_w": 0.42,
        "resistance_per_layer_c_per_w": 0.007,
        "baseline_layers": 3,
        "design_power_w": 73.0,
        "static_power_w": 8.0,
        "dynamic_power_exponent": 2.5,
    }
    values.update(changes)
    return ThermalPolicy(**values)


def test_peak_bandwidth_is_the_transfer_composition() -> None:
    dram = fictional_dram()
    assert dram.peak_bandwidth_bytes_per_s == pytest.approx(3 * 7 * 5.5 * 1.25 * 345_678_901.0)
    assert dram.peak_bandwidth_bytes_per_s == pytest.approx(49.907391331875e9, rel=1e-15)


def test_direct_peak_is_an_alternative_form() -> None:
    dram = fictional_dram(
        bytes_per_channel_transfer=None,
        transfers_per_memory_clock=None,
        memory_frequency_hz=None,
        direct_peak_bandwidth_per_connected_layer_bytes_per_s=2.5e10,
    )
    assert dram.peak_bandwidth_bytes_per_s == 3 * 2.5e10


def test_capacity_and_wave() -> None:
    dram = fictional_dram()
    assert dram.capacity_bytes == 10 * 123_456_789
    assert dram.wave_bytes == 96 * 7 == 672


@pytest.mark.parametrize(("connected", "expected"), [(1, 1.0), (5, 1.0), (7, 0.748), (10, 0.37)])
def test_connectivity_efficiency(connected: int, expected: float) -> None:
    assert dram_connectivity_efficiency(10, connected, 0.37) == pytest.approx(expected, rel=1e-12)


def test_bank_timing_gives_the_fully_connected_efficiency() -> None:
    timing = fictional_timing()
    assert timing.sectors_per_row == 55
    assert timing.row_read_cycles == 165
    assert timing.full_row_cycles == 206
    assert timing.fully_connected_efficiency == 165 / 206
    dram = fictional_dram(fully_connected_efficiency=None, bank_timing=timing)
    assert dram.resolved_fully_connected_efficiency == pytest.approx(0.80097, abs=5e-6)


def test_with_layers_defaults_to_fully_connected() -> None:
    dram = fictional_dram().with_layers(8)
    assert (dram.total_layers, dram.connected_layers) == (8, 8)
    assert fictional_dram().with_layers(8, 2).connected_layers == 2
    with pytest.raises(
        PlenaInputError, match=r"dram\.connected_layers must be ≤ dram\.total_layers"
    ):
        fictional_dram().with_layers(4, 6)


def test_buffering_latency_comes_from_policy_else_bank_timing() -> None:
    timing = fictional_timing()
    own = BufferingPolicy(
        requesters=3,
        buffer_bytes_per_requester=54_321,
        buffering_factor=1.75,
        round_trip_latency_cycles=100.0,
        round_trip_latency_clock_hz=1e9,
    )
    assert own.round_trip_latency_seconds(timing) == pytest.approx(100e-9)
    inherited = BufferingPolicy(
        requesters=3, buffer_bytes_per_requester=54_321, buffering_factor=1.75
    )
    assert inherited.round_trip_latency_seconds(timing) == 137.5 / 654_321_987.0
    with pytest.raises(PlenaInputError, match="buffering needs") as info:
        inherited.round_trip_latency_seconds(None)
    assert info.value.field == "buffering.round_trip_latency_cycles"


def test_thermal_scale_is_one_at_baseline_and_above_one_below() -> None:
    thermal = fictional_thermal()
    assert thermal.frequency_scale(3) == 1.0
    assert thermal.frequency_scale(1) > 1.0
    assert thermal.frequency_scale(10) == pytest.approx(0.95347, abs=5e-6)
    assert thermal.frequency_scale(12) < thermal.frequency_scale(10)


def test_thermal_without_budget_is_an_error() -> None:
    with pytest.raises(PlenaInputError, match="no dynamic-power budget at 10000 layers") as info:
        fictional_thermal().frequency_scale(10_000)
    assert info.value.field == "dram.total_layers"


def test_energy_is_eight_times_bytes_times_pj_per_bit() -> None:
    energy = DramEnergyConfig(read_pj_per_bit=2.47, write_pj_per_bit=2.71)
    assert energy.energy_pj(1000.0, 300.0) == pytest.approx(8 * (1000 * 2.47 + 300 * 2.71))
    assert energy.energy_pj(0.0, 0.0) == 0.0


# One case per rule of the configuration classes: (builder, changes, field, rule fragment).
_RULES = [
    ("dram", {"total_layers": 0}, "dram.total_layers", "must be > 0"),
    ("dram", {"total_layers": True}, "dram.total_layers", "must be an integer"),
    ("dram", {"total_layers": 10.0}, "dram.total_layers", "must be an integer"),
    ("dram", {"connected_layers": 11}, "dram.connected_layers", "must be ≤ dram.total_layers"),
    ("dram", {"channels_per_connected_layer": 0}, "dram.channels_per_connected_layer", "> 0"),
    ("dram", {"capacity_per_layer_bytes": 1.5}, "dram.capacity_per_layer_bytes", "integer"),
    ("dram", {"transaction_bytes": -96}, "dram.transaction_bytes", "must be > 0"),
    ("dram", {"bytes_per_channel_transfer": True}, "dram.bytes_per_channel_transfer", "number"),
    ("dram", {"memory_frequency_hz": float("inf")}, "dram.memory_frequency_hz", "finite"),
    ("dram", {"memory_frequency_hz": None}, "dram.memory_frequency_hz", "requires"),
    (
        "dram",
        {"direct_peak_bandwidth_per_connected_layer_bytes_per_s": 1e10},
        "dram.direct_peak_bandwidth_per_connected_layer_bytes_per_s",
        "mutually exclusive",
    ),
    (
        "dram",
        {"fully_connected_efficiency": None},
        "dram.fully_connected_efficiency",
        "exactly one",
    ),
    (
        "dram",
        {"bank_timing": "timing"},
        "dram.fully_connected_efficiency",
        "mutually exclusive",
    ),
    ("dram", {"fully_connected_efficiency": 1.5}, "dram.fully_connected_efficiency", "≤ 1"),
    ("dram", {"fully_connected_efficiency": 0.0}, "dram.fully_connected_efficiency", "> 0"),
    ("dram", {"apply_wave_quantization": 1}, "dram.apply_wave_quantization", "true or false"),
    ("dram", {"refresh": 3}, "dram.refresh", "not a known key"),
    ("timing", {"row_bytes": 4071}, "dram.bank_timing.row_bytes", "multiple of"),
    ("timing", {"sector_bytes": 0}, "dram.bank_timing.sector_bytes", "> 0"),
    ("timing", {"recharge_cycles": -1}, "dram.bank_timing.recharge_cycles", "≥ 0"),
    ("timing", {"latency_clock_hz": 0.0}, "dram.bank_timing.latency_clock_hz", "> 0"),
    ("thermal", {"static_power_w": 73.0}, "thermal.static_power_w", "< thermal.design_power_w"),
    (
        "thermal",
        {"resistance_per_layer_c_per_w": -0.1},
        "thermal.resistance_per_layer_c_per_w",
        "≥ 0",
    ),
    ("thermal", {"baseline_layers": 2.5}, "thermal.baseline_layers", "integer"),
    ("thermal", {"dynamic_power_exponent": 0}, "thermal.dynamic_power_exponent", "> 0"),
]


@pytest.mark.parametrize(("builder", "changes", "field", "rule"), _RULES, ids=lambda v: str(v)[:40])
def test_invalid_config_names_field_and_rule(
    builder: str, changes: dict, field: str, rule: str
) -> None:
    if changes.get("bank_timing") == "timing":
        changes = {"bank_timing": fictional_timing()}
    build = {"dram": fictional_dram, "timing": fictional_timing, "thermal": fictional_thermal}[
        builder
    ]
    with pytest.raises(PlenaInputError) as info:
        build(**changes)
    assert info.value.field == field
    assert field in str(info.value)
    assert rule in str(info.value)


def test_type_errors_are_plena_type_errors() -> None:
    with pytest.raises(PlenaTypeError):
        fictional_dram(total_layers="10")


@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({"requesters": 0}, "buffering.requesters", "> 0"),
        ({"buffer_bytes_per_requester": True}, "buffering.buffer_bytes_per_requester", "integer"),
        ({"buffering_factor": -1.0}, "buffering.buffering_factor", "> 0"),
        ({"round_trip_latency_cycles": 10.0}, "buffering.round_trip_latency_clock_hz", "together"),
        ({"round_trip_latency_clock_hz": 1e9}, "buffering.round_trip_latency_cycles", "together"),
    ],
)
def test_invalid_buffering(changes: dict, field: str, rule: str) -> None:
    values = {"requesters": 3, "buffer_bytes_per_requester": 54_321, "buffering_factor": 1.75}
    with pytest.raises(PlenaInputError) as info:
        BufferingPolicy(**{**values, **changes})
    assert info.value.field == field
    assert field in str(info.value) and rule in str(info.value)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"read_pj_per_bit": -1.0}, "energy.read_pj_per_bit"),
        ({"write_pj_per_bit": True}, "energy.write_pj_per_bit"),
    ],
)
def test_invalid_energy(changes: dict, field: str) -> None:
    with pytest.raises(PlenaInputError) as info:
        DramEnergyConfig(**{"read_pj_per_bit": 2.47, "write_pj_per_bit": 2.71, **changes})
    assert info.value.field == field
