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

from dataclasses import replace

import numpy as np

from .algorithms import (
    ALL_GATHER_ALGORITHMS,
    ALL_REDUCE_ALGORITHMS,
    BUILDERS,
    Algorithm,
    AlgorithmSet,
    price,
)
from .collective_costs import (
    AlgorithmCost,
    BoundaryCost,
    CollectiveCost,
    PipelineCost,
    measured_cost,
)
from .ep_dispatch import (
    EP_ESTIMATE_TOKENS,
    active_rows,
    distinct_bytes_per_pair,
    routed_content,
    routed_pattern,
    uniform_bytes_per_pair,
)
from .errors import ProfileError
from .measured import MeasuredTable
from .placement import ParallelScheme, check_dim
from .profile import NocProfile
from .profile_load import load_noc_profile
from .routing import Router
from .stage_patterns import StagePatterns

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
        # (id of read-only rows, tokens, experts, top-k) -> (those rows, their content key)
        self._row_keys: dict[tuple, tuple[np.ndarray, tuple[str, int]]] = {}
        self._sets: dict[tuple, AlgorithmSet] = {}  # (op, scheme sizes, dim) -> candidates
        self._p2p: dict[tuple, tuple] = {}  # scheme sizes -> boundary patterns
        self._num_devices = self.profile.num_devices
        self._has_energy = self.profile.energy is not None

    # ------------------------------------------------------------------ evaluation
    def _check(self, scheme: ParallelScheme) -> None:
        if scheme.world_size != self._num_devices:
            raise ProfileError(
                "scheme",
                f"the scheme uses {scheme.world_size} devices but NoC profile "
                f"{self.profile.name!r} has {self.profile.num_devices}",
            )

    def _zero(self) -> CollectiveCost:
        return CollectiveCost(0.0, 0.0, 0.0, None, 0.0 if self._has_energy else None, {}, None)

    def _algorithms(self, op: str, scheme: ParallelScheme, dim: str, g: int) -> AlgorithmSet:
        """The candidates of ``op`` over the ``dim`` groups of ``scheme`` (assembled once: their
        patterns are routed on first use, in the reference's order), with the measured table
        that prices those groups, if any."""
        key = (op, scheme.sizes(), dim)
        algs = self._sets.get(key)
        if algs is None:
            algs = BUILDERS[op](self._stages, scheme, dim, g)
            algs = replace(algs, measured=self._measured_table(scheme, dim, g, op))
            self._sets[key] = algs
        return algs

    def _select(self, algs: AlgorithmSet, nbytes: int) -> CollectiveCost:
        """Every candidate priced at ``nbytes``; the cheapest allowed one wins (first on ties)."""
        results: dict[str, AlgorithmCost | None] = {}
        best: Algorithm | None = None
        best_s = 0.0
        link_id: int | None = None
        energy = self._has_energy
        for name, alg in algs.candidates:
            if alg is None:
                results[name] = None
                continue
            hop, link, e, busiest = price(alg, nbytes)
            secs = hop + link
            results[name] = AlgorithmCost(hop, link, secs, e if energy else None)
            if name in algs.allowed and (best is None or secs < best_s):
                best, best_s, link_id = alg, secs, busiest
        chosen = results[best.name]
        lost = best.unmodelled
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
            best.name,
            chosen.noc_energy_pj,
            results,
            None if link_id is None else self.router.describe_link(link_id),
            warnings,
        )

    def _prepare(self, scheme: ParallelScheme, dim: str, nbytes: int) -> tuple[str, int, int]:
        dim = check_dim(dim)
        self._check(scheme)
        if type(nbytes) is not int and (
            isinstance(nbytes, bool) or not isinstance(nbytes, int | np.integer | float)
        ):
            raise ProfileError("nbytes", "nbytes must be a number of bytes")
        return dim, getattr(scheme, dim), int(nbytes)

    def _collective(self, op: str, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """``op`` of ``nbytes`` per device over every ``dim`` group; a measured table of those
        groups prices it at its nccl-tests size (``nbytes``; the all-to-all's send buffer,
        ``nbytes · g``)."""
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return self._zero()
        algs = self._algorithms(op, scheme, dim, g)
        modelled = self._select(algs, x)
        if algs.measured is None:
            return modelled
        table = algs.measured
        scale = g if op == "all_to_all" else 1
        return measured_cost(modelled, table.seconds_at(x * scale), table.seconds[0])

    # ------------------------------------------------------------------ public API
    def all_reduce(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """All-reduce of ``nbytes`` per device over every group of ``dim`` (§7.2, §7.3).

        Candidates in tie order: recursive doubling, ring, Rabenseifner, double binary tree,
        one-shot all-to-all; the cheapest wins (first on ties). A group that is not a power of two
        uses the ring algorithm (the one-shot cost is still reported as a candidate).
        """
        return self._collective("all_reduce", scheme, dim, nbytes)

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
        return self._collective("all_gather", scheme, dim, nbytes)

    def reduce_scatter(self, scheme: ParallelScheme, dim: str, nbytes: int) -> CollectiveCost:
        """Reduce-scatter of an ``nbytes`` input per device (§7.4): recursive halving (the first
        half of Rabenseifner) for power-of-two groups; otherwise the ring ((g−1) stages of X/g)."""
        return self._collective("reduce_scatter", scheme, dim, nbytes)

    def all_to_all(self, scheme: ParallelScheme, dim: str, bytes_per_pair: int) -> CollectiveCost:
        """One-stage complete exchange: every ordered pair of every ``dim`` group sends
        ``bytes_per_pair`` (the uniform EP all-to-all shape of §8.2)."""
        return self._collective("all_to_all", scheme, dim, bytes_per_pair)

    def _boundaries(
        self, scheme: ParallelScheme, x: int
    ) -> tuple[list[tuple[float, float, float, float, int | None]], int, float]:
        """Every stage boundary's (hop s, link s, seconds, energy pJ, busiest link id) at ``x``
        bytes, the slowest one's index (first on ties) and the energy of them all (pJ)."""
        key = scheme.sizes()
        pats = self._p2p.get(key)
        if pats is None:
            pats = self._p2p[key] = tuple(
                self._stages.pairs(scheme, "pp", f"p2p{i}", lambda i=i: [(1, i, i + 1)])
                for i in range(scheme.pp - 1)
            )
        rows = []
        best = 0
        total_e = 0.0
        for i, pat in enumerate(pats):
            hop, link, e, busiest = pat.parts(x)
            secs = hop + link
            total_e += e
            rows.append((hop, link, secs, e, busiest))
            if secs > rows[best][2]:
                best = i
        return rows, best, total_e

    def pipeline_p2p(self, scheme: ParallelScheme, nbytes: int) -> PipelineCost:
        """Every rank of stage i sends ``nbytes`` to its counterpart in stage i+1; each boundary is
        routed separately; the result is the slowest boundary (first on ties), §8.1."""
        _, pp, x = self._prepare(scheme, "pp", nbytes)
        zero_e = 0.0 if self._has_energy else None
        if pp <= 1 or x <= 0:
            return PipelineCost(
                0.0, 0.0, 0.0, None, zero_e, {}, None, noc_energy_pj_all_boundaries=zero_e
            )
        rows, best, total_e = self._boundaries(scheme, x)
        has_e = self._has_energy
        bounds = tuple(
            BoundaryCost(i, hop, link, secs, e if has_e else None)
            for i, (hop, link, secs, e, _) in enumerate(rows)
        )
        slow = bounds[best]
        link_id = rows[best][4]
        energy = total_e if has_e else None
        return PipelineCost(
            slow.hop_seconds,
            slow.link_seconds,
            slow.seconds,
            "p2p",
            energy,
            {},
            None if link_id is None else self.router.describe_link(link_id),
            noc_energy_pj_all_boundaries=energy,
            boundaries=bounds,
        )

    def price(
        self, op: str, scheme: ParallelScheme, dim: str, nbytes: int
    ) -> tuple[float, float | None]:
        """(seconds, NoC energy pJ) of ``op`` without the report: what ``all_reduce``,
        ``all_gather``, ``reduce_scatter`` or ``all_to_all`` (``op`` by name) give as ``seconds``
        and ``noc_energy_pj``; for ``op="p2p"`` (``dim`` ignored) ``pipeline_p2p``'s slowest
        boundary seconds and the energy of all boundaries. The same arithmetic in the same order
        (equal to the last bit); the candidates that may not win are not priced."""
        has_e = self._has_energy
        if op == "p2p":
            _, pp, x = self._prepare(scheme, "pp", nbytes)
            if pp <= 1 or x <= 0:
                return 0.0, 0.0 if has_e else None
            rows, best, total_e = self._boundaries(scheme, x)
            return rows[best][2], total_e if has_e else None
        if op not in BUILDERS:
            raise ProfileError("op", f"op must be one of {', '.join(BUILDERS)}, p2p (got {op!r})")
        dim, g, x = self._prepare(scheme, dim, nbytes)
        if g <= 1 or x <= 0:
            return 0.0, 0.0 if has_e else None
        algs = self._algorithms(op, scheme, dim, g)
        best_s = best_e = 0.0
        first = True
        for name, alg in algs.candidates:
            if alg is None or name not in algs.allowed:
                continue
            hop, link, e, _ = price(alg, x)
            secs = hop + link
            if first or secs < best_s:
                best_s, best_e, first = secs, e, False
        if algs.measured is not None:
            scale = g if op == "all_to_all" else 1
            best_s = algs.measured.seconds_at(x * scale)
        return best_s, best_e if has_e else None

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
        distinct_ranks: bool = False,
    ) -> CollectiveCost:
        """EP token dispatch (combine costs the same), network-model §8.2.

        ``micro_batch·seq ≥ 8192``: uniform closed form, every ordered pair of every EP group sends
        ``ceil(bs·seq/(dp·sp·ep))·top_k/ep·bytes_per_token·imbalance`` bytes (truncated). Below:
        routed from ``rows`` ([tokens, ≥top_k] expert ids; default the balanced rows), EP group n
        uses token window ``n mod (dp·sp)``, each token sends one copy per distinct remote rank
        ``floor(e·ep/num_experts)``. ``ep == 1`` costs nothing. ``distinct_ranks`` (not §8.2:
        GPU serving pricing): the closed form sends one copy per distinct destination rank
        like the routed branch (``distinct_bytes_per_pair``), so the two meet at the threshold.

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
            if distinct_ranks:
                per_pair = distinct_bytes_per_pair(
                    scheme, micro_batch, seq, num_experts, top_k, bytes_per_token, imbalance
                )
            else:
                per_pair = uniform_bytes_per_pair(
                    scheme, micro_batch, seq, top_k, bytes_per_token, imbalance
                )
            pat = self._stages.a2a_stage(scheme, "ep", ep)
            alg = Algorithm("all_to_all", ((pat, lambda _x: per_pair),))
            modelled = self._select(AlgorithmSet((("all_to_all", alg),), ("all_to_all",)), 1)
            if per_pair <= 0:
                return modelled
            return self._or_measured(modelled, scheme, "ep", ep, "all_to_all", per_pair * ep)
        active, content = routed_content(self._row_keys, rows, total, num_experts, top_k)
        key = (scheme.sizes(), "ep_routed", num_experts, top_k, total, content)
        pat = self._patterns.get(key)
        if pat is None:
            if active is None:
                active = active_rows(rows, total, num_experts, top_k)
            pat, self._routed_busiest[key] = routed_pattern(
                self.router, scheme, active, num_experts
            )
            self._patterns[key] = pat
        alg = Algorithm("routed", ((pat, lambda _x: int(bytes_per_token)),))
        modelled = self._select(AlgorithmSet((("routed", alg),), ("routed",)), 1)
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
