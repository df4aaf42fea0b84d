"""The HGX presets' NVLink links: fitted on the collectives without in-switch reduction, below
the NVLink rate, with their residuals; sub-networks keep the node's measured tables."""

from __future__ import annotations

import numpy as np
import pytest
from deepstack import Network, ParallelScheme, load_noc_profile, scaled_profile
from deepstack.gpu_nodes import NIC_BYTES_PER_S, NIC_EFFICIENCY, first_devices

from plena_opt.estimate.disaggregated import sub_noc
from plena_opt.validate.calibrate_links import LINK_GROUPS, LINK_OPS, fit_links, model_collective
from plena_opt.validate.calibrate_noc import NODES, fit_node, measured_all_reduce
from tests.conftest import require_shared

HGX = ("hgx-h100x8", "hgx-h200x8", "hgx-b200x8", "hgx-b300x8")
# Bandwidth-regime (>= 16 MiB) per-size MAPE of the fitted links, mean over op x group size.
# Measured: H100 13.5 %, H200 13.3 %, B200 20.8 % (NCCL's bus bandwidth still grows up to
# 512 MiB and differs by group size; one link per node cannot follow both).
BANDWIDTH_MAPE_LIMIT = {"h100_sxm": 0.15, "h200_sxm": 0.15, "b200_sxm": 0.22}


def _kernels():
    return require_shared() / "data" / "kernels"


@pytest.mark.parametrize("system", list(NODES))
def test_shipped_links_are_the_fit_on_collectives_without_nvls(system: str) -> None:
    name, _, nominal = NODES[system]
    fit = fit_links(_kernels(), system, nominal)
    l1 = load_noc_profile(name).levels[2]
    assert l1.hop_latency_s == pytest.approx(fit.hop_latency_s, rel=1e-6)
    assert l1.link_bandwidth_bps == pytest.approx(fit.link_bandwidth_bps, rel=1e-3)
    assert fit.regime_mape(0) < BANDWIDTH_MAPE_LIMIT[system]
    assert set(fit.residuals) == {(op, g) for op in LINK_OPS for g in LINK_GROUPS}
    assert max(r[0] for r in fit.residuals.values()) < 0.40
    prov = load_noc_profile(name).provenance
    assert prov["link_fit_residuals"] == fit.note() and fit.data in prov["source"]


@pytest.mark.parametrize("system", list(NODES))
def test_links_are_below_the_nvlink_rate_and_the_nvls_all_reduce(system: str) -> None:
    """The links carry no in-switch reduction: below the NVLink rate per direction and below
    the all-reduce's bus bandwidth, which keeps its own table; the all-reduce fit (not shipped)
    exceeds the rate on H100/H200."""
    name, _, nominal = NODES[system]
    prof = load_noc_profile(name)
    link = prof.levels[2].link_bandwidth_bps
    assert link < nominal
    sizes, t = measured_all_reduce(_kernels(), system)
    assert link < 2 * sizes[-1] * 7 / 8 / t[-1]
    if system != "b200_sxm":
        assert fit_node(_kernels(), system).link_bandwidth_bps > nominal
    # the 8-GPU all-reduce is still the measured one, not the (slower) links'
    net = Network(prof)
    c = net.all_reduce(ParallelScheme(tp=8), "tp", 64 << 20)
    assert c.algorithm == "measured" and c.seconds == pytest.approx(
        prof.measured_allreduce.table(8).seconds_at(64 << 20)
    )


def test_the_link_model_follows_the_largest_two_gpu_transfer() -> None:
    """A 2-GPU all-gather of 512 MiB is one point-to-point exchange: the links price it within
    10 % of nccl-tests (what pipeline p2p and KV transfer rely on)."""
    from plena_opt.validate.calibrate_noc import measured_collective

    for system in NODES:
        l1 = load_noc_profile(NODES[system][0]).levels[2]
        sizes, t = measured_collective(_kernels(), system, "all_gather", 2)
        pred = model_collective("all_gather", 2, l1.hop_latency_s, l1.link_bandwidth_bps, sizes)
        assert abs(pred[-1] / t[-1] - 1) < 0.10, system


def test_hgx_b300_has_the_b200_links_and_tables() -> None:
    """Same NVLink 5 NVSwitch fabric, no B300 table ships: B200's links and measured tables (from
    the links alone every TP plan on HGX B300 was slower than on HGX B200, issue 24)."""
    b200, b300 = (load_noc_profile(n) for n in ("hgx-b200x8", "hgx-b300x8"))
    assert b300.levels == b200.levels
    assert b300.measured_allreduce == b200.measured_allreduce is not None
    assert b300.measured_collectives == b200.measured_collectives is not None


@pytest.mark.parametrize("name", HGX)
def test_multi_node_uplinks_are_the_nics_and_slower_than_nvlink(name: str) -> None:
    four = load_noc_profile(f"{name}@4")
    l2, l1 = four.levels[1], four.levels[2]
    assert l2.link_bandwidth_bps == pytest.approx(8 * NIC_BYTES_PER_S * NIC_EFFICIENCY)
    assert NIC_BYTES_PER_S * NIC_EFFICIENCY < l1.link_bandwidth_bps
    # the same 64 MiB per GPU over a boundary inside a node (tp 4 x pp 8, boundary 0) and one
    # between nodes (tp 8 x pp 4: 8 GPUs share the node's 8 NICs)
    net = Network(four)
    inside = net.pipeline_p2p(ParallelScheme(tp=4, pp=8), 64 << 20).boundaries[0]
    across = net.pipeline_p2p(ParallelScheme(tp=8, pp=4), 64 << 20).boundaries[0]
    ratio = l1.link_bandwidth_bps / (NIC_BYTES_PER_S * NIC_EFFICIENCY)
    assert across.link_seconds == pytest.approx(ratio * inside.link_seconds, rel=1e-6)


def test_a_pool_of_part_of_a_node_keeps_the_measured_tables() -> None:
    node = load_noc_profile("hgx-h200x8")
    pool = sub_noc(node, 4)
    assert [t.devices for t in pool.measured_allreduce.tables] == [2, 4]
    assert {op: [t.devices for t in ts] for op, ts in pool.measured_collectives.ops} == {
        op: [2, 4] for op in LINK_OPS
    }
    c = Network(pool).all_reduce(ParallelScheme(tp=4), "tp", 1 << 20)
    table = node.measured_allreduce.table(4)
    assert c.algorithm == "measured" and c.seconds == pytest.approx(table.seconds_at(1 << 20))
    whole = sub_noc(load_noc_profile("hgx-h200x8@2"), 8)
    assert whole.measured_allreduce.table(8) is not None
    assert first_devices(node, 4).measured_allreduce == pool.measured_allreduce


def test_scaling_keeps_the_tables_only_while_the_node_switch_is_unchanged() -> None:
    base = load_noc_profile("hgx-h100x8@2")
    outer = scaled_profile(base, l2_bandwidth_scale=2.0)
    assert outer.measured_allreduce == base.measured_allreduce
    assert outer.measured_collectives == base.measured_collectives
    for inner in (scaled_profile(base, l1_bandwidth_scale=2.0), scaled_profile(base, 2.0)):
        assert inner.measured_allreduce is None and inner.measured_collectives is None
        assert "dropped" in inner.provenance["measured_tables"]
        c = Network(inner).all_reduce(ParallelScheme(tp=8, dp=2), "tp", 1 << 20)
        assert c.algorithm != "measured"
    assert np.isclose(outer.levels[1].link_bandwidth_bps, 2 * base.levels[1].link_bandwidth_bps)
