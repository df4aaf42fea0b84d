"""Python-built NoC profiles: DeepStack-equivalent presets, the test fixture and scaling helpers.

Spec: network-model.md §13 (h200x32, ring_switch_32, torus_mesh_switch_64, scaling),
analytic-model.md §7 and golden/README.md (``switch_noc(n, groups)`` test fixture).
All values in seconds and bytes/s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .errors import ProfileError
from .gpu_nodes import derived_profile
from .profile import EnergyConfig, NocProfile
from .topology import Level

EXAMPLE_ENERGY = EnergyConfig(1.0, 2.0, 3.0)  # DeepStack examples/custom_noc.py, §6


def _switch(n: int, hop_s: float, bw: float, centre: float | None = None) -> Level:
    return Level("switch", 1, n, hop_s, bw, centre, centre)


def make_hierarchy(
    name: str,
    l3: Level,
    l2: Level,
    l1: Level,
    energy: EnergyConfig | None = None,
    provenance: dict | None = None,
) -> NocProfile:
    """Assemble a profile from three levels (outer → inner) without JSON validation."""
    return NocProfile(name, (l3, l2, l1), energy, dict(provenance or {}))


def switch_noc(n: int, groups: int = 1, energy: bool = True) -> NocProfile:
    """The reference test fixture ``switch_noc(n, groups)`` (golden/README.md).

    L3 = 1-port switch (0 s, 50 GB/s); L2 = ``groups``-port switch (1000 ns, 50 GB/s); L1 =
    ``n/groups``-port switch (200 ns, 100 GB/s); a switch with more than one port gets centre
    in/out = link × ports; energy 1/2/3 pJ/bit unless ``energy=False``.
    """
    if n < 1 or groups < 1 or n % groups:
        raise ProfileError("n", f"switch_noc needs n divisible by groups (n={n}, groups={groups})")
    per = n // groups

    def centre(bw: float, ports: int) -> float | None:
        return bw * ports if ports > 1 else None

    return make_hierarchy(
        f"test-switch-{groups}x{per}",
        _switch(1, 0.0, 50e9),
        _switch(groups, 1000 * 1e-9, 50e9, centre(50e9, groups)),
        _switch(per, 200 * 1e-9, 100e9, centre(100e9, per)),
        EXAMPLE_ENERGY if energy else None,
    )


def h200x32(nvlink_bw: float = 370e9, ib_bw: float = 50e9) -> NocProfile:
    """DeepStack's ``h200x32``: 4 NVSwitch nodes of 8 GPUs on InfiniBand (§13); no energy."""
    return make_hierarchy(
        "h200x32",
        _switch(1, 0.0, 10 * ib_bw, 10 * ib_bw * 8),
        _switch(4, 5e-6, ib_bw, 4 * ib_bw),
        _switch(8, 2.5e-6 / 2, nvlink_bw, 8 * nvlink_bw),
        None,
        {"source": "DeepStack h200x32 preset values (network-model.md §13)"},
    )


def ring_switch_32(local_bw: float = 100e9, ring_bw: float = 50e9) -> NocProfile:
    """DeepStack ``examples/custom_noc.py`` ring of 4 switched groups of 8 (§13)."""
    return make_hierarchy(
        "ring_switch_32",
        _switch(1, 0.0, 50e9),
        Level("ring", 1, 4, 1e-6, ring_bw),
        _switch(8, 200e-9, local_bw, 8 * local_bw),
        EXAMPLE_ENERGY,
        {"source": "DeepStack examples/custom_noc.py (network-model.md §13)"},
    )


def torus_mesh_switch(
    torus_shape: tuple[int, int] = (2, 2),
    mesh_shape: tuple[int, int] = (2, 2),
    ports: int = 4,
    local_bw: float = 100e9,
    mesh_bw: float = 50e9,
    torus_bw: float = 25e9,
    name: str | None = None,
) -> NocProfile:
    """L3 torus × L2 mesh × L1 switch, the ``torus_mesh_switch_64`` pattern with any shape."""
    tr, tc = torus_shape
    mr, mc = mesh_shape
    return make_hierarchy(
        name or f"torus_mesh_switch_{tr * tc * mr * mc * ports}",
        Level("torus2d", tr, tc, 2e-6, torus_bw),
        Level("mesh2d", mr, mc, 1e-6, mesh_bw),
        _switch(ports, 200e-9, local_bw, ports * local_bw),
        EXAMPLE_ENERGY,
        {"source": "DeepStack examples/custom_noc.py pattern (network-model.md §13)"},
    )


def torus_mesh_switch_64(
    local_bw: float = 100e9, mesh_bw: float = 50e9, torus_bw: float = 25e9
) -> NocProfile:
    """DeepStack ``examples/custom_noc.py`` 2×2 torus of 2×2 meshes of 4-port switches (§13)."""
    return torus_mesh_switch((2, 2), (2, 2), 4, local_bw, mesh_bw, torus_bw, "torus_mesh_switch_64")


def scaled_profile(
    base: NocProfile,
    latency_scale: float = 1.0,
    l1_bandwidth_scale: float = 1.0,
    l2_bandwidth_scale: float = 1.0,
    l3_bandwidth_scale: float = 1.0,
    name: str | None = None,
) -> NocProfile:
    """Multiply every hop latency by ``latency_scale`` and each level's link and centre bandwidths
    by its scale (DeepStack ``make_scaled_profile``, §13); per-device NICs scale with L2."""
    scales = (l3_bandwidth_scale, l2_bandwidth_scale, l1_bandwidth_scale)
    if latency_scale < 0 or any(s <= 0 for s in scales):
        raise ProfileError("scale", "latency scale must be >= 0 and bandwidth scales > 0")
    levels = tuple(
        replace(
            lv,
            hop_latency_s=lv.hop_latency_s * latency_scale,
            link_bandwidth_bps=lv.link_bandwidth_bps * s,
            centre_in_bps=None if lv.centre_in_bps is None else lv.centre_in_bps * s,
            centre_out_bps=None if lv.centre_out_bps is None else lv.centre_out_bps * s,
        )
        for lv, s in zip(base.levels, scales, strict=True)
    )
    # the measured in-node tables hold while the L1 switch is unscaled (``derived_profile``)
    return derived_profile(
        base,
        name or f"{base.name}-scaled",
        levels,  # type: ignore[arg-type]
        {**base.provenance, "scaled_from": base.name},
        nic_scale=l2_bandwidth_scale,
    )


def single_device() -> NocProfile:
    """One device: no network (every collective is free). Lets a plan of all ones — e.g. a MoE
    model on one chip — run through the distributed estimate."""
    return replace(switch_noc(1, energy=True), name="single_device")


PRESETS: dict[str, Callable[[], NocProfile]] = {
    "single_device": single_device,
    "h200x32": h200x32,
    "ring_switch_32": ring_switch_32,
    "torus_mesh_switch_64": torus_mesh_switch_64,
}
