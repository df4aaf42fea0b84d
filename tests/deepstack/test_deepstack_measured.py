"""Measured all-reduce tables in node profiles: loading, matching groups, interpolation."""

from __future__ import annotations

import copy
import math

import pytest
from deepstack import Network, ParallelScheme, ProfileError, load_noc_profile
from deepstack.gpu_nodes import first_devices
from deepstack.profile import profile_from_dict

from tests.conftest import require_shared


def _b200() -> dict:
    return load_noc_profile("hgx-b200x8").to_dict()


def test_hgx_profiles_ship_the_measured_tables_with_their_source() -> None:
    for name in ("hgx-h100x8", "hgx-h200x8", "hgx-b200x8"):
        m = load_noc_profile(name).measured_allreduce
        assert m is not None and "custom_allreduce" in m.source and "nccl" in m.source
        assert [t.devices for t in m.tables] == [2, 4, 8]
    # no B300 table ships: HGX B300 has the same NVLink 5 NVSwitch fabric, so B200's table
    b300 = load_noc_profile("hgx-b300x8").measured_allreduce
    assert b300 == load_noc_profile("hgx-b200x8").measured_allreduce
    assert load_noc_profile("illustrative_gpu_node_8").measured_allreduce is None


def test_shipped_table_is_the_faster_of_custom_and_nccl_per_size() -> None:
    from plena_opt.validate.calibrate_noc import measured_all_reduce

    kernels = require_shared() / "data" / "kernels"
    for system, name in (("b200_sxm", "hgx-b200x8"), ("h100_sxm", "hgx-h100x8")):
        prof = load_noc_profile(name)
        for g in (2, 4, 8):
            sizes, t = measured_all_reduce(kernels, system, g)
            table = prof.measured_allreduce.table(g)
            assert list(table.nbytes) == list(sizes)
            assert list(table.seconds) == pytest.approx(list(t), rel=1e-5)


def test_tp8_in_one_node_is_priced_from_the_table() -> None:
    net = Network("hgx-b200x8")
    table = net.profile.measured_allreduce.table(8)
    scheme = ParallelScheme(tp=8)
    # at a measured size: the measured time, including the step at 256-512 KB the fit misses
    for nb, t in zip(table.nbytes, table.seconds, strict=True):
        cost = net.all_reduce(scheme, "tp", int(nb))
        assert cost.algorithm == "measured" and cost.seconds == pytest.approx(t, rel=1e-12)
        assert cost.hop_seconds + cost.link_seconds == pytest.approx(cost.seconds)
        assert set(cost.candidates) >= {"ring", "recursive_doubling"}  # modelled ones kept
    # between sizes: log-log interpolation
    a, b = 4 * 2**20, 8 * 2**20
    ta, tb = table.seconds_at(a), table.seconds_at(b)
    mid = net.all_reduce(scheme, "tp", 6 * 2**20).seconds
    expect = math.exp(math.log(ta) + (math.log(tb / ta)) * math.log(1.5) / math.log(2))
    assert mid == pytest.approx(expect, rel=1e-12)
    # below the smallest size: the latency floor; above the largest: proportional to bytes
    assert net.all_reduce(scheme, "tp", 16).seconds == table.seconds[0]
    top = table.nbytes[-1]
    assert net.all_reduce(scheme, "tp", int(4 * top)).seconds == pytest.approx(
        4 * table.seconds[-1]
    )


def test_groups_of_other_shapes_keep_the_fitted_links() -> None:
    # tp=8 inside each of two nodes: measured; tp=16 spans two nodes: modelled
    two = Network("hgx-b200x8@2")
    assert two.all_reduce(ParallelScheme(tp=8, dp=2), "tp", 2**20).algorithm == "measured"
    assert two.all_reduce(ParallelScheme(tp=16), "tp", 2**20).algorithm != "measured"
    # dp groups of 2 across the nodes: each group straddles two switches
    assert two.all_reduce(ParallelScheme(tp=8, dp=2), "dp", 2**20).algorithm != "measured"
    # the table is used only for measured group sizes... and without a table never
    plain = Network(profile_from_dict({**_b200(), "measured_allreduce": None}))
    assert plain.all_reduce(ParallelScheme(tp=8), "tp", 2**20).algorithm != "measured"


def test_first_devices_keeps_the_tables_that_still_fit() -> None:
    four = first_devices(load_noc_profile("hgx-b200x8"), 4)
    assert [t.devices for t in four.measured_allreduce.tables] == [2, 4]
    net = Network(four)
    t4 = four.measured_allreduce.table(4)
    cost = net.all_reduce(ParallelScheme(tp=4), "tp", int(t4.nbytes[5]))
    assert cost.seconds == pytest.approx(t4.seconds[5], rel=1e-12)


def test_round_trip_and_describe() -> None:
    raw = _b200()
    again = profile_from_dict(raw)
    assert again.measured_allreduce == load_noc_profile("hgx-b200x8").measured_allreduce
    assert again.describe()["measured_allreduce"]["devices"] == [2, 4, 8]
    assert "measured_allreduce" not in load_noc_profile("illustrative_gpu_node_8").describe()


@pytest.mark.parametrize(
    ("patch", "field", "rule"),
    [
        (lambda m: m["groups"][0]["bytes"].reverse(), "groups[0].bytes", "strictly increasing"),
        (lambda m: m["groups"][0].update(devices=16), "groups[0].devices", "2 to the 8 ports"),
        (lambda m: m["groups"][1].update(devices=2), "groups", "only once"),
        (lambda m: m["groups"][0]["microseconds"].pop(), "microseconds", "equal length"),
        (lambda m: m["groups"][0]["microseconds"].__setitem__(0, -1.0), "microseconds", "between"),
        (lambda m: m.update(source=""), "source", "non-empty"),
        (lambda m: m.update(extra=1), "measured_allreduce", "unknown ['extra']"),
        (lambda m: m.update(groups=[]), "groups", "list of 1 to"),
    ],
)
def test_bad_tables_are_refused_naming_the_field(patch, field: str, rule: str) -> None:
    raw = _b200()
    m = copy.deepcopy(raw["measured_allreduce"])
    patch(m)
    with pytest.raises(ProfileError) as exc:
        profile_from_dict({**raw, "measured_allreduce": m})
    assert field in exc.value.field and rule in str(exc.value)


def test_a_table_needs_a_switch_l1() -> None:
    raw = _b200()
    l1 = raw["layers"]["L1"]
    raw["layers"]["L1"] = {
        k: l1[k] for k in ("shape", "hop_latency_ns", "link_bandwidth_gbytes_per_s")
    }
    raw["layers"]["L1"]["kind"] = "ring"
    with pytest.raises(ProfileError, match="kind 'switch'"):
        profile_from_dict(raw)
