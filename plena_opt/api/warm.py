"""The modules a long-running front end imports once, in one thread, before serving.

The use cases import their libraries on first use (so ``plena-opt --help`` stays fast); two
threads importing the same module for the first time can meet in importlib's module locks
(``_DeadlockError``, seen once in 10,000 fuzzed gRPC requests). A server imports
:data:`MODULES` before its first request (``plena_server.app.preload``), naming only this list.
"""

from __future__ import annotations

import importlib

MODULES = (
    "plena_opt.api",
    "plena_opt.api.catalog",
    "plena_opt.api.estimates",
    "plena_opt.api.network",
    "plena_opt.api.recheck",
    "plena_opt.api.search_io",
    "plena_opt.api.searches",
    "plena_opt.api.simulation_io",
    "plena_opt.api.simulations",
    "plena_opt.api.studies",
    "plena_opt.api.wire",
    "plena_opt.estimate",
    "plena_opt.estimate.evaluator",
    "plena_opt.estimate.plan",
    "plena_opt.estimate.problem",
    "plena_opt.estimate.report",
    "plena_opt.estimate.single_chip",
    "plena_opt.models",
    "plena_opt.memory",
    "plena_opt.chip",
    "plena_opt.simulator.report",
    "plena_opt.simulator.scheduler",
    "plena_opt.simulator.engine",
    "plena_opt.search.fronts.pareto",
    "plena_opt.search.record",
    "plena_opt.search.request",
    "plena_opt.search.result",
    "plena_opt.search.run.runner",
    "plena_opt.search.storage.storage",
    "plena_opt.search.storage.trials",
)


def import_all() -> None:
    """Import every module of :data:`MODULES` in the calling thread."""
    for name in MODULES:
        importlib.import_module(name)
