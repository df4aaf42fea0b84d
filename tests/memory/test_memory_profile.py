"""Memory profile JSON schema and loader (analytic-model §3.2, §7.7 "profile").

Golden describe() dicts come from ../shared/golden/{single_chip,distributed}.json and are compared
with exact equality: describe() reports the configured values and a handful of products/quotients
computed in the reference's operation order, so every float must agree bit for bit (stricter than
the README's 1e-9 relative tolerance).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from importlib import resources
from pathlib import Path

import pytest

from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.memory import (
    FixedBandwidthMemory,
    StackedDramModel,
    fixed_bandwidth,
    list_memory_profiles,
    load_memory,
    load_memory_profile,
    memory_from_dict,
)

STACKED = "fictional_stacked_dram.json"
FIXED = "fictional_fixed_bandwidth.json"


def shipped_bytes(file: str) -> bytes:
    return resources.files("plena_opt.memory.profiles").joinpath(file).read_bytes()


def stacked_profile() -> dict:
    return json.loads(shipped_bytes(STACKED))


def fixed_profile() -> dict:
    return json.loads(shipped_bytes(FIXED))


def test_shipped_profiles_equal_the_shared_examples(shared_dir: Path) -> None:
    for file in (STACKED, FIXED):
        assert shipped_bytes(file) == (shared_dir / "data" / "profiles" / file).read_bytes()


def test_builtin_profiles_load_with_spec_values() -> None:
    assert list_memory_profiles() == [
        "fictional-fixed-bandwidth",
        "fictional-stacked-dram",
        "unbounded",
    ]
    stacked = load_memory("fictional-stacked-dram")
    assert isinstance(stacked, StackedDramModel)
    assert stacked.usable_bandwidth_bytes_per_s / 1e9 == pytest.approx(49.907, abs=5e-4)
    assert stacked.connectivity_efficiency == 1.0
    assert stacked.config.resolved_fully_connected_efficiency == 165 / 206
    assert stacked.capacity_bytes == 12_345_678_900
    assert stacked.wave_bytes == 672
    assert stacked.compute_frequency_scale == pytest.approx(0.95347, abs=5e-6)
    assert stacked.littles_law().limited is False
    fixed = load_memory("fictional_fixed_bandwidth")
    assert isinstance(fixed, FixedBandwidthMemory)
    assert fixed.usable_bandwidth_bytes_per_s == 98_765_432_100.0
    assert fixed.capacity_bytes == 12_345_678_901


@pytest.mark.parametrize(
    ("total", "peak", "usable", "scale"),
    [
        (4, 66.54, 53.30, 0.9929),
        (8, 133.09, 106.60, 0.9661),
        (10, 166.36, 133.25, 0.9535),
        (12, 199.63, 159.90, 0.9413),
    ],
)
def test_fully_connected_variants_match_the_spec(
    total: int, peak: float, usable: float, scale: float
) -> None:
    variant = load_memory("fictional-stacked-dram").with_layers(total)
    assert variant.peak_bandwidth_bytes_per_s / 1e9 == pytest.approx(peak, abs=5e-3)
    assert variant.usable_bandwidth_bytes_per_s / 1e9 == pytest.approx(usable, abs=5e-3)
    assert variant.compute_frequency_scale == pytest.approx(scale, abs=5e-5)


def test_loading_stamps_path_and_sha256(tmp_path: Path) -> None:
    raw = shipped_bytes(STACKED).replace(b'"name": "fictional-stacked-dram"', b'"name": "mine"')
    path = tmp_path / "mine.json"
    path.write_bytes(raw)
    memory = load_memory(path)
    assert memory.name == "mine"
    assert memory.provenance["profile_path"] == str(path)
    assert memory.provenance["profile_sha256"] == hashlib.sha256(raw).hexdigest()
    assert memory.provenance["source"].startswith("fictional values")
    assert load_memory(str(path)).describe() == memory.describe()
    from_dict = load_memory(json.loads(raw))
    assert "profile_sha256" not in from_dict.provenance


def test_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(PlenaNotFoundError) as info:
        load_memory("hbm3e")
    assert "hbm3e" in str(info.value)
    for name in list_memory_profiles():
        assert name in str(info.value)


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(PlenaInputError, match="not found"):
        load_memory(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlenaInputError, match="not valid JSON"):
        load_memory(bad)


def _without(data: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    del data[last]


def _setting(data: dict, dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    data[last] = value


# One case per §3.2 rule: (profile, key to set or delete, value or DELETE, field, rule fragment).
DELETE = object()
_PROFILE_RULES = [
    ("stacked", "schema_version", 2, "schema_version", "must be 1"),
    ("stacked", "schema_version", True, "schema_version", "must be 1"),
    ("stacked", "schema_version", DELETE, "schema_version", "is required"),
    ("stacked", "kind", "hbm", "kind", "must be one of stacked_dram, fixed_bandwidth"),
    ("stacked", "name", "", "name", "must be a non-empty string"),
    ("stacked", "name", DELETE, "name", "is required"),
    ("stacked", "provenance", [], "provenance", "must be a JSON object"),
    ("stacked", "comment", "x", "comment", "not a known key"),
    ("stacked", "dram", DELETE, "dram", "is required"),
    ("stacked", "dram", 3, "dram", "must be a JSON object"),
    ("stacked", "dram.total_layers", DELETE, "dram.total_layers", "is required"),
    ("stacked", "dram.total_layers", True, "dram.total_layers", "must be an integer"),
    ("stacked", "dram.total_layers", 10.5, "dram.total_layers", "must be an integer"),
    (
        "stacked",
        "dram.connected_layers",
        11,
        "dram.connected_layers",
        "must be ≤ dram.total_layers",
    ),
    ("stacked", "dram.connected_layers", 0, "dram.connected_layers", "must be > 0"),
    (
        "stacked",
        "dram.channels_per_connected_layer",
        -7,
        "dram.channels_per_connected_layer",
        "> 0",
    ),
    (
        "stacked",
        "dram.bytes_per_channel_transfer",
        True,
        "dram.bytes_per_channel_transfer",
        "number",
    ),
    (
        "stacked",
        "dram.transfers_per_memory_clock",
        "1.25",
        "dram.transfers_per_memory_clock",
        "number",
    ),
    ("stacked", "dram.memory_frequency_hz", DELETE, "dram.memory_frequency_hz", "requires"),
    ("stacked", "dram.memory_frequency_hz", 0.0, "dram.memory_frequency_hz", "must be > 0"),
    (
        "stacked",
        "dram.direct_peak_bandwidth_per_connected_layer_bytes_per_s",
        1e10,
        "dram.direct_peak_bandwidth_per_connected_layer_bytes_per_s",
        "mutually exclusive",
    ),
    (
        "stacked",
        "dram.capacity_per_layer_bytes",
        DELETE,
        "dram.capacity_per_layer_bytes",
        "required",
    ),
    ("stacked", "dram.capacity_per_layer_bytes", 1e9, "dram.capacity_per_layer_bytes", "integer"),
    ("stacked", "dram.transaction_bytes", 0, "dram.transaction_bytes", "must be > 0"),
    (
        "stacked",
        "dram.fully_connected_efficiency",
        0.8,
        "dram.fully_connected_efficiency",
        "mutually",
    ),
    ("stacked", "dram.bank_timing", DELETE, "dram.fully_connected_efficiency", "exactly one"),
    ("stacked", "dram.bank_timing.row_bytes", 4071, "dram.bank_timing.row_bytes", "multiple of"),
    ("stacked", "dram.bank_timing.sector_cycles", 0, "dram.bank_timing.sector_cycles", "> 0"),
    ("stacked", "dram.bank_timing.recharge_cycles", -1, "dram.bank_timing.recharge_cycles", "≥ 0"),
    ("stacked", "dram.bank_timing.slack", 1, "dram.bank_timing.slack", "not a known key"),
    (
        "stacked",
        "dram.bank_timing.latency_clock_hz",
        DELETE,
        "dram.bank_timing.latency_clock_hz",
        "is required",
    ),
    ("stacked", "dram.apply_wave_quantization", 1, "dram.apply_wave_quantization", "true or false"),
    ("stacked", "dram.layers", 3, "dram.layers", "not a known key"),
    ("stacked", "buffering.requesters", 0, "buffering.requesters", "must be > 0"),
    (
        "stacked",
        "buffering.buffer_bytes_per_requester",
        True,
        "buffering.buffer_bytes_per_requester",
        "integer",
    ),
    (
        "stacked",
        "buffering.round_trip_latency_cycles",
        10,
        "buffering.round_trip_latency_clock_hz",
        "together",
    ),
    ("stacked", "buffering.depth", 1, "buffering.depth", "not a known key"),
    (
        "stacked",
        "thermal.static_power_w",
        80.0,
        "thermal.static_power_w",
        "< thermal.design_power_w",
    ),
    (
        "stacked",
        "thermal.dynamic_power_exponent",
        False,
        "thermal.dynamic_power_exponent",
        "number",
    ),
    ("stacked", "thermal.baseline_layers", DELETE, "thermal.baseline_layers", "is required"),
    ("stacked", "energy.read_pj_per_bit", -2.47, "energy.read_pj_per_bit", "≥ 0"),
    ("stacked", "energy.write_pj_per_bit", DELETE, "energy.write_pj_per_bit", "is required"),
    ("stacked", "energy.idle_pj", 1.0, "energy.idle_pj", "not a known key"),
    ("fixed", "bandwidth_bytes_per_s", DELETE, "bandwidth_bytes_per_s", "is required"),
    ("fixed", "bandwidth_bytes_per_s", True, "bandwidth_bytes_per_s", "must be a number"),
    ("fixed", "bandwidth_bytes_per_s", -1.0, "bandwidth_bytes_per_s", "must be > 0"),
    ("fixed", "capacity_bytes", DELETE, "capacity_bytes", "is required"),
    ("fixed", "capacity_bytes", 1.5e10, "capacity_bytes", "must be an integer"),
    ("fixed", "transaction_bytes", 0, "transaction_bytes", "must be > 0"),
    ("fixed", "energy", {"read_pj_per_bit": 1.0}, "energy.write_pj_per_bit", "is required"),
    ("fixed", "dram", {}, "dram", "not a known key"),
]


@pytest.mark.parametrize(
    ("which", "key", "value", "field", "rule"),
    _PROFILE_RULES,
    ids=[
        f"{case[0]}:{case[1]}={'DELETE' if case[2] is DELETE else case[2]!r}"
        for case in _PROFILE_RULES
    ],
)
def test_profile_rule(which: str, key: str, value: object, field: str, rule: str) -> None:
    data = copy.deepcopy(stacked_profile() if which == "stacked" else fixed_profile())
    if value is DELETE:
        _without(data, key)
    else:
        _setting(data, key, value)
    with pytest.raises(PlenaInputError) as info:
        load_memory(data)
    assert info.value.field == field
    assert field in str(info.value)
    assert rule in str(info.value)


def test_buffering_needs_a_latency_source_in_profiles() -> None:
    data = stacked_profile()
    del data["dram"]["bank_timing"]
    data["dram"]["fully_connected_efficiency"] = 0.8
    with pytest.raises(PlenaInputError, match="buffering needs") as info:
        load_memory(data)
    assert info.value.field == "buffering.round_trip_latency_cycles"


def test_direct_peak_profile_and_fixed_profile_options() -> None:
    data = stacked_profile()
    for key in ("bytes_per_channel_transfer", "transfers_per_memory_clock", "memory_frequency_hz"):
        del data["dram"][key]
    data["dram"]["direct_peak_bandwidth_per_connected_layer_bytes_per_s"] = 2e10
    assert load_memory(data).peak_bandwidth_bytes_per_s == 6e10
    fixed = fixed_profile()
    fixed.update(
        capacity_bytes=None,
        transaction_bytes=64,
        energy={"read_pj_per_bit": 1, "write_pj_per_bit": 2},
    )
    memory = memory_from_dict(fixed)
    assert memory.capacity_bytes is None and memory.quantize_bytes(65) == 128.0
    assert memory.energy_pj(1.0, 1.0) == 24.0


def test_optional_sections_may_be_omitted() -> None:
    data = stacked_profile()
    for key in ("buffering", "thermal", "energy", "provenance"):
        del data[key]
    memory = load_memory(data)
    assert memory.littles_law() is None and memory.energy_pj(1.0, 1.0) is None
    assert memory.compute_frequency_scale == 1.0 and memory.warnings() == []


def _golden_memories(shared_dir: Path) -> list[tuple[str, dict, dict]]:
    """(key, memories[key], output.memory) for every distinct memory of the golden cases."""
    seen: dict[tuple[str, str], tuple[str, dict, dict]] = {}
    for name in ("single_chip", "distributed"):
        golden = json.loads((shared_dir / "golden" / f"{name}.json").read_text())
        for case in golden["cases"]:
            output = case.get("output", {})
            if "memory" not in output:
                continue
            key = case["inputs"]["memory"]
            entry = golden["memories"][key]
            seen.setdefault(
                (key, json.dumps(output["memory"], sort_keys=True)), (key, entry, output["memory"])
            )
    return list(seen.values())


def _build(entry: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if entry["kind"] == "profile":
        # Reproduce the reference's relative profile_path: place the shipped bytes there.
        target = tmp_path / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shipped_bytes(Path(entry["path"]).name))
        assert json.loads(target.read_bytes()) == entry["profile"]
        monkeypatch.chdir(tmp_path)
        return load_memory_profile(entry["path"])
    if entry["name"] == "unbounded":
        return load_memory("unbounded")
    capacity = entry["capacity_bytes"]
    helper = fixed_bandwidth(
        entry["bandwidth_bytes_per_s"] / 1e9, None if capacity is None else capacity / 2**30
    )
    direct = FixedBandwidthMemory(entry["bandwidth_bytes_per_s"], capacity, name=entry["name"])
    assert helper.describe() == direct.describe()
    return helper


def test_golden_describe_dicts(shared_dir: Path, tmp_path: Path, monkeypatch) -> None:
    cases = _golden_memories(shared_dir)
    assert {key for key, _, _ in cases} == {
        "unbounded",
        "fixed_1000GBps",
        "fixed_1000GBps_64GiB",
        "fictional_stacked_dram",
    }
    for key, entry, expected in cases:
        memory = _build(entry, tmp_path, monkeypatch)
        assert memory.describe() == expected, key
        assert all(not isinstance(v, float) or math.isfinite(v) for v in memory.describe().values())


def test_golden_warnings_wording(shared_dir: Path) -> None:
    golden = json.loads((shared_dir / "golden" / "single_chip.json").read_text())
    stacked_warnings = {
        warning
        for case in golden["cases"]
        if case["inputs"].get("memory") == "fictional_stacked_dram"
        for warning in case["output"].get("warnings", [])
        if "thermal" in warning
    }
    assert stacked_warnings == set(load_memory("fictional_stacked_dram").warnings())
