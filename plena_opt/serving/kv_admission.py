"""Requests an engine's KV cache admits at once: the running cap set by memory, not by a flag.

A closed-loop benchmark at concurrency ``C`` keeps ``C`` requests in the engine, but the engine
runs only those whose KV cache fits its KV pool; the rest wait in its queue, and their wait is in
TTFT (``steady.closed_loop``: ``(C − R) / X`` more per request). The pool per device is what the
engine's memory setting leaves after the weights (and, where the engine reserves it, the
activation working set of one step); each default is cited next to its number:

* vLLM: ``gpu_memory_utilization`` 0.9 of the device covers weights, the activations profiled at
  one step of ``max_num_batched_tokens`` and the KV cache (vLLM engine arguments,
  ``--gpu-memory-utilization``; ``vllm/worker/gpu_worker.py determine_available_memory``).
* SGLang: ``mem_fraction_static`` of the device covers weights and the KV pool (activations live
  outside it); unset, it is 0.88 / 0.87 / 0.85 / 0.81 / 0.79 at TP 1 / 2 / 4–7 / 8–15 / ≥16
  (``sglang/srt/server_args.py`` ``ServerArgs.__post_init__``).
* TensorRT-LLM: ``kv_cache_config.free_gpu_memory_fraction`` 0.9 of the memory left after weights
  and activations goes to the KV cache (``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig``).

What a running request holds: TensorRT-LLM's default capacity scheduler (``GUARANTEED_NO_EVICT``)
admits a request only with blocks for its whole sequence, ``isl + osl`` tokens; vLLM and SGLang
allocate blocks as tokens come (and preempt or retract when full), so a request holds on average
its prompt and half its output, ``isl + osl / 2``. The KV bytes per token and the activation bytes
per prompt token are the evaluator's own (``estimate.capacity``). Nothing here is fitted.

``validate --measurements`` caps vLLM and SGLang rows so (``KV_CAPPED_ENGINES``). On the shipped
file (figures of round 8, with the datasheet capacities; the pools now take the CUDA-reported memory
above) the cap binds on 18 of their rows, whose measured TTFTs (8–462 s) are the queue it predicts:
their TTFT MAPE 85.6 → 73.3 %, signed −85.6 → +4.8 % (Qwen3-32B TP2 vLLM 4096/128 at C=128: 19.0 s
measured, 2.2 s → 17.4 s; DeepSeek-R1 SGLang 8k/1k at C=256 goes the other way, 8.7 s measured, 4.1
→ 33.7 s: its recipe's memory setting is not the default). TensorRT-LLM is not capped by default:
its default admission (whole sequences reserved, defaults above) binds on 20 rows and over-predicts
12 of them 2.7–8.8× (AIConfigurator's Qwen3-32B H100 grid: the generated deployments' KV memory is
not recorded in the rows), so its admission is priced only where an InferenceX recipe's KV fraction
is known (``validate.serving_recipes.trtllm_kv_fraction``) and, elsewhere, said, not priced
(``api.running_cap``).

``admitted`` is the one rule every command applies (``validate`` with each engine's default
memory setting, which the rows do not record; ``estimate``, ``search`` and the disaggregated
decode pool with the setting the launch files write, ``api.running_cap``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.estimate.plan import Plan, Workload
    from plena_opt.serving.engines import EngineModel

VLLM_GPU_MEMORY_UTILIZATION = 0.9  # vLLM --gpu-memory-utilization default
TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9  # TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction
# SGLang mem_fraction_static when unset, by TP size (server_args.py __post_init__): (min TP, value)
SGLANG_MEM_FRACTION_STATIC = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
WHOLE_SEQUENCE_ENGINES = frozenset({"trtllm"})  # reserve isl + osl per request at admission
KV_CAPPED_ENGINES = frozenset({"vllm", "sglang"})  # every command caps these (module docstring)
# The launch option of each engine's memory setting (as plena_opt/export/engines.json writes it)
MEMORY_FLAG = {"vllm": "--gpu-memory-utilization", "sglang": "--mem-fraction-static",
               "trtllm": "--kv_cache_free_gpu_memory_fraction"}  # fmt: skip
GIB = float(1 << 30)
MIB = float(1 << 20)
# The device memory the engines take their fractions of is what CUDA / nvidia-smi report, not the
# datasheet's decimal gigabytes (the chip profiles' ``hbm.capacity_bytes``): an H100 SXM "80 GB"
# reports 81,559 MiB = 85.5e9 B (nvidia-smi, modal-labs/modal-client PR #2797), a B200 "180 GB"
# 183,359 MiB = 192.3e9 B (nvidia-smi, NVIDIA/TensorRT-LLM issue #10278; CUDA deviceQuery 178.35
# GiB, pytorch/ao PR #4002), an H200 "141 GB" 143,771 MiB, a GB200 "186 GB" 189,471 MiB, a B300
# "288 GB" 275,040 MiB and a GB300 "288 GB" 284,208 MiB (nvidia-smi tables published in public
# GitHub issues and notes, drivers 570-580; the same figure in several independent ones). AMD parts
# (rocm-smi totals) are not listed: MI300X reports 192 GiB on bare metal but 191.7 GiB as a VF, and
# no MI325X total was found. A chip without a reported figure here, or a memory whose capacity is
# not the chip profile's (a --fixed-capacity-gib run), keeps that capacity.
REPORTED_DEVICE_MEMORY_BYTES = {"h100-sxm": 81559 * MIB, "h200-sxm": 143771 * MIB,
                                "b200": 183359 * MIB, "gb200": 189471 * MIB,
                                "b300": 275040 * MIB, "gb300": 284208 * MIB}  # fmt: skip


@dataclass(frozen=True)
class KvCap:
    """Requests ``engine``'s KV pool holds at once on a plan: ``requests`` (all its devices) of
    ``tokens_per_request`` tokens each in a pool of ``pool_bytes`` per device, at the memory
    setting ``fraction`` (None: the engine's default). Per device of the fullest stage, bytes:
    ``weight_bytes`` of weights, ``request_bytes`` of KV cache per running request."""

    engine: str
    requests: int
    tokens_per_request: float
    pool_bytes: float
    fraction: float | None
    weight_bytes: float = 0.0
    request_bytes: float = 0.0

    def describe(self, isl: int, osl: int) -> str:
        """Where a running cap came from, in words (``estimate``'s ``max_running_source``)."""
        held = f"{isl} + {osl}" if self.engine in WHOLE_SEQUENCE_ENGINES else f"{isl} + {osl}/2"
        setting = "default" if self.fraction is None else f"{self.fraction:g}"
        return (f"the KV cache: {self.requests} requests of {held} tokens fit the pool of "
                f"{self.pool_bytes / GIB:.1f} GiB per GPU ({MEMORY_FLAG[self.engine]} "
                f"{setting})")  # fmt: skip


def sglang_mem_fraction(tp: int) -> float:
    """SGLang's default ``mem_fraction_static`` at tensor-parallel size ``tp``."""
    return next(v for lo, v in SGLANG_MEM_FRACTION_STATIC if tp >= lo)


def pool_bytes(engine: str, capacity: float, weights: float, activations: float, tp: int,
               fraction: float | None = None) -> float:  # fmt: skip
    """KV pool bytes per device of ``engine`` on a device of ``capacity`` bytes holding
    ``weights`` bytes of weights and an ``activations``-byte working set of one step, at its
    memory setting ``fraction`` (None: the engine's default)."""
    if engine == "vllm":
        f = VLLM_GPU_MEMORY_UTILIZATION if fraction is None else fraction
        return f * capacity - weights - activations
    if engine == "sglang":
        f = sglang_mem_fraction(tp) if fraction is None else fraction
        return f * capacity - weights
    f = TRTLLM_FREE_GPU_MEMORY_FRACTION if fraction is None else fraction
    return f * (capacity - weights - activations)


def engine_device_memory(chip: object, capacity: float) -> float:
    """Bytes of one device the engines take their memory fractions of: the CUDA-reported total of
    ``chip`` where ``capacity`` is its profile's datasheet figure, else ``capacity`` unchanged."""
    hbm = getattr(chip, "hbm", None)
    datasheet = getattr(getattr(hbm, "capacity_bytes", None), "value", None)
    if datasheet is None or float(datasheet) != float(capacity):
        return capacity
    return REPORTED_DEVICE_MEMORY_BYTES.get(getattr(chip, "name", ""), capacity)


def kv_cap(model: object, noc: object, memory: object, chip: object, wl: Workload, plan: Plan,
           engine: str, budget_tokens: int,
           fraction: float | None = None) -> KvCap | None:  # fmt: skip
    """The requests of ``wl``'s lengths ``engine``'s pool holds at once on ``plan`` (all its
    devices) at memory setting ``fraction`` (None: the default); None: the memory has no
    capacity. ``requests`` 0: the pool holds no request (the deployment could not start so)."""
    from plena_opt.estimate.capacity import activation_bytes_per_sequence
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.distributed import PlanCost

    ctx = EstimateContext(model, noc, memory, replace(wl, batch_size=1), chip)  # type: ignore[arg-type]
    capacity = ctx.memory.capacity_bytes
    if capacity is None:
        return None
    capacity = engine_device_memory(chip, capacity)
    cost = PlanCost(ctx, plan)
    # the fullest stage's weights and KV of one sequence per device (``capacity_bound``'s)
    weights, kv = max(cost.stage_footprints(1), key=sum)
    held = wl.input_seq_len + wl.output_seq_len  # the tokens the footprint's KV is priced at
    mean_held = (
        held if engine in WHOLE_SEQUENCE_ENGINES else wl.input_seq_len + wl.output_seq_len / 2
    )
    per_request = kv * mean_held / held
    act = activation_bytes_per_sequence(cost) * budget_tokens / wl.input_seq_len  # one step
    pool = pool_bytes(engine, float(capacity), weights, act, plan.tp, fraction)
    fits = math.floor(pool / per_request) if per_request > 0 else 0
    # Sequence slots of one device across the plan: attention replicas only. Every pipeline stage
    # holds the KV of every running request for its own layers (vLLM keeps pp_size batches in
    # flight, each stage's cache holding all of them: pipeline-simulator spec §1.4), so pp does
    # not multiply the requests; the static reference's footprint (b_dev of one micro-batch,
    # analytic-model §4.3) is not the engine's pool.
    replicas = plan.dp * plan.ep
    return KvCap(engine, max(0, fits) * replicas, mean_held, pool, fraction, weights, per_request)


def kv_running_cap(model: object, noc: object, memory: object, chip: object, wl: Workload,
                   plan: Plan, engine: str, budget_tokens: int) -> int | None:  # fmt: skip
    """``kv_cap``'s requests at the engine's default memory setting. None, no cap from memory:
    no capacity, or the pool holds no request (a row's deployment that ran set its memory
    otherwise, which the row does not record)."""
    cap = kv_cap(model, noc, memory, chip, wl, plan, engine, budget_tokens)
    return None if cap is None or cap.requests < 1 else cap.requests


def admitted(eng: EngineModel, parts: tuple, plan: Plan, fraction: float | None = None
             ) -> tuple[EngineModel, KvCap | None]:  # fmt: skip
    """``eng`` with ``max_running`` no larger than the requests its KV pool holds at once on
    ``plan`` (``parts``: model, NoC, memory, chip, Workload; ``fraction`` as ``kv_cap``'s), and
    that cap where it binds (else None; a pool that holds no request sets no cap, as
    ``kv_running_cap``). Engines outside ``KV_CAPPED_ENGINES`` unchanged."""
    if eng.name not in KV_CAPPED_ENGINES:
        return eng, None
    cap = kv_cap(*parts, plan, eng.name, eng.budget_tokens, fraction)  # type: ignore[misc]
    if not binds(cap, eng):
        return eng, None
    return replace(eng, max_running=cap.requests), cap  # type: ignore[union-attr]


def binds(cap: KvCap | None, eng: EngineModel) -> bool:
    """Whether ``cap`` lowers ``eng``'s running cap (a pool that holds no request does not)."""
    if cap is None or cap.requests < 1:
        return False
    return eng.max_running is None or cap.requests < eng.max_running
