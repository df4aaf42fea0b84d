"""``Network.price`` gives exactly the seconds and energy of the full collective reports.

The evaluator asks deepstack for (seconds, energy) only; the report (every candidate, the
busiest link, each pipeline boundary) is built by ``all_reduce`` & co. from the same assembled
candidates. Both must agree to the last bit on every kind of NoC: all-switch and routed
hierarchies, rings and tori, power-of-two and other group sizes, measured tables (HGX), with and
without energy coefficients.
"""

from __future__ import annotations

import pytest
from deepstack import Network, ParallelScheme, load_noc_profile

PROFILES = [
    "illustrative_gpu_cluster_32",
    "ring_switch_32",
    "illustrative_torus_mesh_switch_64",
    "hgx-h200x8",
    "h200x32",
]
SIZES = (0, 1, 7, 4096, 123_457, 10**7)


def _schemes(n: int) -> list[tuple[ParallelScheme, str]]:
    out = []
    for tp in (1, 2, 3, 4, 8, n):
        if n % tp:
            continue
        rest = n // tp
        for pp in (1, 2, 4, rest):
            if rest % pp:
                continue
            s = ParallelScheme(tp=tp, dp=rest // pp, pp=pp)
            out += [(s, "tp"), (s, "dp")]
    out.append((ParallelScheme(tp=2, cp=n // 2), "cp"))
    return out


@pytest.mark.parametrize("name", PROFILES)
def test_price_equals_the_reports(name: str) -> None:
    profile = load_noc_profile(name)
    net = Network(profile)
    fresh = Network(profile)  # prices first, reports second: order does not matter
    for scheme, dim in _schemes(profile.num_devices):
        for x in SIZES:
            for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
                got = fresh.price(op, scheme, dim, x)
                full = getattr(net, op)(scheme, dim, x)
                assert got == (full.seconds, full.noc_energy_pj), (name, op, scheme, dim, x)
            p2p = net.pipeline_p2p(scheme, x)
            assert fresh.price("p2p", scheme, "pp", x) == (
                p2p.seconds,
                p2p.noc_energy_pj_all_boundaries,
            )


def test_measured_groups_take_the_table() -> None:
    net = Network(load_noc_profile("hgx-h200x8"))
    s = ParallelScheme(tp=8)
    report = net.all_reduce(s, "tp", 10**6)
    assert report.algorithm == "measured"  # the case above covers a measured table
    assert net.price("all_reduce", s, "tp", 10**6)[0] == report.seconds
    modelled = min(c.seconds for c in report.candidates.values() if c is not None)
    assert report.seconds != modelled


def test_price_checks_its_inputs() -> None:
    net = Network(load_noc_profile("illustrative_gpu_cluster_32"))
    with pytest.raises(ValueError, match="scheme"):
        net.price("all_reduce", ParallelScheme(tp=4), "tp", 10)
    with pytest.raises(ValueError, match="nbytes"):
        net.price("all_reduce", ParallelScheme(tp=32), "tp", "10")
    with pytest.raises(ValueError, match="op must be one of"):
        net.price("broadcast", ParallelScheme(tp=32), "tp", 10)
