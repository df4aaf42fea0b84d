"""One stage of a collective: concurrent flows routed once, priced for any payload.

Spec: network-model.md §5 (stage time = longest route's hop latency + busiest link's bytes ÷
bandwidth) and §6 (energy = Σ link bytes · 8 · pJ/bit). A stage pattern stores the per-link *flow
multiplicity per unit payload*; pricing a payload ``p`` (integer bytes per unit, already truncated
like the reference's uint64 traffic matrix, §2) multiplies it in, so results stay exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .routing import Router
from .switch_loads import LevelLoads, flow_loads, top_links


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

    __slots__ = (
        "hop",
        "mult",
        "cap",
        "link_ids",
        "energy_per_unit",
        "flows",
        "unmodelled",
        "_one",
    )

    def __init__(
        self,
        router: Router,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray,
        *,
        routed: bool = False,
        devices: int | None = None,
    ) -> None:
        """``routed`` forces per-pair routing where a per-level closed form exists (checks).
        ``devices`` (all-switch NoCs, from ``switch_loads.period_devices``): the flows given are
        those of devices [0, devices) of a layout that repeats them every ``devices`` devices."""
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        weight = np.asarray(weight, dtype=np.int64).ravel()
        keep = (src != dst) & (weight > 0)
        n = router.num_devices
        if router.all_switch and not routed:  # loads are sums: repeated pairs need no merging
            loads = flow_loads(router, src[keep], dst[keep], weight[keep], devices)
            self._set_level_loads(router, loads)
            return
        if devices is not None:
            raise ValueError("a periodic layout's flows are priced on all-switch NoCs only")
        key, inverse = np.unique(src[keep] * n + dst[keep], return_inverse=True)
        wsum = np.bincount(inverse, weights=weight[keep], minlength=len(key))
        self.flows = len(key)
        self.unmodelled = 0
        if not len(key):
            self.hop = 0.0
            self.mult = self.cap = np.zeros(0)
            self.link_ids = np.zeros(0, dtype=np.int64)
            self.energy_per_unit = 0.0
            self._one = None
            return
        s_dev, d_dev = key // n, key % n
        if router.inner_switch:
            hops, ids, reps = _switch_fast_path(router, s_dev, d_dev, wsum)
        else:
            chains = [router.chain(int(a), int(b)) for a, b in zip(s_dev, d_dev, strict=True)]
            hops = np.array([lat for _, lat in chains])
            ids = np.concatenate([c for c, _ in chains])
            reps = np.repeat(wsum, [len(c) for c, _ in chains])
        cap_all = router.arrays()[0]
        self._finish(router, float(hops.max()), np.bincount(ids, reps, minlength=len(cap_all)))

    @classmethod
    def from_flow_chunks(
        cls, router: Router, chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]
    ) -> StagePattern:
        """A pattern from chunks of distinct flows ``(src, dst, weight)``, src ≠ dst, on a NoC
        whose L1 is a switch: each chunk is routed and accumulated, never all flows at once."""
        pat = cls.__new__(cls)
        pat.flows = 0
        hop = 0.0
        mult = np.zeros(0)
        for src, dst, w in chunks:
            if not len(src):
                continue
            if router.all_switch:
                raise ValueError("use the per-level loads of an all-switch NoC")
            hops, ids, reps = _switch_fast_path(router, src, dst, w)
            pat.flows += len(src)
            hop = max(hop, float(hops.max()))
            add = np.bincount(ids, reps, minlength=len(router.link_keys))
            add[: len(mult)] += mult
            mult = add
        if not pat.flows:
            pat.hop, pat.unmodelled, pat.energy_per_unit = 0.0, 0, 0.0
            pat.mult = pat.cap = np.zeros(0)
            pat.link_ids = np.zeros(0, dtype=np.int64)
            pat._one = None
            return pat
        pat._finish(router, hop, mult)
        return pat

    @classmethod
    def from_links(
        cls, router: Router, hop: float, ids: np.ndarray, weights: np.ndarray, flows: int
    ) -> StagePattern:
        """A pattern from (link id, weight) pairs already aggregated over its flows."""
        pat = cls.__new__(cls)
        pat.flows = flows
        pat._finish(router, hop, np.bincount(ids, weights, minlength=len(router.link_keys)))
        return pat

    def _finish(self, router: Router, hop: float, mult: np.ndarray) -> None:
        """Keep the hop latency, energy per unit and the busiest links of per-link loads."""
        self.hop = hop
        cap_all, epb_all = router.arrays()
        mult = np.concatenate([mult, np.zeros(len(cap_all) - len(mult))])
        loaded = np.flatnonzero(mult)
        self.energy_per_unit = float(np.sum(mult[loaded] * 8.0 * epb_all[loaded]))
        modelled = loaded[cap_all[loaded] > 0.0]
        self.unmodelled = int(router.unmodelled(loaded).sum())
        ratio = mult[modelled] / cap_all[modelled]
        # links whose load/capacity is within rounding of the maximum decide the link time; links
        # with identical (load, capacity) give identical times, so one of each is kept
        top = modelled[ratio >= ratio.max() * (1 - 1e-9)] if len(modelled) else modelled
        if len(top) > 1:  # (load, capacity) pairs as complex numbers: one 1-D unique
            _, first = np.unique(mult[top] + 1j * cap_all[top], return_index=True)
            top = top[np.sort(first)]
        self.link_ids = top
        self.mult = mult[top]
        self.cap = cap_all[top]
        self._set_one()

    @classmethod
    def with_loads(
        cls,
        router: Router,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray,
        devices: int | None = None,
    ) -> tuple[StagePattern, LevelLoads]:
        """``StagePattern(router, src, dst, weight, devices=devices)`` on an all-switch NoC and
        its per-level loads (whose ``reversed()`` are those of the flows ``dst → src``)."""
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        weight = np.asarray(weight, dtype=np.int64).ravel()
        keep = (src != dst) & (weight > 0)
        loads = flow_loads(router, src[keep], dst[keep], weight[keep], devices)
        return cls.from_level_loads(router, loads), loads

    @classmethod
    def from_level_loads(cls, router: Router, loads: LevelLoads) -> StagePattern:
        """A pattern from per-level link loads of an all-switch NoC (no per-pair routing)."""
        pat = cls.__new__(cls)
        pat.unmodelled = 0
        pat._set_level_loads(router, loads)
        return pat

    def _set_level_loads(self, router: Router, loads: LevelLoads) -> None:
        self.flows = loads.flows
        self.unmodelled = 0
        self.hop = loads.hop
        self.link_ids, self.mult, self.cap, self.energy_per_unit = top_links(router, loads)
        self._set_one()

    def _set_one(self) -> None:
        """Keep the busiest link as Python numbers when it is the only one (``parts``)."""
        self._one = None
        if len(self.mult) == 1:
            self._one = (float(self.mult[0]), float(self.cap[0]), int(self.link_ids[0]))

    def cost(self, payload: int) -> StageCost:
        """Price the stage when each unit of weight carries ``payload`` bytes."""
        if payload <= 0 or not self.flows:
            return ZERO_STAGE
        return StageCost(*self.parts(payload))

    def parts(self, payload: int) -> tuple[float, float, float, int | None]:
        """``cost(payload)`` as a tuple (hop s, link s, energy pJ, busiest link id)."""
        if payload <= 0 or not self.flows:
            return 0.0, 0.0, 0.0, None
        one = self._one
        if one is not None:
            mult, cap, link_id = one
            return self.hop, mult * payload / cap, float(payload) * self.energy_per_unit, link_id
        if len(self.mult):
            times = self.mult * float(payload) / self.cap
            i = int(np.argmax(times))
            link, busiest = float(times[i]), int(self.link_ids[i])
        else:
            link, busiest = 0.0, None
        return self.hop, link, float(payload) * self.energy_per_unit, busiest

    @property
    def nbytes(self) -> int:
        """Memory held by this pattern's arrays (bytes)."""
        return int(self.mult.nbytes + self.cap.nbytes + self.link_ids.nbytes)


