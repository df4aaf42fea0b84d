"""``switch_loads.top_links`` (reductions without wrappers, one busiest load per kind found at
once) gives what the plain formulation gives: the same links, loads, capacities, energy and link
numbering, on random per-level loads with ties within and across kinds."""

from __future__ import annotations

from dataclasses import replace

import deepstack as ds
import numpy as np
import pytest
from deepstack.switch_loads import LevelLoads, link_key, nic_key, top_links
from deepstack.topology import Level


def _router(nic: float | None) -> ds.Network:
    def sw(n: int, bw: float) -> Level:
        return Level("switch", 1, n, 1e-6, bw)

    prof = ds.make_hierarchy("sw", sw(2, 100e9), sw(2, 50e9), sw(4, 25e9), ds.EnergyConfig(1, 2, 3))
    return ds.Network(replace(prof, nic_bandwidth_bps=nic)).router


def _plain(router, loads: LevelLoads):
    """The formulation before the shortcuts: ``ndarray.sum``/``max``, ``np.unique`` per kind."""
    epb = router._epb
    energy = 0.0
    kinds = []
    for level in range(3):
        cap = router.levels[level].link_bandwidth_bps
        total = loads.up[level].sum() + loads.down[level].sum()
        energy += float(total * loads.tiles) * 8.0 * epb[level]
        for direction, arr in (("up", loads.up[level]), ("down", loads.down[level])):
            kinds.append((level, direction, arr, cap, epb[level], False))
    if loads.nic is not None:
        kinds += [(1, "up", loads.nic[0], router.nic_bps, 0.0, True),
                  (1, "down", loads.nic[1], router.nic_bps, 0.0, True)]  # fmt: skip
    best = max((float(k[2].max()) / k[3] for k in kinds if len(k[2])), default=0.0)
    if best <= 0.0:
        return [], [], [], energy
    chosen = {}
    for level, direction, arr, cap, pj, is_nic in kinds:
        floor = best * (1 - 1e-9) * cap
        if not len(arr) or arr.max() < floor * (1 - 1e-12):
            continue
        hit = np.flatnonzero(arr / cap >= best * (1 - 1e-9))
        for load in np.unique(arr[hit]).tolist():
            if (load, cap) in chosen:
                continue
            key = int(hit[np.flatnonzero(arr[hit] == load)[0]])
            name = nic_key(direction, key) if is_nic else link_key(router, level, direction, key)
            chosen[(load, cap)] = (is_nic, router._link(name, cap, level, pj))
    order = sorted(chosen.items(), key=lambda kv: kv[1])
    return [i for _, (_, i) in order], [k[0] for k, _ in order], [k[1] for k, _ in order], energy


@pytest.mark.parametrize("nic", [None, 20e9])
def test_top_links_equals_the_plain_formulation(nic) -> None:
    rng = np.random.default_rng(5)
    fast, plain = _router(nic), _router(nic)
    sizes = (2, 4, 16)
    for trial in range(300):
        top = float(rng.integers(1, 5))
        levels = [0.0, 1.0, top, top * 2, top * 2 * (1 - 1e-10), top * 4]  # ties at the top

        def arr(n: int, levels: list[float] = levels) -> np.ndarray:
            return rng.choice(levels, size=n) * rng.choice([1.0, 0.5, 2.0])

        up = tuple(arr(n) for n in sizes)
        down = tuple(arr(n) for n in sizes)
        nic_loads = None if nic is None else (arr(16), arr(16))
        loads = LevelLoads(up, down, 1e-6, 10, nic_loads, int(rng.integers(1, 3)))
        ids, mult, cap, energy = top_links(fast, loads)
        p_ids, p_mult, p_cap, p_energy = _plain(plain, loads)
        assert ids.tolist() == p_ids, trial
        assert mult.tolist() == p_mult and cap.tolist() == p_cap and energy == p_energy
    assert fast.link_keys == plain.link_keys
