"""Serving under load: a benchmark's workload, the engine's scheduler, and the metrics it measures.

``ServingWorkload`` (closed loop: ``concurrency`` clients, each sends its next request when its
last one finishes), ``EngineModel`` (vLLM, SGLang, TensorRT-LLM scheduler defaults, cited),
``closed_loop`` (steady-state fixed point, for the search) and ``replay_closed_loop`` (a
discrete-event replay of the same scheduler, for percentiles and the re-check). Step times come
from the evaluator (``StepModel``). Sits above ``plena_opt.estimate``, below ``plena_opt.api``.
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
