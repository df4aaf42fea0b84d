"""One adapter for Optuna constraints across major versions (service-conventions §1.3).

Optuna 5.x stores constraints through the core API (``Trial.set_constraint(key, value)``, read
back as ``FrozenTrial.constraints``) and deprecates the samplers' ``constraints_func``; Optuna 4.x
only knows ``constraints_func``, which samplers call after each trial and whose list they store in
the trial's ``"constraints"`` system attribute. The adapter picks the branch once, from the
installed API, and every trial also keeps its named constraint values in the ``constraints`` user
attribute so the search never depends on either storage format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optuna

CONSTRAINTS_ATTR = "constraints"


def core_constraints_available(trial_cls: type = optuna.trial.Trial) -> bool:
    """Whether this Optuna has the core constraint API (``Trial.set_constraint``, 5.x)."""
    return callable(getattr(trial_cls, "set_constraint", None))


def _constraints_func(trial: optuna.trial.FrozenTrial) -> Sequence[float]:
    """4.x ``constraints_func``: the values recorded in the trial's user attribute."""
    return list(trial.user_attrs.get(CONSTRAINTS_ATTR, {}).values())


class ConstraintAdapter:
    """Records constraint values on trials with whichever API the installed Optuna offers.

    ``core`` forces a branch (tests use it to exercise the 4.x path on a 5.x install).
    """

    def __init__(self, core: bool | None = None) -> None:
        self.core = core_constraints_available() if core is None else core

    def sampler_kwargs(self) -> dict[str, Any]:
        """Extra sampler arguments: ``constraints_func`` on 4.x, nothing on 5.x."""
        return {} if self.core else {"constraints_func": _constraints_func}

    def record(self, trial: optuna.trial.Trial, values: dict[str, float]) -> None:
        """Attach ``values`` (≤ 0 feasible) to a running ``trial`` before it is told."""
        trial.set_user_attr(CONSTRAINTS_ATTR, dict(values))
        if self.core:
            for key, value in values.items():
                trial.set_constraint(key, float(value))

    def system_attrs(self, values: dict[str, float]) -> dict[str, Any]:
        """System attributes carrying ``values`` for a trial built with ``create_trial``."""
        if self.core:
            return {f"constraints:{k}": float(v) for k, v in values.items()}
        return {"constraints": [float(v) for v in values.values()]}


def trial_constraints(trial: optuna.trial.FrozenTrial) -> dict[str, float]:
    """Named constraint values of a stored trial (our user attribute; empty if none)."""
    return dict(trial.user_attrs.get(CONSTRAINTS_ATTR, {}))
