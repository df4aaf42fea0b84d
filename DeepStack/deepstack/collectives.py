"""Collective algorithms priced on a NoC profile, with memoised routed stage patterns.

Spec: network-model.md §7 (contract, all-reduce candidates and tie order, non-power-of-two rule,
reduce-scatter, all-gather), §8 (pipeline p2p, EP all-to-all), §5 (stage time), §6 (energy);
analytic-model.md §4.7 (how the evaluator calls it). ``nbytes`` (X) is the full tensor per device:
the buffer an all-reduce reduces, the input a reduce-scatter splits, the output an all-gather
assembles. Per-pair payloads are truncated to integers like the reference's uint64 traffic matrix.

A GPU node profile's measured tables (``deepstack.measured``, ``deepstack.measured_ops``) price
the all-reduce, all-gather, reduce-scatter, all-to-all and EP all-to-all (uniform and routed) of
groups they match; every other group keeps the links.

The result types live in :mod:`deepstack.collective_costs`, the stage patterns in
:mod:`deepstack.stage_patterns`, the routed EP dispatch in :mod:`deepstack.ep_dispatch`; they are
re-exported here.
"""

from __future__ import annotations

import math

import numpy as np

from .collective_costs import (
    AlgorithmCost,
    BoundaryCost,
    CollectiveCost,
    PipelineCost,
    measured_cost,
)
from .ep_dispatch import EP_ESTIMATE_TOKENS, active_rows, routed_pattern, uniform_bytes_per_pair
from .errors import ProfileError
from .measured import MeasuredTable
from .placement import ParallelScheme, check_dim
from .profile import NocProfile, load_noc_profile
from .routing import Router
from .stage import StageCost
from .stage_patterns import Candidate, StagePatterns, div, div_mul, full, is_pow2

__all__ = [
    "ALL_GATHER_ALGORITHMS",
    "ALL_REDUCE_ALGORITHMS",
    "EP_ESTIMATE_TOKENS",
    "AlgorithmCost",
    "BoundaryCost",
    "CollectiveCost",
    "Network",
    "PipelineCost",
]

ALL_REDUCE_ALGORITHMS = ("recursive_doubling", "ring", "rabenseifner", "double_tree", "all_to_all")
ALL_GATHER_ALGORITHMS = ("ring", "recursive_doubling", "all_to_all")


