"""Collective algorithms priced on a NoC profile, with memoised routed stage patterns.

Spec: network-model.md §7 (contract, all-reduce candidates and tie order, non-power-of-two rule,
reduce-scatter, all-gather), §8 (pipeline p2p, EP all-to-all), §5 (stage time), §6 (energy);
analytic-model.md §4.7 (how the evaluator calls it). ``nbytes`` (X) is the full tensor per device:
the buffer an all-reduce reduces, the input a reduce-scatter splits, the output an all-gather
assembles. Per-pair payloads are truncated to integers like the reference's uint64 traffic matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from .all_to_all import complete_exchange
from .errors import ProfileError
from .measured import MeasuredTable
from .placement import ParallelScheme, check_dim, groups
from .profile import NocProfile, load_noc_profile
from .routing import Router
from .stage import StageCost, StagePattern

ALL_REDUCE_ALGORITHMS = ("recursive_doubling", "ring", "rabenseifner", "double_tree", "all_to_all")
ALL_GATHER_ALGORITHMS = ("ring", "recursive_doubling", "all_to_all")
# micro-batch tokens at or above which the EP all-to-all uses the uniform closed form (§8.2)
EP_ESTIMATE_TOKENS = 8192


@dataclass(frozen=True)
class AlgorithmCost:
    """Cost of one candidate algorithm: seconds (hop, link, total) and NoC energy in pJ."""

    hop_seconds: float
    link_seconds: float
    seconds: float
    noc_energy_pj: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the golden ``candidates`` entry shape)."""
        return {
            "hop_seconds": self.hop_seconds,
            "link_seconds": self.link_seconds,
            "seconds": self.seconds,
            "noc_energy_pj": self.noc_energy_pj,
        }


@dataclass(frozen=True)
class CollectiveCost:
    """Result of one collective: the chosen algorithm's hop/link/total seconds and energy (pJ).

    ``candidates`` maps every evaluated algorithm to its :class:`AlgorithmCost` (``None`` where an
    algorithm needs a power-of-two group); ``busiest_link`` names the bottleneck link.
    ``noc_energy_pj`` is ``None`` when the profile has no energy coefficients. ``warnings``
    reports traffic that landed on links the profile does not model (not timed, §4.1).
    """

    hop_seconds: float
    link_seconds: float
    seconds: float
    algorithm: str | None
    noc_energy_pj: float | None
    candidates: dict[str, AlgorithmCost | None] = field(default_factory=dict)
    busiest_link: str | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form: chosen cost plus every candidate's cost."""
        return {
            "algorithm": self.algorithm,
            "hop_seconds": self.hop_seconds,
            "link_seconds": self.link_seconds,
            "seconds": self.seconds,
            "noc_energy_pj": self.noc_energy_pj,
            "busiest_link": self.busiest_link,
            "warnings": list(self.warnings),
            "candidates": {
                k: (None if v is None else v.to_dict()) for k, v in self.candidates.items()
            },
        }


@dataclass(frozen=True)
class BoundaryCost:
    """One pipeline boundary ``from_stage → from_stage+1``."""

    from_stage: int
    hop_seconds: float
    link_seconds: float
    seconds: float
    noc_energy_pj: float | None


@dataclass(frozen=True)
class PipelineCost(CollectiveCost):
    """Pipeline point-to-point: the slowest boundary's cost plus every boundary (§8.1).

    ``noc_energy_pj`` and ``noc_energy_pj_all_boundaries`` both hold the traffic of all pp−1
    boundaries.
    """

    noc_energy_pj_all_boundaries: float | None = None
    boundaries: tuple[BoundaryCost, ...] = ()


