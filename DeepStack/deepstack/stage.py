"""One stage of a collective: concurrent flows routed once, priced for any payload.

Spec: network-model.md §5 (stage time = longest route's hop latency + busiest link's bytes ÷
bandwidth) and §6 (energy = Σ link bytes · 8 · pJ/bit). A stage pattern stores the per-link *flow
multiplicity per unit payload*; pricing a payload ``p`` (integer bytes per unit, already truncated
like the reference's uint64 traffic matrix, §2) multiplies it in, so results stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .routing import Router


@dataclass(frozen=True)
class StageCost:
    """Hop seconds, link seconds and NoC energy (pJ) of one stage, plus its busiest link id."""

    hop_seconds: float
    link_seconds: float
    energy_pj: float
    busiest_link: int | None


ZERO_STAGE = StageCost(0.0, 0.0, 0.0, None)


class StagePattern:
    """Flows ``src → dst`` with integer weights (bytes = weight · payload) routed on a Router."""

    __slots__ = ("hop", "mult", "cap", "link_ids", "energy_per_unit", "flows", "_order")

    def __init__(self, router: Router, src: np.ndarray, dst: np.ndarray, weight: np.ndarray):
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        weight = np.asarray(weight, dtype=np.int64).ravel()
        keep = (src != dst) & (weight > 0)
        n = router.num_devices
        key, inverse = np.unique(src[keep] * n + dst[keep], return_inverse=True)
        wsum = np.bincount(inverse, weights=weight[keep], minlength=len(key))
        self.flows = len(key)
        if not len(key):
            self.hop = 0.0
            self.mult = self.cap = np.zeros(0)
            self.link_ids = np.zeros(0, dtype=np.int64)
            self.energy_per_unit = 0.0
            return
        s_dev, d_dev = key // n, key % n
        if router.inner_switch:
            hops, ids, reps = _switch_fast_path(router, s_dev, d_dev, wsum)
        else:
            chains = [router.chain(int(a), int(b)) for a, b in zip(s_dev, d_dev, strict=True)]
            hops = np.array([lat for _, lat in chains])
            ids = np.concatenate([c for c, _ in chains])
            reps = np.repeat(wsum, [len(c) for c, _ in chains])
        self.hop = float(hops.max())
        cap_all, epb_all = router.arrays()
        mult = np.bincount(ids, weights=reps, minlength=len(cap_all))
        loaded = np.flatnonzero(mult)
        self.energy_per_unit = float(np.sum(mult[loaded] * 8.0 * epb_all[loaded]))
        modelled = loaded[cap_all[loaded] > 0.0]
        self.link_ids = modelled
        self.mult = mult[modelled]
        self.cap = cap_all[modelled]

    def cost(self, payload: int) -> StageCost:
        """Price the stage when each unit of weight carries ``payload`` bytes."""
        if payload <= 0 or not self.flows:
            return ZERO_STAGE
        if len(self.mult):
            times = self.mult * float(payload) / self.cap
            i = int(np.argmax(times))
            link, busiest = float(times[i]), int(self.link_ids[i])
        else:
            link, busiest = 0.0, None
        return StageCost(self.hop, link, float(payload) * self.energy_per_unit, busiest)

    @property
    def nbytes(self) -> int:
        """Memory held by this pattern's arrays (bytes)."""
        return int(self.mult.nbytes + self.cap.nbytes + self.link_ids.nbytes)


def _switch_fast_path(
    router: Router, s_dev: np.ndarray, d_dev: np.ndarray, wsum: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-flow hop latency and (link id, weight) lists for an innermost-switch hierarchy.

    Every route is device → its L1 centre (+ a shared middle between centres) → device, so link
    loads are accumulated per device end and per middle segment instead of per flow.
    """
    per_l1 = router.sizes[2]
    devices = np.union1d(s_dev, d_dev)
    ends = {int(u): router.ends(int(u)) for u in devices}
    up_lat = np.zeros(router.num_devices)
    down_lat = np.zeros(router.num_devices)
    for u, (_, lu, _, ld) in ends.items():
        up_lat[u], down_lat[u] = lu, ld
    cross = np.flatnonzero(s_dev // per_l1 != d_dev // per_l1)
    mid_idx = np.array(
        [
            router.middle(a, b)
            for a, b in zip(s_dev[cross].tolist(), d_dev[cross].tolist(), strict=True)
        ],
        dtype=np.int64,
    )
    mid_lat = np.zeros(len(s_dev))
    if len(cross):
        mid_lat[cross] = np.array([router.middles[i][2] for i in mid_idx.tolist()])[
            np.arange(len(cross))
        ]
    hops = up_lat[s_dev] + mid_lat + down_lat[d_dev]
    ids: list[int] = []
    weights: list[float] = []
    w_up = np.bincount(s_dev, weights=wsum, minlength=router.num_devices)
    w_down = np.bincount(d_dev, weights=wsum, minlength=router.num_devices)
    for u, (up, _, down, _) in ends.items():
        if w_up[u]:
            ids.extend(up)
            weights.extend([w_up[u]] * len(up))
        if w_down[u]:
            ids.extend(down)
            weights.extend([w_down[u]] * len(down))
    if len(cross):
        entries, inverse = np.unique(mid_idx, return_inverse=True)
        w_mid = np.bincount(inverse, weights=wsum[cross])
        for e, w in zip(entries.tolist(), w_mid.tolist(), strict=True):
            seg = router.middles[e][1]
            ids.extend(seg)
            weights.extend([w] * len(seg))
    return hops, np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float64)
