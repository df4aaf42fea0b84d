"""Optuna sampler construction; the sampler is always passed explicitly (service-conventions §1.3).

``tpe``: multivariate TPE (constraint-aware), ``nsga2``: NSGA-II, ``gp``: GP with log-EHVI (small
budgets), ``exhaustive``: no sampler, every legal plan is scored through the batch API. ``auto``
is resolved by the runner from counts (``modes.choose_sampler``: exhaustive when scoring the
legal space costs no more than the budget's TPE trials by a CPU cost model, else ``tpe``).
"""

from __future__ import annotations

import importlib.util

import optuna

from plena_opt.errors import PlenaInputError
from plena_opt.search.space.constraint_adapter import ConstraintAdapter
from plena_opt.vocabulary import SAMPLERS


def make_sampler(
    name: str, seed: int | None, adapter: ConstraintAdapter, n_trials: int
) -> optuna.samplers.BaseSampler:
    """The Optuna sampler called ``name`` (not ``auto``); ``exhaustive`` gets a seeded random one
    (used only if something asks it to sample)."""
    kw = adapter.sampler_kwargs()
    if name == "tpe":
        startup = max(10, min(40, n_trials // 10))
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, n_startup_trials=startup, constant_liar=True, **kw
        )
    if name == "nsga2":
        pop = max(8, min(50, n_trials // 8))
        return optuna.samplers.NSGAIISampler(population_size=pop, seed=seed, **kw)
    if name == "gp":
        if importlib.util.find_spec("torch") is None:
            raise PlenaInputError(
                "sampler",
                "sampler gp needs PyTorch (pip install 'plena-opt[gp]'); use tpe or nsga2",
            )
        return optuna.samplers.GPSampler(seed=seed, **kw)
    if name == "exhaustive":
        return optuna.samplers.RandomSampler(seed=seed)
    raise PlenaInputError("sampler", f"sampler must be one of {', '.join(SAMPLERS[1:])}")
