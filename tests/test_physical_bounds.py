"""Physical inputs are bounded to plausible ranges (the error names the field and says the range)
and no output carries a non-finite number (issue 10)."""

from __future__ import annotations

import json

import grpc
import pytest
from plena_client import PlenaClient, pb
from plena_server.app import start_server

from plena_opt import jsonio
from plena_opt.chip import load_chip
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.memory import FixedBandwidthMemory, load_memory, unbounded

ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8", "--tp", "8"]


def _stacked() -> dict:
    from pathlib import Path

    import plena_opt.memory.profiles as profiles

    return json.loads((Path(profiles.__file__).parent / "fictional_stacked_dram.json").read_text())


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (
            ["--fixed-bandwidth-gbs", "5e-324"],
            "fixed_bandwidth_gbs must be between 0.001 and 1e+08",
        ),
        (["--fixed-bandwidth-gbs", "1e300"], "fixed_bandwidth_gbs must be between"),
        (["--fixed-bandwidth-gbs", "100", "--fixed-capacity-gib", "5e-324"], "fixed_capacity_gib"),
    ],
)
def test_absurd_fixed_memory_flags_exit_2_with_the_range(capsys, flags, needle):
    assert main([*ESTIMATE, *flags, "--json"]) == 2
    captured = capsys.readouterr()
    assert needle in captured.err and ("GB/s" in captured.err or "GiB" in captured.err)
    assert captured.out == ""


@pytest.mark.parametrize(
    ("section", "key", "value", "field"),
    [
        ("dram", "memory_frequency_hz", 5e-324, "dram.memory_frequency_hz"),
        ("dram", "memory_frequency_hz", 1e300, "dram.memory_frequency_hz"),
        ("dram", "capacity_per_layer_bytes", 2**70, "dram.capacity_per_layer_bytes"),
        ("dram", "bytes_per_channel_transfer", 1e-300, "dram.bytes_per_channel_transfer"),
        ("bank_timing", "latency_clock_hz", 1e-200, "dram.bank_timing.latency_clock_hz"),
        ("thermal", "design_power_w", 5e-324, "thermal.design_power_w"),
        ("energy", "read_pj_per_bit", 1e300, "energy.read_pj_per_bit"),
        ("buffering", "buffering_factor", 1e-300, "buffering.buffering_factor"),
    ],
)
def test_memory_profile_fields_outside_their_range_name_the_field(section, key, value, field):
    doc = _stacked()
    target = doc["dram"]["bank_timing"] if section == "bank_timing" else doc[section]
    target[key] = value
    with pytest.raises(PlenaInputError) as info:
        load_memory(doc)
    assert info.value.field == field
    assert f"{field} must be between" in str(info.value) and repr(value) in str(info.value)


def test_fixed_bandwidth_class_range_keeps_the_unbounded_memory():
    for bad in (5e-324, 1e20, 1e29):
        with pytest.raises(PlenaInputError, match="bandwidth_bytes_per_s must be between 1e\\+06"):
            FixedBandwidthMemory(bad)
    assert unbounded().bandwidth_bytes_per_s == 1e30  # the compute-only memory of §3.4
    with pytest.raises(PlenaInputError, match="capacity_bytes must be between"):
        FixedBandwidthMemory(1e12, 2**70)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("config", "MLEN", 2**40),
        ("config", "HBM_SIZE", 2**70),
        ("config", "DC_EN", 7),
        ("latency", "VECTOR_EXP_CYCLES", 10**12),
    ],
)
def test_chip_profile_fields_outside_their_range_name_the_field(section, key, value):
    with pytest.raises(PlenaInputError) as info:
        load_chip({"base": "plena-default", section: {key: value}})
    assert info.value.field == f"{section}.{key}"
    assert "must be between" in str(info.value)


def test_strict_json_refuses_non_finite_numbers_naming_the_path():
    assert jsonio.dumps({"a": [1.0, 2]}) == '{"a": [1.0, 2]}'
    for bad in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(PlenaInputError, match=r"not finite at \$\.x\.y\[1\]"):
            jsonio.dumps({"x": {"y": [0.0, bad]}})


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    running = start_server("127.0.0.1", 0, str(tmp_path_factory.mktemp("pb") / "s.log"), workers=2)
    with PlenaClient(f"127.0.0.1:{running.port}") as c:
        yield c
    running.server.stop(0)


@pytest.mark.parametrize(
    ("memory", "field"),
    [
        (
            pb.ProfileSource(
                fixed_bandwidth=pb.FixedBandwidthMemory(bandwidth_gbytes_per_s=5e-324)
            ),
            "system.memory.fixed_bandwidth.bandwidth_gbytes_per_s",
        ),
        (
            pb.ProfileSource(
                fixed_bandwidth=pb.FixedBandwidthMemory(
                    bandwidth_gbytes_per_s=100, capacity_gib=1e-300
                )
            ),
            "system.memory.fixed_bandwidth.capacity_gib",
        ),
    ],
)
def test_grpc_estimate_refuses_absurd_bandwidth_naming_the_proto_field(client, memory, field):
    system = pb.SystemSpec(
        model=pb.ModelSource(name="llama-3.1-8b"),
        noc=pb.ProfileSource(name="illustrative_gpu_node_8"),
        memory=memory,
    )
    with pytest.raises(Exception) as info:
        client.estimate(system, pb.Plan(tp=8))
    err = info.value
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.field == field and "must be between" in err.message


def test_grpc_json_fields_are_strict_json(client):
    """Every JSON field the server sends parses without Infinity/NaN (json.loads is lenient, so
    parse with a hook that refuses them)."""

    def refuse(token: str) -> float:
        raise AssertionError(f"non-standard JSON constant {token}")

    system = pb.SystemSpec(
        model=pb.ModelSource(name="llama-3.1-8b"),
        noc=pb.ProfileSource(name="illustrative_gpu_node_8"),
    )
    reply = client.estimate(system, pb.Plan(tp=8))
    json.loads(reply.estimate_json, parse_constant=refuse)
    for profile in client.list_profiles():
        json.loads(profile.describe_json, parse_constant=refuse)
    assert "Infinity" not in reply.estimate_json and "NaN" not in reply.estimate_json
