"""The network back-end contract of the evaluator and its registry (ASTRA-sim's idea: the
network model behind the collectives is swappable).

The evaluator asks a network two things (``estimate.comm``): the seconds and energy of a
collective over the device groups of one dimension of a plan (``price``), and of the MoE
token dispatch (``ep_all_to_all``). ``deepstack.Network`` (routed collectives on a NoC
profile) is the registered default, ``deepstack``; another back-end registers a factory from a
``NocProfile`` and is chosen by name (``Evaluator(..., network=name)``). An unknown name is
refused naming ``network``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
from deepstack import Network, NocProfile, ParallelScheme

from plena_opt.errors import PlenaInputError

DEFAULT_NETWORK = "deepstack"


class CollectiveResult(Protocol):
    """One collective's price: seconds and NoC energy (pJ; None without an energy model)."""

    seconds: float
    noc_energy_pj: float | None


@runtime_checkable
class NetworkBackend(Protocol):
    """What the evaluator asks of a network model (``deepstack.Network`` implements it)."""

    def price(
        self, op: str, scheme: ParallelScheme, dim: str, nbytes: int
    ) -> tuple[float, float | None]:
        """(seconds, NoC energy pJ) of ``op`` (``all_reduce``, ``all_gather``,
        ``reduce_scatter``, ``all_to_all``) over the ``dim`` groups of ``scheme`` with
        ``nbytes`` per device; ``op="p2p"``: the slowest pipeline-stage boundary and the
        energy of all boundaries."""

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
    ) -> CollectiveResult:
        """The MoE token dispatch over the EP groups (``rows``: routed expert ids per token,
        None: the uniform closed form; ``distinct_ranks``: that form sends one copy per
        distinct destination rank, not network-model §8.2's top-k/ep per rank)."""


NetworkFactory = Callable[[NocProfile], NetworkBackend]
_BACKENDS: dict[str, NetworkFactory] = {DEFAULT_NETWORK: Network}


def register_network(name: str, factory: NetworkFactory) -> None:
    """Make ``factory`` (a NoC profile → a ``NetworkBackend``) the back-end named ``name``."""
    _BACKENDS[name] = factory


def network_factory(name: str) -> NetworkFactory:
    """The factory of the back-end ``name``; an unknown one is refused naming ``network``."""
    factory = _BACKENDS.get(name)
    if factory is None:
        known = ", ".join(sorted(_BACKENDS))
        raise PlenaInputError("network", f"no network back-end {name!r} (known: {known})")
    return factory
