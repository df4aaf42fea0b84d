"""Where every field of every gRPC request message is bounded (``Message.field`` → the rule),
so that a field added without a bound fails ``tests/test_request_bounds.py``. A rule names the
constant of :mod:`plena_opt.api.limits` (``MAX_…``) that caps a size, or says why the field
carries no size (a choice from a word list, a flag, a threshold value checked for range). Every
message is also capped whole at ``MAX_MESSAGE_BYTES``. The web app's pydantic models carry
their bounds in their ``Field``\\ s (the test reads them there)."""

from __future__ import annotations

_NAME = "a built-in name, else NOT_FOUND (never a path); whole message ≤ MAX_MESSAGE_BYTES"
_CHOICE = "one of a word list (plena_opt.vocabulary / the library's names), else refused"
_FLAG = "a bool: no size"
_SLA = "an SLA or cost cap: finite, 0 < value ≤ MAX_SLA (1e9)"
_DEGREE = "a parallel degree: 1 ≤ d ≤ MAX_DEVICES; the plan's devices must equal the NoC's"
_POOL = (
    "0 (unset; all four or none) or 1 ≤ n ≤ MAX_DEVICES; prefill_workers·prefill_tp + "
    "decode_workers·decode_tp ≤ the NoC's devices; Estimate only"
)
_JSON = "inline JSON document ≤ MAX_BODY_BYTES (ServerLimits.max_inline_json_bytes)"

