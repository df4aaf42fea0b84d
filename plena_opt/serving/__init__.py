"""Serving under load: a benchmark's workload, the engine's scheduler, and the metrics it measures.

``ServingWorkload`` (closed loop: ``concurrency`` clients, each sends its next request when its
last one finishes), ``EngineModel`` (vLLM, SGLang, TensorRT-LLM scheduler defaults, cited),
``closed_loop`` (steady-state fixed point, for the search) and ``replay_closed_loop`` (a
discrete-event replay of the same scheduler, for percentiles and the re-check). Step times come
from the evaluator (``StepModel``). Sits above ``plena_opt.estimate``, below ``plena_opt.api``.

Reference beside fast path, as in the evaluator (``estimate.reference`` beside ``PlanCost``):
each workload has a fast steady state and a discrete-event replay of the same scheduler that
serves as its reference, and tests hold the two to agree on the means.

* closed loop: ``closed_loop`` (``steady.py``, fast) against ``replay_closed_loop``
  (``replay.py``, reference; ``tests/serving/test_serving.py``
  ``test_steady_state_agrees_with_the_replay_on_the_mean`` and ``…_on_an_evaluated_plan``);
* open loop (Poisson): ``open_loop`` against ``replay_open_loop`` (``open_loop.py``;
  ``test_open_loop_steady_state_agrees_with_its_replay`` in ``tests/serving/test_serving.py``).
"""

from plena_opt.serving.benchmark import PROMPTS_PER_CLIENT, benchmark_run
from plena_opt.serving.engines import ENGINES, EngineModel, engine_model
from plena_opt.serving.open_loop import OpenLoopWorkload, open_loop, replay_open_loop
from plena_opt.serving.replay import replay_closed_loop
from plena_opt.serving.steady import closed_loop
from plena_opt.serving.steps import StepModel
from plena_opt.serving.workload import ServingMetrics, ServingWorkload

__all__ = [
    "ENGINES",
    "PROMPTS_PER_CLIENT",
    "benchmark_run",
    "EngineModel",
    "OpenLoopWorkload",
    "ServingMetrics",
    "ServingWorkload",
    "StepModel",
    "closed_loop",
    "engine_model",
    "open_loop",
    "replay_closed_loop",
    "replay_open_loop",
]
