"""The web UI's only door into the rest of plena-opt: simulations, estimates and the study store.

Everything the API needs from the product is called in this package and nowhere else in
:mod:`plena_opt.web`: ``catalog`` (the forms' choices), ``runs`` (:class:`SimRun`, training
schedules, traces, noise), ``serving`` (a serving plan's estimate and simulation), ``studies``
(the study store). Problems, estimates and simulations go through the use-case layer
(:mod:`plena_opt.api`); the study store, the Pareto mask and the plain serving simulation of
edited stage times (which has no use case yet) are called directly. Results come back as the
product's own typed objects wrapped in :class:`SimRun`; :mod:`plena_opt.web.views` turns them
into the API's pydantic responses.

Units: training durations are milliseconds (as ``plena-opt simulate --schedule``); serving plans
are simulated in seconds (as the evaluator) and :attr:`SimRun.to_ms` scales them for the page.
"""

from __future__ import annotations

from plena_opt.api.simulation_io import (
    BUBBLE_DEFINITION,
    SCHEDULES,
    DepReason,
    QuantileStats,
    Timeline,
    validate_trace,
)
from plena_opt.web.service.catalog import catalog
from plena_opt.web.service.runs import (
    SimRun,
    check_noise,
    check_training_size,
    run_training,
    trace_of,
)
from plena_opt.web.service.serving import ServingProblem, estimate_serving, run_serving
from plena_opt.web.service.serving_study import FORM_FIELDS, not_in_form
from plena_opt.web.service.studies import list_studies, serving_front, study_front

__all__ = [
    "BUBBLE_DEFINITION",
    "FORM_FIELDS",
    "SCHEDULES",
    "DepReason",
    "QuantileStats",
    "ServingProblem",
    "SimRun",
    "Timeline",
    "catalog",
    "check_noise",
    "check_training_size",
    "estimate_serving",
    "list_studies",
    "not_in_form",
    "run_serving",
    "run_training",
    "serving_front",
    "study_front",
    "trace_of",
    "validate_trace",
]