PROTO_BOUNDS: dict[str, str] = {
    "ModelSource.name": _NAME,
    "ModelSource.hf_config_json": _JSON,
    "ModelSource.display_name": "≤ MAX_DISPLAY_NAME characters",
    "ProfileSource.name": _NAME,
    "ProfileSource.json": _JSON,
    "FixedBandwidthMemory.bandwidth_gbytes_per_s": "plena_opt.bounds: 1 MB/s – 100 PB/s",
    "FixedBandwidthMemory.capacity_gib": "plena_opt.bounds: ≤ 2**64 bytes",
    "Workload.batch_size": "estimate.plan.MAX_WORKLOAD (2**24)",
    "Workload.input_seq_len": "estimate.plan.MAX_WORKLOAD (2**26)",
    "Workload.output_seq_len": "estimate.plan.MAX_WORKLOAD (2**24)",
    "Workload.frequency_hz": "estimate.plan: 1 Hz – 1e15 Hz",
    "Workload.overlap_policy": _CHOICE,
    "Workload.include_lm_head": _FLAG,
    "Workload.routing": _CHOICE,
    "Workload.precision": _CHOICE,
    "Workload.kv_precision": _CHOICE,
    "Workload.engine": _CHOICE + " (without a load: the static plans on its kernels)",
    "Workload.moe_kernel": _CHOICE + " (one the engine does not run there is refused)",
    "Workload.eplb_redundant": "0 ≤ n ≤ MAX_EPLB_REDUNDANT (2**16, estimate.eplb)",
    "SearchOptions.trials": "≤ MAX_TRIALS",
    "SearchOptions.seed": "0 ≤ seed < 2**32",
    "SearchOptions.sampler": _CHOICE,
    "SearchOptions.objectives": _CHOICE + "; no repeats, so at most the objective count",
    "SearchOptions.study_name": "1-128 characters of A-Z a-z 0-9 . _ : @ + -",
    "SearchOptions.batch_sizes": "≤ MAX_BATCH_SIZES entries, each ≤ estimate.plan.MAX_WORKLOAD",
    "SearchOptions.max_ttft_ms": _SLA,
    "SearchOptions.min_tps_per_seq": _SLA,
    "SearchOptions.timeout_seconds": "0 < s ≤ 30 days (plena_opt.bounds); the run is cut at "
    "MAX_DEADLINE_SECONDS (its budget)",
    "SearchOptions.compare_exact": _FLAG,
    "SearchOptions.auto_budget_seconds": "0 < s ≤ 30 days (plena_opt.bounds); the run is cut at "
    "MAX_DEADLINE_SECONDS",
    "SearchOptions.recheck_top_k": "0 ≤ k ≤ MAX_RECHECK_TOP_K",
    "SearchOptions.mc_samples": "1 ≤ n ≤ MAX_SAMPLES",
    "SearchOptions.include_traces": _FLAG,
    "SearchOptions.max_trace_bytes": "0 ≤ bytes ≤ MAX_TRACE_BYTES",
    "SearchOptions.max_tpot_ms": _SLA,
    "SearchOptions.percentile": _CHOICE,
    "SearchOptions.memory_fraction": "0 < fraction ≤ 1",
    "SearchOptions.auto_batch_sizes": _FLAG,
    "SearchOptions.serving": _CHOICE,
    "SearchOptions.precisions": _CHOICE + "; at most 6, no repeats",
    "SearchOptions.serving_sampler": _CHOICE,
    "SearchOptions.max_cost_per_mtok": _SLA + " USD per million output tokens",
    "NoiseSpec.version": "exactly 1",
    "NoiseSpec.jitter_sigma": "0 ≤ σ ≤ 2",
    "NoiseSpec.rank_sigma": "0 ≤ σ ≤ 2",
    "StragglerNoise.probability": "0 ≤ p ≤ 1",
    "StragglerNoise.factor_low": "1 ≤ factor_low ≤ factor_high",
    "StragglerNoise.factor_high": "1 ≤ factor_high ≤ MAX_STRAGGLER_FACTOR",
    "MoeImbalanceNoise.experts": "1 ≤ experts ≤ MAX_MOE_EXPERTS",
    "MoeImbalanceNoise.top_k": "1 ≤ top_k ≤ experts",
    "MoeImbalanceNoise.ep": "1 ≤ ep, divides experts",
    "MoeImbalanceNoise.tokens": "1 ≤ tokens ≤ MAX_MOE_TOKENS",
    "MoeImbalanceNoise.alpha": "0 < alpha ≤ MAX_MOE_ALPHA",
    "MoeImbalanceNoise.fraction": "0 ≤ fraction ≤ 1",
    "MoeImbalanceNoise.op_types": "≤ MAX_DURATION_KEYS names of ≤ MAX_NAME_CHARS characters",
    "CancelSearchRequest.study_name": _NAME.replace("a built-in name", "a stored study"),
    "GetStudyRequest.study_name": _NAME.replace("a built-in name", "a stored study"),
    "Plan.tp": _DEGREE,
    "Plan.ep": _DEGREE,
    "Plan.dp": _DEGREE,
    "Plan.pp": _DEGREE,
    "Plan.cp": _DEGREE,
    "Plan.moe_tp_mode": _CHOICE,
    "Plan.moe_tp": "0 ≤ moe_tp ≤ MAX_DEVICES, divides tp·ep (0: by moe_tp_mode)",
    "Plan.comm_overlap": _CHOICE,
    "InferenceTarget.max_window_steps": "1 ≤ steps ≤ MAX_WINDOW_STEPS; ops × samples ≤ MAX_WORK",
    "TrainingSchedule.schedule": _CHOICE,
    "TrainingSchedule.pp_size": "pp·vpp·microbatches·4 ≤ MAX_TRAINING_OPS",
    "TrainingSchedule.vpp_size": "pp·vpp·microbatches·4 ≤ MAX_TRAINING_OPS",
    "TrainingSchedule.microbatches": "pp·vpp·microbatches·4 ≤ MAX_TRAINING_OPS",
    "TrainingSchedule.base_ms": "keys: the schedule's op types only; 0 ≤ ms ≤ MAX_DURATION",
    "SimulateRequest.samples": "0 ≤ samples ≤ MAX_SAMPLES; ops × samples ≤ MAX_WORK and "
    "estimated bytes ≤ MAX_SIMULATION_BYTES",
    "SimulateRequest.seed": "0 ≤ seed < 2**32",
    "SimulateRequest.include_traces": _FLAG + "; traces ≤ MAX_TRACE_BYTES per reply",
    "ListProfilesRequest.kind": "an enum value",
    # serving under load (issue 23); the replay is also capped at MAX_REPLAY_TOKENS
    "ServingLoad.concurrency": "0 (unset) or 1 ≤ clients ≤ MAX_CONCURRENCY",
    "ServingLoad.request_rate": "0 (unset) or 0 < requests/s ≤ MAX_REQUEST_RATE",
    "ServingLoad.engine": _CHOICE,
    "ServingLoad.engine_version": "the one modelled version of the engine, else refused",
    "ServingLoad.moe_kernel": _CHOICE + " (one the engine does not run there is refused)",
    "ServingLoad.range_ratio": "0 ≤ ratio < 1",
    "ServingLoad.memory_fraction": "unset or 0 < fraction ≤ MAX_MEMORY_FRACTION (Estimate only)",
    "ServingLoad.prefill_workers": _POOL,
    "ServingLoad.prefill_tp": _POOL,
    "ServingLoad.decode_workers": _POOL,
    "ServingLoad.decode_tp": _POOL,
    # speculative decoding (Estimate only; a search refuses it)
    "ServingLoad.speculative": "0 (unset) or 1 ≤ draft tokens ≤ MAX_SPECULATIVE_TOKENS",
    "ServingLoad.speculative_method": _CHOICE,
    "ServingLoad.acceptance": "exactly `speculative` rates, each 0 < rate ≤ 1 (empty: default)",
}