def _switch_fast_path(
    router: Router, s_dev: np.ndarray, d_dev: np.ndarray, wsum: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-flow hop latency and (link id, weight) arrays for an innermost-switch hierarchy.

    Every route is device → its L1 centre (→ a shared middle segment between centres) → device,
    so link loads are accumulated per device end and per middle segment instead of per flow.
    """
    per_l1 = router.sizes[2]
    n = router.num_devices
    up, up_lat, down, down_lat = router.end_arrays()
    cross = np.flatnonzero(s_dev // per_l1 != d_dev // per_l1)
    first = up_lat[s_dev]  # up hop, or up hop + middle (summed in route order) across L1s
    parts_ids = [up.ravel(), down.ravel()]
    parts_w = [
        np.repeat(np.bincount(s_dev, weights=wsum, minlength=n), 2),
        np.repeat(np.bincount(d_dev, weights=wsum, minlength=n), 2),
    ]
    if len(cross):
        mid_lat, mid_ids, mid_w = _middles(router, s_dev[cross], d_dev[cross], wsum[cross])
        first[cross] = mid_lat
        parts_ids.append(mid_ids)
        parts_w.append(mid_w)
        if router.nic_bps is not None:  # every flow leaving its L1 switch crosses two NICs
            out, into = router.nic_arrays()
            parts_ids += [out[s_dev[cross]], into[d_dev[cross]]]
            parts_w += [wsum[cross], wsum[cross]]
    hops = first + down_lat[d_dev]
    ids = np.concatenate(parts_ids)
    weights = np.concatenate(parts_w)
    keep = (ids >= 0) & (weights > 0)
    return hops, ids[keep], weights[keep]


def _middles(
    router: Router, src: np.ndarray, dst: np.ndarray, wsum: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency incl. the up hop, link ids, weights) of the centre-to-centre route parts."""
    if router.split is not None:
        try:
            return router.split.loads(src, dst, wsum)
        except NotImplementedError:
            pass  # irregular L3 routes: memoised per-pair middles below
    mid_idx = router.middles_for(src, dst)
    flat, start, length, lat = router.middle_arrays()
    entries, inverse = np.unique(mid_idx, return_inverse=True)
    w_mid = np.bincount(inverse, weights=wsum)
    seg_len = length[entries]
    offsets = np.repeat(start[entries] - np.cumsum(seg_len) + seg_len, seg_len)
    return lat[mid_idx], flat[offsets + np.arange(int(seg_len.sum()))], np.repeat(w_mid, seg_len)
