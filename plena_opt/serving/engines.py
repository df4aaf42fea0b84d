"""The scheduler each serving engine runs a plan under, with its defaults (cited at each number).

All three engines run continuous batching with chunked prefill: each step first gives one token
to every running request that is decoding, then fills the rest of a per-step token budget with
prompt tokens of waiting requests, first come first served (a longer prompt is split over steps).
``max_running`` caps the requests admitted at once (the rest wait); decode batches larger than
``cuda_graph_max_batch`` run without CUDA graphs and pay the eager host time of a forward.
``host_step_seconds`` is a per-engine host cost per step (scheduling, sampling, detokenising
outside the graph): a named constant, 0 until calibrated (see benchmarks/README_gpu.md).

vLLM and TensorRT-LLM put prompt chunks and decode tokens in the same step (``mixed_prefill``).
SGLang by default does not (``enable_mixed_chunk`` False): when prompts wait, it runs a prefill
batch of them alone and the running requests decode in the steps after it (prefill first).
All three overlap scheduling by default (``overlap_schedule``; vLLM's async scheduling from
0.14.0, ``serving.vllm_async``): the CPU prepares the next step while the GPU runs this one, so
a request that arrives during a step cannot join the step already prepared and waits
``OVERLAP_ADMISSION_STEPS`` more step before its prompt runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from plena_opt.chip.gpu.kernel_bytes import FUSED_QUANT_ENGINES
from plena_opt.errors import PlenaInputError, not_found
from plena_opt.serving.vllm_async import vllm_async_default
from plena_opt.serving.vllm_budget import vllm_batch_defaults, vllm_large_tier

GIB = 1 << 30
# Steps an arriving request misses under overlap scheduling: the one prepared while it arrived
# (the documented trade-off of overlap scheduling: better TPOT, one step more TTFT; TensorRT-LLM
# PR #14061 adds an opt-in early first-token emission for it). A count, not fitted.
OVERLAP_ADMISSION_STEPS = 1
MAX_BATCH_WAIT_ITERS = 10_000  # bound on the batch-wait and receive intervals priced (steps)


@dataclass(frozen=True)
class EngineModel:
    """One engine's scheduler settings. ``budget_tokens``: prompt + decode tokens per step;
    ``max_running``: requests running at once (None: bounded only by the KV cache);
    ``cuda_graph_max_batch``: largest decode batch replayed as a CUDA graph (None: every batch);
    ``host_step_seconds``: host time added to every step (s); ``mixed_prefill``: prompt chunks
    share a step with the decode tokens (False: a step with prompt tokens decodes nobody);
    ``overlap_schedule``: the next step is prepared while this one runs."""

    name: str
    budget_tokens: int
    max_running: int | None
    cuda_graph_max_batch: int | None
    host_step_seconds: float = 0.0
    source: str = ""
    mixed_prefill: bool = True
    overlap_schedule: bool = False
    # TensorRT-LLM batch waiting (``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio``,
    # tensorrt_llm/llmapi/llm_args.py; both 0 by default: off): waiting prompts are held back up
    # to ``batch_wait_iters`` steps unless the step's tokens reach ratio × ``budget_tokens``
    batch_wait_iters: int = 0
    batch_wait_tokens_ratio: float = 0.0
    # SGLang ``--scheduler-recv-interval`` (server_args.py, default 1): the scheduler reads new
    # requests once every that many decode steps (managers/scheduler_recv_skipper.py: a decode
    # forward adds 1 to a counter, any other forward 1000; requests are read at the threshold)
    recv_interval_steps: int = 1
    # TensorRT-LLM attention-DP balancing (``attention_dp_config``: ``enable_balance``,
    # ``timeout_iters``, ``batching_wait_iters``; off by default, 50 / 10 when enabled,
    # tensorrt_llm/llmapi/llm_args.py AttentionDpConfig): with ``adp_ranks`` attention-DP ranks,
    # prompts are held until every rank has one or ``adp_timeout_iters`` steps have passed since
    # the last release (PyExecutor._balance_adp_requests); 0: off (``steady.adp_balance_steps``)
    adp_ranks: int = 1
    adp_timeout_iters: int = 0
    adp_batching_wait_iters: int = 0
    # the engine's decode kernels against the tables the chip is fitted on (serving.kernel_scale;
    # set per chip by ``calibration.calibrated``): device time of a decode step × this
    decode_kernel_scale: float = 1.0
    # a quantised GEMM's input is quantised inside the kernel before it (RMSNorm / activation
    # write the quantised input), not by separate bf16 passes as in the vLLM kernel tables
    # (``Workload.fused_input_quant``, ``chip.gpu.kernel_bytes``)
    fused_input_quant: bool = False

    def __post_init__(self) -> None:
        if self.budget_tokens < 2:
            raise PlenaInputError("budget_tokens", f"must be at least 2; got {self.budget_tokens}")
        if self.max_running is not None and self.max_running < 1:
            raise PlenaInputError("max_running", f"must be at least 1; got {self.max_running}")
        if not 0 <= self.host_step_seconds < 1:
            raise PlenaInputError("host_step_seconds", "must be 0 to 1 s")
        if not 0 <= self.batch_wait_iters <= MAX_BATCH_WAIT_ITERS:
            raise PlenaInputError("batch_wait_iters", f"must be 0 to {MAX_BATCH_WAIT_ITERS}")
        if not 0 <= self.batch_wait_tokens_ratio <= 1:
            raise PlenaInputError("batch_wait_tokens_ratio", "must be 0 to 1")
        if not 1 <= self.recv_interval_steps <= MAX_BATCH_WAIT_ITERS:
            raise PlenaInputError("recv_interval_steps", f"must be 1 to {MAX_BATCH_WAIT_ITERS}")
        if not 1 <= self.adp_ranks <= MAX_BATCH_WAIT_ITERS:
            raise PlenaInputError("adp_ranks", f"must be 1 to {MAX_BATCH_WAIT_ITERS}")
        for name in ("adp_timeout_iters", "adp_batching_wait_iters"):
            if not 0 <= getattr(self, name) <= MAX_BATCH_WAIT_ITERS:
                raise PlenaInputError(name, f"must be 0 to {MAX_BATCH_WAIT_ITERS}")
        if not 0.25 <= self.decode_kernel_scale <= 4:
            raise PlenaInputError("decode_kernel_scale", "must be 0.25 to 4")


def _vllm(gpu_memory_bytes: float) -> EngineModel:
    # vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults (V1), the OpenAI server of
    # VERSIONS["vllm"]: max_num_batched_tokens 16384 on GPUs of >= 160 GiB (from 0.28.0; 8192
    # before), 8192 on >= 70 GiB, else 2048; max_num_seqs 1024 (256 below 70 GiB)
    # (serving.vllm_budget; a measured row prices its own version's, validate.serving_score).
    # vllm/config/vllm.py: max_cudagraph_capture_size defaults to min(2 * max_num_seqs, 512).
    # Async scheduling (overlap) is on by default in VERSIONS["vllm"] at every pipeline size
    # (serving.vllm_async: from 0.15.0; a measured row of an older version sets it from its own).
    budget, seqs = vllm_batch_defaults(gpu_memory_bytes, vllm_large_tier(VERSIONS["vllm"]))
    return EngineModel("vllm", budget, seqs, min(2 * seqs, 512),
                       source="vllm/engine/arg_utils.py get_batch_defaults; "
                       "vllm/config/vllm.py max_cudagraph_capture_size, async_scheduling",
                       overlap_schedule=vllm_async_default(VERSIONS["vllm"]))  # fmt: skip


def _sglang(gpu_memory_bytes: float) -> EngineModel:
    # sglang/srt/server_args.py (_handle_chunked_prefill_size): chunked_prefill_size 2048 below
    # 35 GiB, 8192 below 160 GiB (H100, H200), 16384 above (B200); cuda_graph_max_bs 256 when
    # tp < 4 else 512 on 80-160 GiB parts (taken as 512 here, the rows' TP is mostly >= 4);
    # max_running_requests is sized from the KV pool when unset (None here).
    # ServerArgs.enable_mixed_chunk defaults to False: Scheduler.get_next_batch_to_run runs a
    # new prefill batch (decode paused) whenever prompts wait, else the running decode batch.
    # ServerArgs.disable_overlap_schedule defaults to False (overlap scheduler on).
    gib = gpu_memory_bytes / GIB
    budget = 2048 if gib < 35 else 8192 if gib < 160 else 16384
    return EngineModel("sglang", budget, None, 512,
                       source="sglang/srt/server_args.py chunked_prefill_size, "
                       "cuda_graph_max_bs, enable_mixed_chunk, disable_overlap_schedule",
                       mixed_prefill=False, overlap_schedule=True)  # fmt: skip


def _trtllm(gpu_memory_bytes: float) -> EngineModel:
    # tensorrt_llm/llmapi/llm_args.py (1.x, PyTorch backend): max_num_tokens 8192, max_batch_size
    # 2048; the inflight batching scheduler mixes context chunks with generation steps under
    # max_num_tokens (TensorRT-LLM docs, "Tuning Max Batch Size and Max Num Tokens").
    # CudaGraphConfig.max_batch_size defaults to 0 and the rows do not record the graph sizes the
    # deployments captured: every decode batch is priced as a graph replay (None).
    # TorchLlmArgs.disable_overlap_scheduler defaults to False (overlap scheduler on).
    # Quantised (FP8 / NVFP4) linear layers take their input quantised by the fused RMSNorm /
    # activation kernel before them (TensorRT-LLM's fused norm-quant kernels), not by separate
    # bf16 passes (``fused_input_quant``; README_serving r16bytes).
    del gpu_memory_bytes
    return EngineModel("trtllm", 8192, 2048, None,
                       source="tensorrt_llm/llmapi/llm_args.py max_num_tokens, "
                       "max_batch_size, disable_overlap_scheduler",
                       overlap_schedule=True,
                       fused_input_quant="trtllm" in FUSED_QUANT_ENGINES)  # fmt: skip


ENGINES = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}
# The engine version whose defaults the builders above are: the versions the launch bundle is
# written for (plena_opt/export/engines.json, its "version" and "source" per engine).
VERSIONS = {"vllm": "0.34.0", "sglang": "0.5.23", "trtllm": "00209af1"}


def engine_model(name: str, gpu_memory_bytes: float, host_step_seconds: float = 0.0) -> EngineModel:
    """The default scheduler of engine ``name`` on a GPU with ``gpu_memory_bytes`` of HBM."""
    if name not in ENGINES:
        raise not_found("engine", "engine", name, ENGINES)
    return replace(ENGINES[name](gpu_memory_bytes), host_step_seconds=host_step_seconds)
