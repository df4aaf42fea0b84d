"""Pipeline parallelism under load: ``pp`` stages with up to ``pp`` batches in flight.

How the engines run a pipeline-parallel plan (each keeps several scheduled batches in flight, one
per stage, and a request is in at most one of them):

* vLLM V1: the engine core keeps a queue of ``max_concurrent_batches`` scheduled batches, which is
  ``pipeline_parallel_size`` ("PP requires PP-size concurrent batches to fill the pipeline",
  ``vllm/config/vllm.py`` ``max_concurrent_batches``; ``vllm/v1/executor/multiproc_executor.py``);
  one scheduler schedules them all (RFC vllm-project/vllm#11945), its ``max_num_seqs`` caps the
  requests running across them, and each scheduled batch has its own token budget.
* SGLang (``--pp-size``): the PP event loop runs ``pp_size`` micro-batches, each a running batch of
  at most ``pp_max_micro_batch_size = max(max_running_requests // pp_size, 1)`` requests
  (``python/sglang/srt/managers/scheduler.py``).
* TensorRT-LLM (PyTorch executor): ``_executor_loop_pp`` rotates ``num_micro_batches = pp_size``
  scheduled micro-batches through the stages (``tensorrt_llm/_torch/pyexecutor/py_executor.py``).

**The model.** A replica of ``pp`` stages serving ``C`` clients keeps ``k = min(pp, C)`` batches in
flight (a Poisson load: ``pp``), each holding ``⌈C/k⌉`` clients (the busiest; a rate splits in
``k`` equal parts) and a ``1/k`` share of the engine's running cap. The stages turn like a wheel:
every stage runs each in-flight batch once per turn, and a batch's next step needs its own sampled
token, i.e. its whole trip through the stages. So each in-flight batch is one continuous-batching
engine (``serving.steady`` / ``serving.replay`` run it unchanged) whose step takes one turn:

    turn = max(k · (slowest stage + one boundary transfer),  Σ stages + pp transfers)

— the evaluator's own pipeline figures for a micro-batch of that batch's size on the plan
(``estimate.passes``: ``period`` and its in-flight bound; evaluated at batch ``n · k`` so the
micro-batch is ``n`` and ``k`` are in flight): its prefill pass for the prompt tokens and its
decode step averaged over the output (``k`` × the evaluator's decode period per token, i.e. 1 /
``tps_per_sequence``). A request's TPOT is therefore at least a full pass through all stages, and
throughput grows with the batches in flight (``k`` engines share the plan's GPUs: tokens/s per GPU
counts ``world_size / k`` GPUs per in-flight batch).

Assumptions (no fitted constant): the in-flight batches carry equal work (the busiest batch's
step stands for every batch's turn, as a DP replica's does); the host time per step
(``EngineModel.host_step_seconds``) and the CUDA-graph limit apply per batch; a batch holding one
request per turn with fewer than ``pp`` in flight (``C < pp``) interpolates above one prompt from
the evaluator at the same in-flight count. Context parallelism stays refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from plena_opt.estimate.gpu_queue import EvaluatorStepCosts

if TYPE_CHECKING:
    from plena_opt.serving.engines import EngineModel
    from plena_opt.serving.steps import StepModel


def in_flight_batches(pp: int, clients: int | None) -> int:
    """Batches a ``pp``-stage replica keeps in flight: ``min(pp, clients)`` (None: Poisson, pp)."""
    return pp if clients is None else max(1, min(pp, clients))


def per_batch(clients: int | None, rate: float | None, k: int) -> tuple[int | None, float | None]:
    """(clients of the busiest in-flight batch ``⌈C/k⌉``, requests/s per batch ``rate / k``)."""
    return (None if clients is None else -(-clients // k)), (None if rate is None else rate / k)


def pipeline_engine(engine: EngineModel, k: int) -> EngineModel:
    """``engine`` as one of ``k`` in-flight batches: its running cap split ``max(cap // k, 1)``
    (SGLang's ``pp_max_micro_batch_size``; vLLM's one ``max_num_seqs`` over all batches)."""
    cap = engine.max_running
    if k == 1 or cap is None:
        return engine
    return replace(engine, max_running=max(cap // k, 1))


class PipelineStepCosts(EvaluatorStepCosts):
    """``EvaluatorStepCosts`` of one in-flight batch of a pp plan: a batch of ``n`` requests is
    the evaluator's micro-batch of ``n`` with ``in_flight`` of them (batch ``n · in_flight``),
    and its prefill and first decode step cost one turn of the wheel (module docstring)."""

    def __init__(self, *args: object, in_flight: int, **kwargs: object) -> None:
        self.in_flight = in_flight
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def _evaluator(self, batch: int, output_len: int | None):  # type: ignore[override]
        return super()._evaluator(batch * self.in_flight, output_len)

    def _prefill_at(self, batch: int) -> float:
        """One turn of the prefill: ``max(k · period, Σ stages + pp transfers)`` (s)."""
        hit = self._pre.get(batch)
        if hit is None:
            pre = self._first(batch).prefill
            trip = pre.latency_at(0) + pre.transfer.seconds  # Σ stages + pp transfers
            hit = self._pre[batch] = max(self.in_flight * float(pre.period[0]), trip)
        return hit

    def _first_decode_at(self, batch: int) -> float:
        """One turn of the first decode step: ``k · period`` (s); the decode period already
        carries the in-flight bound (``estimate.passes.PassResult.period``)."""
        return self.in_flight * float(self._first(batch).decode.period[0])


def pipeline_step(inputs: tuple, workload: object, plan: object, engine: EngineModel,
                  clients: int | None, evaluators: dict | None = None,
                  range_ratio: float = 0.0) -> StepModel:  # fmt: skip
    """The step model of one in-flight batch of ``plan`` (``pp`` > 1) under ``clients`` (None:
    Poisson). ``inputs``: (model, noc, memory, chip); the rest as ``StepModel.from_problem``."""
    from plena_opt.serving.attention_dp import imbalance_of
    from plena_opt.serving.steps import StepModel, engine_workload

    workload = engine_workload(workload, engine)
    k = in_flight_batches(plan.pp, clients)  # type: ignore[attr-defined]
    model = inputs[0]
    costs = PipelineStepCosts(*inputs, workload, plan, evaluators, in_flight=k)
    wl = workload
    adp = imbalance_of(model, plan, wl.input_seq_len, wl.output_seq_len, range_ratio)  # type: ignore[attr-defined]
    return StepModel(costs, pipeline_engine(engine, k), plan.world_size / k, adp)  # type: ignore[attr-defined]


CP_REFUSED = (
    "serving under load models engine instances of TP (and EP) with pipeline stages and their "
    "DP replicas; context parallelism is not modelled"
)


def check_plan(plan: object) -> None:
    """Refuse, naming ``cp``, a plan with context parallelism (not modelled under load)."""
    from plena_opt.errors import PlenaInputError

    cp = plan.cp  # type: ignore[attr-defined]
    if cp != 1:
        raise PlenaInputError("cp", f"--cp {cp}: {CP_REFUSED}")


Load = tuple["StepModel", int | None, float | None, int]  # step, clients, rate, batches


def in_flight_load(inputs: tuple, workload: object, plan: object, engine: EngineModel,
                   clients: int | None, rate: float | None, evaluators: dict | None = None,
                   range_ratio: float = 0.0) -> Load:  # fmt: skip
    """(step model, clients, request rate, batches in flight) of one in-flight batch of one
    replica ``plan`` (its own step model and load when ``pp`` is 1)."""
    if plan.pp == 1:  # type: ignore[attr-defined]
        from plena_opt.serving.steps import StepModel

        step = StepModel.from_problem(*inputs, workload, plan, engine, evaluators, range_ratio)
        return step, clients, rate, 1
    k = in_flight_batches(plan.pp, clients)  # type: ignore[attr-defined]
    step = pipeline_step(inputs, workload, plan, engine, clients, evaluators, range_ratio)
    return (step, *per_batch(clients, rate, k), k)
