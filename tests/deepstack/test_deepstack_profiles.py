"""NoC profiles: shipped examples, presets, scaling, validation rules (network-model §1, §13)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import deepstack as ds
import pytest

EXAMPLES = {
    "illustrative_gpu_node_8": 8,
    "illustrative_gpu_cluster_32": 32,
    "illustrative_ring_switch_32": 32,
    "illustrative_torus_mesh_switch_64": 64,
}


@pytest.mark.parametrize(("name", "devices"), EXAMPLES.items())
def test_example_profiles(name: str, devices: int) -> None:
    p = ds.load_noc_profile(name)
    assert p.num_devices == devices
    assert [layer["level"] for layer in p.describe()["layers"]] == ["L3", "L2", "L1"]
    assert (p.energy.l1, p.energy.l2, p.energy.l3) == (1.0, 2.0, 3.0)
    assert re.fullmatch(r"[0-9a-f]{64}", p.provenance["profile_sha256"])
    assert "Not a PLENA hardware specification" in p.provenance["source"]


def test_list_and_presets() -> None:
    names = ds.list_noc_profiles()
    assert set(EXAMPLES) | {"h200x32", "ring_switch_32", "torus_mesh_switch_64"} <= set(names)
    h = ds.load_noc_profile("h200x32")
    assert h.num_devices == 32 and h.energy is None
    l3, l2, l1 = h.levels
    assert (l1.size, l1.hop_latency_s, l1.link_bandwidth_bps, l1.centre_in_bps) == (
        8,
        1.25e-6,
        370e9,
        2.96e12,
    )
    assert (l2.size, l2.hop_latency_s, l2.link_bandwidth_bps, l2.centre_out_bps) == (
        4,
        5e-6,
        50e9,
        200e9,
    )
    assert (l3.link_bandwidth_bps, l3.centre_in_bps) == (500e9, 4e12)
    # the presets equal the shipped illustrative JSON values (same numbers, different names)
    for preset, example in (
        ("ring_switch_32", "illustrative_ring_switch_32"),
        ("torus_mesh_switch_64", "illustrative_torus_mesh_switch_64"),
    ):
        a, b = ds.load_noc_profile(preset), ds.load_noc_profile(example)
        assert a.energy == b.energy
        for x, y in zip(a.levels, b.levels, strict=True):  # presets use DeepStack's seconds
            assert (x.kind, x.size, x.link_bandwidth_bps, x.centre_in_bps) == (
                y.kind,
                y.size,
                y.link_bandwidth_bps,
                y.centre_in_bps,
            )
            assert x.hop_latency_s == pytest.approx(y.hop_latency_s, rel=1e-12)


def test_scaled_profile_and_big_torus_mesh() -> None:
    base = ds.torus_mesh_switch_64()
    s = ds.scaled_profile(base, latency_scale=2.0, l1_bandwidth_scale=3.0, l3_bandwidth_scale=0.5)
    for a, b, k in zip(base.levels, s.levels, (0.5, 1.0, 3.0), strict=True):
        assert b.hop_latency_s == 2.0 * a.hop_latency_s
        assert b.link_bandwidth_bps == k * a.link_bandwidth_bps
    assert s.levels[2].centre_in_bps == 3.0 * base.levels[2].centre_in_bps
    big = ds.torus_mesh_switch((4, 4), (4, 4), 4)
    assert big.num_devices == 1024


def test_json_path_is_stamped_and_round_trips(tmp_path: Path) -> None:
    raw = ds.load_noc_profile("illustrative_ring_switch_32").to_dict()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    p = ds.load_noc_profile(path)
    assert p.provenance["profile_path"] == str(path)
    assert len(p.provenance["profile_sha256"]) == 64
    assert p.levels == ds.load_noc_profile("illustrative_ring_switch_32").levels


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ds.ProfileError) as info:
        ds.load_noc_profile("no_such_profile")
    assert "illustrative_gpu_node_8" in str(info.value)


def _base() -> dict:
    return copy.deepcopy(ds.load_noc_profile("illustrative_gpu_node_8").to_dict())


@pytest.mark.parametrize(
    ("patch", "field", "message"),
    [
        (
            lambda d: d["layers"]["L2"].update(kind="mesh2d", shape=[3, 2]),
            "layers.L2.shape",
            "mesh2d dimensions must be 1 or even",
        ),
        (
            lambda d: d["layers"]["L2"].update(kind="all_to_all", shape=[1, 2]),
            "layers.L2.shape",
            "all_to_all needs at least 4 nodes",
        ),
        (
            lambda d: d["layers"]["L1"].pop("switch_center_out_gbytes_per_s"),
            "layers.L1.switch_center_in_gbytes_per_s",
            "must be given together",
        ),
        (
            lambda d: d["layers"]["L1"].update(hop_latency_ns=-1),
            "layers.L1.hop_latency_ns",
            "non-negative",
        ),
        (lambda d: d["layers"].pop("L2"), "layers", "exactly the keys L3, L2 and L1"),
        (lambda d: d["layers"]["L1"].update(speed=1), "layers.L1", "unknown ['speed']"),
        (lambda d: d.update(port_spread="odd"), "port_spread", "even, nearest"),
        (lambda d: d["layers"]["L1"].update(shape=[1, "8"]), "layers.L1.shape", "two integers"),
    ],
)
def test_more_validation_rules(patch, field: str, message: str) -> None:
    raw = _base()
    patch(raw)
    with pytest.raises(ds.ProfileError) as info:
        ds.load_noc_profile(raw)
    assert info.value.field == field
    assert message in str(info.value)


def test_type_errors_are_type_errors() -> None:
    raw = _base()
    raw["layers"]["L1"]["link_bandwidth_gbytes_per_s"] = "fast"
    with pytest.raises(TypeError):
        ds.load_noc_profile(raw)
    with pytest.raises(TypeError):
        ds.load_noc_profile(42)  # type: ignore[arg-type]


def test_deepstack_does_not_import_plena_opt() -> None:
    """The network library stands alone (ARCHITECTURE.md: numpy only, never ``plena_opt``)."""
    import subprocess
    import sys

    code = (
        "import sys, deepstack, deepstack.collectives, deepstack.routing\n"
        "net = deepstack.Network('illustrative_gpu_node_8')\n"
        "net.all_reduce(deepstack.ParallelScheme(tp=8), 'tp', 1024)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('plena_opt', 'scipy', 'pydantic')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("level", "key", "value", "message"),
    [
        ("L1", "link_bandwidth_gbytes_per_s", 5e-324, "between 0.001 and 1e+06 GB/s"),
        ("L2", "link_bandwidth_gbytes_per_s", 1e300, "between 0.001 and 1e+06 GB/s"),
        ("L1", "hop_latency_ns", 5e-324, "0 or between 0.001 and 1e+09 ns"),
        ("L3", "hop_latency_ns", 1e12, "0 or between 0.001 and 1e+09 ns"),
        ("L1", "switch_center_in_gbytes_per_s", 1e-9, "between 0.001 and 1e+09 GB/s"),
    ],
)
def test_absurd_bandwidth_or_latency_is_refused_with_the_range(
    level: str, key: str, value: float, message: str
) -> None:
    """Issue 10: a denormal or absurd link is an error naming the field and the range."""
    raw = _base()
    raw["layers"][level][key] = value
    with pytest.raises(ds.ProfileError) as info:
        ds.load_noc_profile(raw)
    assert info.value.field == f"layers.{level}.{key}"
    assert message in str(info.value)


def test_zero_latency_and_range_ends_are_accepted() -> None:
    raw = _base()
    raw["layers"]["L1"]["hop_latency_ns"] = 0
    raw["layers"]["L2"]["link_bandwidth_gbytes_per_s"] = 1e-3
    raw["layers"]["L3"]["link_bandwidth_gbytes_per_s"] = 1e6
    prof = ds.load_noc_profile(raw)
    assert prof.levels[2].hop_latency_s == 0.0
    assert prof.levels[0].link_bandwidth_bps == 1e15


def test_deeply_nested_json_file_is_a_profile_error(tmp_path) -> None:
    """Issue 10: deeply nested JSON raises a clean ProfileError, never RecursionError."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ds.ProfileError) as info:
        ds.load_noc_profile(str(path))
    assert info.value.field == "profile"
    assert "nested too deeply" in str(info.value)