def _measured_cost(modelled: CollectiveCost, seconds: float, floor: float) -> CollectiveCost:
    """A measured all-reduce time in place of the modelled one: ``hop_seconds`` is the table's
    latency floor (its smallest size), ``link_seconds`` the rest; energy and the modelled
    candidates stay as the links price them."""
    hop = min(floor, seconds)
    return replace(
        modelled,
        hop_seconds=hop,
        link_seconds=seconds - hop,
        seconds=seconds,
        algorithm="measured",
    )


def _is_pow2(g: int) -> bool:
    return g > 0 and g & (g - 1) == 0


@dataclass
class _Candidate:
    """Stages (pattern, payload function) and a multiplier applied to the summed stage costs."""

    stages: list[tuple[StagePattern, Callable[[int], int]]]
    repeat: int = 1


class Network:
    """Prices collectives on one NoC profile; routes each (scheme, dim, algorithm) pattern once.

    ``paper_compat`` selects the paper-era all-switch link identity (network-model §4.3).
    """

    def __init__(self, profile: NocProfile | str | dict, paper_compat: bool = False) -> None:
        self.profile = load_noc_profile(profile)
        self.router = Router(self.profile, paper_compat=paper_compat)
        self._patterns: dict[tuple, StagePattern] = {}
        self._groups: dict[tuple, tuple[np.ndarray, tuple]] = {}
        self._layouts: dict[tuple, int] = {}
        self._has_energy = self.profile.energy is not None

    # ------------------------------------------------------------------ patterns
    def _check(self, scheme: ParallelScheme) -> None:
        if scheme.world_size != self.profile.num_devices:
            raise ProfileError(
                "scheme",
                f"the scheme uses {scheme.world_size} devices but NoC profile "
                f"{self.profile.name!r} has {self.profile.num_devices}",
            )

    def _group_key(self, scheme: ParallelScheme, dim: str) -> tuple[np.ndarray, tuple]:
        """Rank groups of ``dim`` and the memo key they give a pattern: keyed by the device groups
        themselves, so schemes that place a dimension's groups on the same devices (e.g. tp=8
        beside dp=4 or beside pp=4) share the routed pattern."""
        gkey = (scheme.sizes(), dim)
        hit = self._groups.get(gkey)
        if hit is None:
            g = groups(scheme, dim)
            # equal layouts get one small id, so pattern keys never compare the device lists
            gid = self._layouts.setdefault((g.shape, g.tobytes()), len(self._layouts))
            hit = self._groups[gkey] = (g, (g.shape, gid))
        return hit

    def _pairs(
        self, scheme: ParallelScheme, dim: str, name: str, build: Callable[[], object]
    ) -> StagePattern:
        """Pattern of position pairs ``(weight, i, j)`` (from ``build()``, called on a memo miss)
        replicated in every group of ``dim``."""
        g, gk = self._group_key(scheme, dim)
        key = (*gk, name)
        pat = self._patterns.get(key)
        if pat is None:
            arr = np.asarray(build(), dtype=np.int64).reshape(-1, 3)
            src = g[:, arr[:, 1]]
            dst = g[:, arr[:, 2]]
            w = np.broadcast_to(arr[:, 0], src.shape)
            pat = StagePattern(self.router, src, dst, w)
            self._patterns[key] = pat
        return pat

    def _xor_stage(self, scheme: ParallelScheme, dim: str, g: int, k: int) -> StagePattern:
        return self._pairs(scheme, dim, f"xor{k}", lambda: [(1, i, i ^ (1 << k)) for i in range(g)])

    def _ring_stage(self, scheme: ParallelScheme, dim: str, g: int) -> StagePattern:
        return self._pairs(scheme, dim, "ring", lambda: [(1, i, (i + 1) % g) for i in range(g)])

    def _a2a_stage(self, scheme: ParallelScheme, dim: str, g: int) -> StagePattern:
        if self.router.inner_switch:  # never lists all g² pairs at once (all_to_all.py)
            g_arr, key = self._group_key(scheme, dim)
            key = (*key, "all_to_all")
            pat = self._patterns.get(key)
            if pat is None:
                pat = self._patterns[key] = complete_exchange(self.router, g_arr)
            return pat

        def build() -> np.ndarray:
            i, j = np.nonzero(~np.eye(g, dtype=bool))
            return np.stack([np.ones_like(i), i, j], axis=1)

        return self._pairs(scheme, dim, "all_to_all", build)

    def _tree_stages(self, scheme: ParallelScheme, dim: str, g: int) -> list[StagePattern]:
        levels = _double_tree_levels(g)
        up = [
            self._pairs(scheme, dim, f"tree_up{i}", lambda lvl=lvl: [(1, s, d) for s, d in lvl])
            for i, lvl in enumerate(levels)
        ]
        down = [
            self._pairs(scheme, dim, f"tree_down{i}", lambda i=i: [(1, d, s) for s, d in levels[i]])
            for i in range(len(levels) - 1, -1, -1)
        ]
        return up + down

    # ------------------------------------------------------------------ evaluation
    def _zero(self) -> CollectiveCost:
        return CollectiveCost(0.0, 0.0, 0.0, None, 0.0 if self._has_energy else None, {}, None)

    def _run(self, cand: _Candidate, nbytes: int) -> tuple[AlgorithmCost, int | None, float]:
        hop = link = energy = 0.0
        busiest: int | None = None
        worst = -1.0
        for pattern, payload in cand.stages:
            c: StageCost = pattern.cost(payload(nbytes))
            hop += c.hop_seconds
            link += c.link_seconds
            energy += c.energy_pj
            if c.busiest_link is not None and c.link_seconds > worst:
                worst, busiest = c.link_seconds, c.busiest_link
        hop *= cand.repeat
        link *= cand.repeat
        energy *= cand.repeat
        return (
            AlgorithmCost(hop, link, hop + link, energy if self._has_energy else None),
            busiest,
            worst,
        )

    def _select(
        self, cands: dict[str, _Candidate | None], nbytes: int, allowed: tuple[str, ...]
    ) -> CollectiveCost:
        results: dict[str, AlgorithmCost | None] = {}
        links: dict[str, int | None] = {}
        best: str | None = None
        for name, cand in cands.items():
            if cand is None:
                results[name] = None
                continue
            cost, busiest, _ = self._run(cand, nbytes)
            results[name] = cost
            links[name] = busiest
            if name in allowed and (best is None or cost.seconds < results[best].seconds):
                best = name
        chosen = results[best]
        link_id = links[best]
        lost = max(p.unmodelled for p, _ in cands[best].stages) if cands[best].stages else 0
        warnings = (
            (
                f"{lost} loaded link(s) are not modelled by NoC profile {self.profile.name!r} "
                "(capacity 0): their traffic is not timed (network-model §4.1)",
            )
            if lost
            else ()
        )
        return CollectiveCost(
            chosen.hop_seconds,
            chosen.link_seconds,
            chosen.seconds,
            best,
            chosen.noc_energy_pj,
            results,
            None if link_id is None else self.router.describe_link(link_id),
            warnings,
        )

    def _prepare(self, scheme: ParallelScheme, dim: str, nbytes: int) -> tuple[str, int, int]:
        dim = check_dim(dim)
        self._check(scheme)
        if isinstance(nbytes, bool) or not isinstance(nbytes, int | np.integer | float):
            raise ProfileError("nbytes", "nbytes must be a number of bytes")
        return dim, scheme.size(dim), int(nbytes)

    # ------------------------------------------------------------------ public API
    def all_reduce(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """All-reduce of ``nbytes`` per device over every group of ``dim`` (§7.2, §7.3).

        Candidates in tie order: recursive doubling, ring, Rabenseifner, double binary tree,
        one-shot all-to-all; the cheapest wins (first on ties). A group that is not a power of two
        uses the ring algorithm (the one-shot cost is still reported as a candidate).
        """
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return self._zero()
        pow2 = _is_pow2(g)
        logg = int(math.log2(g)) if pow2 else 0
        cands: dict[str, _Candidate | None] = {
            "recursive_doubling": _Candidate(
                [(self._xor_stage(scheme, dim, g, k), _full) for k in range(logg)]
            )
            if pow2
            else None,
            "ring": _Candidate([(self._ring_stage(scheme, dim, g), _div(g))], 2 * (g - 1)),
            "rabenseifner": _Candidate(
                [(self._xor_stage(scheme, dim, g, k), _div(1 << (k + 1))) for k in range(logg)],
                2,
            )
            if pow2
            else None,
            "double_tree": _Candidate([(p, _div(2)) for p in self._tree_stages(scheme, dim, g)])
            if pow2
            else None,
            "all_to_all": _Candidate([(self._a2a_stage(scheme, dim, g), _full)]),
        }
        allowed = ALL_REDUCE_ALGORITHMS if pow2 else ("ring",)
        modelled = self._select(cands, x, allowed)
        table = self._measured_table(scheme, dim, g)
        if table is None:
            return modelled
        return _measured_cost(modelled, table.seconds_at(x), table.seconds[0])

    def _measured_table(self, scheme: ParallelScheme, dim: str, g: int) -> MeasuredTable | None:
        """The profile's measured all-reduce table for groups of ``dim``: when ``g`` was measured
        and every group lies inside one L1 switch (the fabric it was measured on)."""
        measured = self.profile.measured_allreduce
        table = None if measured is None else measured.table(g)
        if table is None:
            return None
        ranks, _ = self._group_key(scheme, dim)
        per_l1 = self.profile.levels[2].size
        switch = ranks // per_l1
        return table if bool(np.all(switch == switch[:, :1])) else None

    def all_gather(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """All-gather assembling ``nbytes`` per device (each rank owns ``nbytes/g``), §7.4.

        Candidates in tie order: ring, recursive doubling (power-of-two groups only), direct.
        """
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return self._zero()
        pow2 = _is_pow2(g)
        logg = int(math.log2(g)) if pow2 else 0
        cands: dict[str, _Candidate | None] = {
            "ring": _Candidate([(self._ring_stage(scheme, dim, g), _div(g))], g - 1),
            "recursive_doubling": _Candidate(
                [(self._xor_stage(scheme, dim, g, k), _div_mul(g, 1 << k)) for k in range(logg)]
            )
            if pow2
            else None,
            "all_to_all": _Candidate([(self._a2a_stage(scheme, dim, g), _div(g))]),
        }
        return self._select(cands, x, ALL_GATHER_ALGORITHMS)

    def reduce_scatter(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """Reduce-scatter of an ``nbytes`` input per device (§7.4): recursive halving (the first
        half of Rabenseifner) for power-of-two groups; otherwise the ring ((g−1) stages of X/g)."""
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return self._zero()
        if _is_pow2(g):
            logg = int(math.log2(g))
            cand = _Candidate(
                [(self._xor_stage(scheme, dim, g, k), _div(1 << (k + 1))) for k in range(logg)]
            )
            return self._select({"recursive_halving": cand}, x, ("recursive_halving",))
        cand = _Candidate([(self._ring_stage(scheme, dim, g), _div(g))], g - 1)
        return self._select({"ring": cand}, x, ("ring",))

    def all_to_all(self, scheme: ParallelScheme, dim: str, bytes_per_pair: int) -> CollectiveCost:
        """One-stage complete exchange: every ordered pair of every ``dim`` group sends
        ``bytes_per_pair`` (the uniform EP all-to-all shape of §8.2)."""
        dim, g, x = self._prepare(scheme, dim, bytes_per_pair)
        if g <= 1 or x <= 0:
            return self._zero()
        cand = _Candidate([(self._a2a_stage(scheme, dim, g), _full)])
        return self._select({"all_to_all": cand}, x, ("all_to_all",))

    def pipeline_p2p(self, scheme: ParallelScheme, nbytes: int) -> PipelineCost:
        """Every rank of stage i sends ``nbytes`` to its counterpart in stage i+1; each boundary is
        routed separately; the result is the slowest boundary (first on ties), §8.1."""
        _, pp, x = self._prepare(scheme, "pp", nbytes)
        zero_e = 0.0 if self._has_energy else None
        if pp <= 1 or x <= 0:
            return PipelineCost(
                0.0, 0.0, 0.0, None, zero_e, {}, None, noc_energy_pj_all_boundaries=zero_e
            )
        bounds: list[BoundaryCost] = []
        best: tuple[float, int, int | None] | None = None
        total_e = 0.0
        for i in range(pp - 1):
            pat = self._pairs(scheme, "pp", f"p2p{i}", lambda i=i: [(1, i, i + 1)])
            c = pat.cost(x)
            secs = c.hop_seconds + c.link_seconds
            total_e += c.energy_pj
            bounds.append(
                BoundaryCost(
                    i,
                    c.hop_seconds,
                    c.link_seconds,
                    secs,
                    c.energy_pj if self._has_energy else None,
                )
            )
            if best is None or secs > best[0]:
                best = (secs, i, c.busiest_link)
        slow = bounds[best[1]]
        energy = total_e if self._has_energy else None
        return PipelineCost(
            slow.hop_seconds,
            slow.link_seconds,
            slow.seconds,
            "p2p",
            energy,
            {},
            None if best[2] is None else self.router.describe_link(best[2]),
            noc_energy_pj_all_boundaries=energy,
            boundaries=tuple(bounds),
        )

    def ep_all_to_all(
        self,
        scheme: ParallelScheme,
        *,
        bytes_per_token: int,
        num_experts: int,
        top_k: int,
        micro_batch: int,
        seq: int,
        imbalance: float = 1.0,
        rows: np.ndarray | None = None,
    ) -> CollectiveCost:
        """EP token dispatch (combine costs the same), network-model §8.2.

        ``micro_batch·seq ≥ 8192``: uniform closed form, every ordered pair of every EP group sends
        ``ceil(bs·seq/(dp·sp·ep))·top_k/ep·bytes_per_token·imbalance`` bytes (truncated). Below:
        routed from ``rows`` ([tokens, ≥top_k] expert ids; default the balanced rows), EP group n
        uses token window ``n mod (dp·sp)``, each token sends one copy per distinct remote rank
        ``floor(e·ep/num_experts)``. ``ep == 1`` costs nothing.
        """
        self._check(scheme)
        ep = scheme.ep
        if ep <= 1 or bytes_per_token <= 0 or micro_batch * seq <= 0:
            return self._zero()
        total = micro_batch * seq
        if total >= EP_ESTIMATE_TOKENS:
            per_pair = (
                math.ceil(micro_batch * seq / scheme.dp / scheme.sp / ep)
                * top_k
                / ep
                * bytes_per_token
                * imbalance
            )
            cand = _Candidate([(self._a2a_stage(scheme, "ep", ep), lambda _x: int(per_pair))])
            return self._select({"all_to_all": cand}, 1, ("all_to_all",))
        if rows is None:
            from .moe import balanced_rows

            rows = balanced_rows(total, num_experts, top_k)
        rows = np.asarray(rows)
        if rows.ndim < 2:
            raise ProfileError("rows", "routing rows must be a 2-D array [tokens, top_k]")
        rows = rows.reshape(-1, rows.shape[-1])
        if rows.shape[0] < total:
            raise ProfileError(
                "rows", f"routing rows hold {rows.shape[0]} tokens; micro_batch·seq = {total}"
            )
        active = np.ascontiguousarray(rows[:total, :top_k], dtype=np.int64)
        key = (
            scheme.sizes(),
            "ep_routed",
            num_experts,
            top_k,
            total,
            hash(active.tobytes()),
        )
        pat = self._patterns.get(key)
        if pat is None:
            pat = _routed_pattern(self.router, scheme, active, num_experts)
            self._patterns[key] = pat
        cand = _Candidate([(pat, lambda _x: int(bytes_per_token))])
        return self._select({"routed": cand}, 1, ("routed",))

    # ------------------------------------------------------------------ introspection
    def cache_info(self) -> dict[str, int]:
        """Sizes of the memo: patterns, routed pairs, interned links and pattern array bytes."""
        return {
            "patterns": len(self._patterns),
            "routes": self.router.cached_routes,
            "links": len(self.router.link_keys),
            "pattern_bytes": sum(p.nbytes for p in self._patterns.values()),
        }


def _full(x: int) -> int:
    return x


def _div(g: int) -> Callable[[int], int]:
    return lambda x: int(float(x) / g)


def _div_mul(g: int, m: int) -> Callable[[int], int]:
    return lambda x: int(float(x) / g * m)


@lru_cache(maxsize=64)
def _double_tree_levels(g: int) -> list[list[tuple[int, int]]]:
    """Up-sweep levels of tree A (even leaves, root g−1) merged with tree B (odd leaves, root 0):
    parent = (left + right) // 2 per level, then a last hop to the root (§7.2)."""

    def build(first: int, root: int) -> list[list[tuple[int, int]]]:
        nodes = list(range(first, g, 2))
        levels: list[list[tuple[int, int]]] = []
        while len(nodes) >= 2:
            pairs, nxt = [], []
            for j in range(0, len(nodes), 2):
                left, right = nodes[j], nodes[j + 1]
                parent = (left + right) // 2
                pairs += [(left, parent), (right, parent)]
                nxt.append(parent)
            levels.append(pairs)
            nodes = nxt
        if len(nodes) == 1:
            levels.append([(nodes[0], root)])
        return levels

    a, b = build(0, g - 1), build(1, 0)
    return [a[i] + b[i] for i in range(len(a))]


def _routed_pattern(
    router: Router, scheme: ParallelScheme, active: np.ndarray, num_experts: int
) -> StagePattern:
    """Token counts per (src, dst) EP rank from routing rows (network-model §8.2)."""
    ep = scheme.ep
    total = active.shape[0]
    slots = scheme.dp * scheme.sp
    window = math.ceil(total / slots)
    dst_rank = np.clip((active * ep) // num_experts, 0, ep - 1)
    per_slot: list[np.ndarray | None] = []
    for slot in range(slots):
        start, end = slot * window, min(slot * window + window, total)
        if start >= end:
            per_slot.append(None)
            continue
        local = dst_rank[start:end]
        n = local.shape[0]
        mask = np.zeros((n, ep), dtype=bool)
        mask[np.repeat(np.arange(n), local.shape[1]), local.ravel()] = True
        base, rem = divmod(n, ep)
        owner = np.repeat(np.arange(ep), [base + (1 if s < rem else 0) for s in range(ep)])
        counts = np.zeros((ep, ep), dtype=np.int64)
        np.add.at(counts, owner, mask.astype(np.int64))
        np.fill_diagonal(counts, 0)
        per_slot.append(counts)
    g = groups(scheme, "ep")
    src_l, dst_l, w_l = [], [], []
    ii, jj = np.meshgrid(np.arange(ep), np.arange(ep), indexing="ij")
    for gi in range(g.shape[0]):
        counts = per_slot[gi % slots]
        if counts is None:
            continue
        src_l.append(g[gi][ii].ravel())
        dst_l.append(g[gi][jj].ravel())
        w_l.append(counts.ravel())
    if not src_l:
        return StagePattern(router, np.zeros(0), np.zeros(0), np.zeros(0))
    return StagePattern(router, np.concatenate(src_l), np.concatenate(dst_l), np.concatenate(w_l))