class Network:
    """Prices collectives on one NoC profile; routes each (scheme, dim, algorithm) pattern once.

    ``paper_compat`` selects the paper-era all-switch link identity (network-model §4.3).
    """

    def __init__(self, profile: NocProfile | str | dict, paper_compat: bool = False) -> None:
        self.profile = load_noc_profile(profile)
        self.router = Router(self.profile, paper_compat=paper_compat)
        self._stages = StagePatterns(self.router)
        self._patterns = self._stages.memo
        self._routed_busiest: dict[tuple, int] = {}  # routed EP key -> busiest rank's copies
        self._has_energy = self.profile.energy is not None

    # ------------------------------------------------------------------ evaluation
    def _check(self, scheme: ParallelScheme) -> None:
        if scheme.world_size != self.profile.num_devices:
            raise ProfileError(
                "scheme",
                f"the scheme uses {scheme.world_size} devices but NoC profile "
                f"{self.profile.name!r} has {self.profile.num_devices}",
            )

    def _zero(self) -> CollectiveCost:
        return CollectiveCost(0.0, 0.0, 0.0, None, 0.0 if self._has_energy else None, {}, None)

    def _run(self, cand: Candidate, nbytes: int) -> tuple[AlgorithmCost, int | None, float]:
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
        self, cands: dict[str, Candidate | None], nbytes: int, allowed: tuple[str, ...]
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
        st = self._stages
        pow2 = is_pow2(g)
        logg = int(math.log2(g)) if pow2 else 0
        cands: dict[str, Candidate | None] = {
            "recursive_doubling": Candidate(
                [(st.xor_stage(scheme, dim, g, k), full) for k in range(logg)]
            )
            if pow2
            else None,
            "ring": Candidate([(st.ring_stage(scheme, dim, g), div(g))], 2 * (g - 1)),
            "rabenseifner": Candidate(
                [(st.xor_stage(scheme, dim, g, k), div(1 << (k + 1))) for k in range(logg)],
                2,
            )
            if pow2
            else None,
            "double_tree": Candidate([(p, div(2)) for p in st.tree_stages(scheme, dim, g)])
            if pow2
            else None,
            "all_to_all": Candidate([(st.a2a_stage(scheme, dim, g), full)]),
        }
        allowed = ALL_REDUCE_ALGORITHMS if pow2 else ("ring",)
        modelled = self._select(cands, x, allowed)
        return self._or_measured(modelled, scheme, dim, g, "all_reduce", x)

    def _measured_table(
        self, scheme: ParallelScheme, dim: str, g: int, op: str = "all_reduce"
    ) -> MeasuredTable | None:
        """The profile's measured ``op`` table for groups of ``dim``: when ``g`` was measured and
        every group lies inside one L1 switch (the fabric it was measured on)."""
        if op == "all_reduce":
            measured = self.profile.measured_allreduce
            table = None if measured is None else measured.table(g)
        else:
            ops = self.profile.measured_collectives
            table = None if ops is None else ops.table(op, g)
        if table is None:
            return None
        ranks, _ = self._stages.group_key(scheme, dim)
        per_l1 = self.profile.levels[2].size
        switch = ranks // per_l1
        return table if bool(np.all(switch == switch[:, :1])) else None

    def _or_measured(
        self, modelled: CollectiveCost, scheme: ParallelScheme, dim: str, g: int, op: str, x: float
    ) -> CollectiveCost:
        """``modelled``, or the measured ``op`` time at ``x`` bytes per device when tabulated."""
        table = self._measured_table(scheme, dim, g, op)
        if table is None:
            return modelled
        return measured_cost(modelled, table.seconds_at(x), table.seconds[0])

    def all_gather(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """All-gather assembling ``nbytes`` per device (each rank owns ``nbytes/g``), §7.4.

        Candidates in tie order: ring, recursive doubling (power-of-two groups only), direct.
        """
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return self._zero()
        st = self._stages
        pow2 = is_pow2(g)
        logg = int(math.log2(g)) if pow2 else 0
        cands: dict[str, Candidate | None] = {
            "ring": Candidate([(st.ring_stage(scheme, dim, g), div(g))], g - 1),
            "recursive_doubling": Candidate(
                [(st.xor_stage(scheme, dim, g, k), div_mul(g, 1 << k)) for k in range(logg)]
            )
            if pow2
            else None,
            "all_to_all": Candidate([(st.a2a_stage(scheme, dim, g), div(g))]),
        }
        modelled = self._select(cands, x, ALL_GATHER_ALGORITHMS)
        return self._or_measured(modelled, scheme, dim, g, "all_gather", x)

    def reduce_scatter(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """Reduce-scatter of an ``nbytes`` input per device (§7.4): recursive halving (the first
        half of Rabenseifner) for power-of-two groups; otherwise the ring ((g−1) stages of X/g)."""
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return self._zero()
        if is_pow2(g):
            logg = int(math.log2(g))
            cand = Candidate(
                [
                    (self._stages.xor_stage(scheme, dim, g, k), div(1 << (k + 1)))
                    for k in range(logg)
                ]
            )
            modelled = self._select({"recursive_halving": cand}, x, ("recursive_halving",))
        else:
            cand = Candidate([(self._stages.ring_stage(scheme, dim, g), div(g))], g - 1)
            modelled = self._select({"ring": cand}, x, ("ring",))
        return self._or_measured(modelled, scheme, dim, g, "reduce_scatter", x)

    def all_to_all(self, scheme: ParallelScheme, dim: str, bytes_per_pair: int) -> CollectiveCost:
        """One-stage complete exchange: every ordered pair of every ``dim`` group sends
        ``bytes_per_pair`` (the uniform EP all-to-all shape of §8.2)."""
        dim, g, x = self._prepare(scheme, dim, bytes_per_pair)
        if g <= 1 or x <= 0:
            return self._zero()
        cand = Candidate([(self._stages.a2a_stage(scheme, dim, g), full)])
        modelled = self._select({"all_to_all": cand}, x, ("all_to_all",))
        return self._or_measured(modelled, scheme, dim, g, "all_to_all", x * g)

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
            pat = self._stages.pairs(scheme, "pp", f"p2p{i}", lambda i=i: [(1, i, i + 1)])
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

        Where the profile measured the all-to-all of these groups (``_or_measured``: a tabulated
        group size, every group inside one L1 switch), both branches take the measured time. The
        uniform one at its send buffer ``per_pair·ep``; the routed one at the uniform size that
        puts the busiest rank's bytes on its links: an all-to-all ends when its largest rank does,
        and a uniform one of nccl-tests size S moves S·(ep−1)/ep off each rank (its own chunk
        stays), so V remote bytes sent or received by the busiest rank price as S = V·ep/(ep−1)
        (equal to the uniform branch's size for balanced rows).
        """
        self._check(scheme)
        ep = scheme.ep
        if ep <= 1 or bytes_per_token <= 0 or micro_batch * seq <= 0:
            return self._zero()
        total = micro_batch * seq
        if total >= EP_ESTIMATE_TOKENS:
            per_pair = uniform_bytes_per_pair(
                scheme, micro_batch, seq, top_k, bytes_per_token, imbalance
            )
            cand = Candidate([(self._stages.a2a_stage(scheme, "ep", ep), lambda _x: per_pair)])
            modelled = self._select({"all_to_all": cand}, 1, ("all_to_all",))
            if per_pair <= 0:
                return modelled
            return self._or_measured(modelled, scheme, "ep", ep, "all_to_all", per_pair * ep)
        active = active_rows(rows, total, num_experts, top_k)
        key = (scheme.sizes(), "ep_routed", num_experts, top_k, total, hash(active.tobytes()))
        pat = self._patterns.get(key)
        if pat is None:
            pat, self._routed_busiest[key] = routed_pattern(
                self.router, scheme, active, num_experts
            )
            self._patterns[key] = pat
        cand = Candidate([(pat, lambda _x: int(bytes_per_token))])
        modelled = self._select({"routed": cand}, 1, ("routed",))
        busiest = self._routed_busiest[key] * int(bytes_per_token)
        if busiest <= 0:
            return modelled
        return self._or_measured(modelled, scheme, "ep", ep, "all_to_all", busiest * ep / (ep - 1))

    # ------------------------------------------------------------------ introspection
    def cache_info(self) -> dict[str, int]:
        """Sizes of the memo: patterns, routed pairs, interned links and pattern array bytes."""
        return {
            "patterns": len(self._patterns),
            "routes": self.router.cached_routes,
            "links": len(self.router.link_keys),
            "pattern_bytes": sum(p.nbytes for p in self._patterns.values()),
        }
