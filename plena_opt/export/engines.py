"""One server of a plan per engine: vLLM, SGLang, TensorRT-LLM ``trtllm-serve``.

Each builder returns the server's command per node, or one refused ``LaunchConfig`` naming why
the engine cannot run the plan as priced. Mappings (flag names in ``engines.json``):

- replicas: the plan's ``dp·ep`` copies of the ``tp·pp·cp`` model (``ep`` splits the MoE
  experts over the replicas, ``replace`` mode);
- context parallelism ``cp``: vLLM ``--prefill-context-parallel-size cp`` (more ranks) with
  ``--decode-context-parallel-size cp`` (the decode KV sharded over the same ranks); SGLang
  ``--attn-cp-size cp`` inside a TP group of ``tp·cp`` ranks (``--enable-prefill-cp``);
- an explicit MoE split (``plan.moe_tp``: attention ``tp`` × DP ``ep``, experts ``moe_tp`` ×
  ``moe_ep`` over the same ``tp·ep`` devices, one expert group per server): vLLM runs the
  experts EP over all of them (``--enable-expert-parallel``, moe_tp 1) or TP over them (moe_ep
  1); SGLang ``--tp-size tp·ep --enable-dp-attention --dp-size ep --ep-size moe_ep``;
  TensorRT-LLM ``--tp_size tp·ep`` with ``enable_attention_dp`` (attention TP1 only),
  ``moe_expert_parallel_size`` and ``moe_tensor_parallel_size`` in its options YAML;
- a server larger than a node: vLLM ``--nnodes/--node-rank/--master-addr`` (one replica over
  nodes) or ``--data-parallel-size-local/--data-parallel-address`` (whole replicas per node);
  SGLang ``--nnodes/--node-rank/--dist-init-addr`` on every node.
"""

from __future__ import annotations

from plena_opt.chip.gpu.vendor import engine_refusal
from plena_opt.estimate.plan import Plan
from plena_opt.export.caps import RUNNING_CAP_FLAG, budget_argv, running_argv, running_cap
from plena_opt.export.launch import ENGINES, HEAD_IP, ExportSpec, LaunchConfig

__all__ = ["BUILDERS", "RUNNING_CAP_FLAG", "moe_kernel_of", "running_cap", "sglang", "trtllm",
           "vllm"]  # fmt: skip

KEEP = "moe_tp_mode keep (experts tensor-parallel inside expert groups) has no engine argument"
# EPLB (estimate.eplb): vLLM --enable-eplb --eplb-config '{"num_redundant_experts": N}',
# SGLang --enable-eplb --ep-num-redundant-experts N, TensorRT-LLM moe_config.load_balancer
# num_slots = experts + N; each engine replicates experts over its expert-parallel ranks only.
EPLB_NEEDS_EP = "eplb_redundant: {flag} replicates experts over expert-parallel ranks ({what})"
BF16_KV = (
    "a bf16 KV cache: the engine's default KV dtype (auto) keeps the checkpoint's own format, "
    "fp8 for a checkpoint that declares an FP8 KV cache (ModelOpt kv_cache_quant_algo)"
)
REPLICATED_GROUPS = (
    "an explicit MoE split with dp > 1 keeps dp replicas of the expert group: export the "
    "dp=1 plan and run dp servers behind a load balancer"
)


def _split(plan: Plan) -> tuple[int, int]:
    """(moe_tp, moe_ep) of an explicit MoE split over the ``tp·ep`` devices of its group."""
    return plan.moe_tp, plan.tp * plan.ep // plan.moe_tp


def _vllm_moe(plan: Plan) -> tuple[bool, list[str]]:
    """(``--enable-expert-parallel``, refusals) of the plan's MoE layout on vLLM."""
    if not plan.moe_tp:
        return plan.ep > 1, []
    mt, me = _split(plan)
    bad = [REPLICATED_GROUPS] if plan.dp > 1 else []
    if mt > 1 and me > 1:
        bad.append(
            f"moe_tp={mt} x moe_ep={me}: vLLM runs the experts either EP over all tp x "
            "data-parallel ranks (--enable-expert-parallel) or TP over them, not both"
        )
    return me > 1, bad


def _refuse(engine: str, role: str, reasons: list[str]) -> list[LaunchConfig]:
    return [LaunchConfig(engine, role, [], refused=reasons)]


def _formats(engine: str, precision: str | None, spec: ExportSpec) -> tuple[list, list, list]:
    """(arguments, notes, refusals) for the weight and KV formats."""
    table = ENGINES[engine]["precision"]
    argv: list[str] = []
    notes: list[str] = []
    bad: list[str] = []
    if precision not in (None, "bf16"):
        if precision in table.get("quantization", {}):
            argv += [table["quantization_flag"], table["quantization"][precision]]
        else:
            notes.append(
                f"weights in {precision}: serve a checkpoint already quantized to {precision} "
                "(the engine reads its quantization config); no online quantization flag"
            )
    # None: priced as the checkpoint's own KV format, which the engine's default (auto) keeps;
    # bf16 is written too, or the default would inherit a checkpoint's declared fp8 KV cache
    kv, dtypes = spec.kv_precision, table.get("kv_cache_dtype", {})
    if kv in dtypes and "kv_cache_dtype_flag" in table:
        argv += [table["kv_cache_dtype_flag"], dtypes[kv]]
    elif kv == "bf16" and kv not in dtypes:
        notes.append(BF16_KV)
    elif kv is not None and kv not in dtypes:
        bad.append(f"a {kv} KV cache has no KV-cache dtype in {engine}")
    return argv, notes, bad


def moe_kernel_of(engine: str, spec: ExportSpec) -> tuple[str | None, list[str]]:
    """(kernel, refusals): the MoE kernel ``engine`` runs the plan's experts on, as the plan was
    priced (``chip.gpu.moe_kernels.resolve_moe_kernel`` on the chip, the checkpoint and the
    plan's format); None where no MXFP4 MoE kernel applies; a kernel the engine does not run
    there: the refusal."""
    from plena_opt.chip.gpu.moe_kernels import check_moe_kernel, resolve_moe_kernel

    check_moe_kernel(spec.moe_kernel)
    if spec.chip is None or spec.checkpoint_precision is None:
        if spec.moe_kernel == "default":
            return None, []
        return None, ["moe_kernel needs the GPU chip and model the plan was priced on"]
    from plena_opt.chip import load_chip
    from plena_opt.chip.precision import is_weight_only
    from plena_opt.errors import PlenaInputError

    chip = load_chip(spec.chip)
    fmt = spec.precision or spec.checkpoint_precision
    compute = getattr(chip, "formats", {}).get(fmt)
    if compute is None:
        if spec.moe_kernel == "default":
            return None, []
        return None, [f"moe_kernel: {spec.chip} has no {fmt} format"]
    try:
        kernel = resolve_moe_kernel(engine, spec.moe_kernel, chip.name, spec.checkpoint_precision,
                                    compute, is_weight_only(fmt, compute))  # fmt: skip
    except PlenaInputError as exc:
        return None, [str(exc)]
    return kernel, []


def _moe_argv(engine: str, spec: ExportSpec) -> tuple[list[str], list[str]]:
    """(arguments, refusals) selecting the priced MoE kernel (``engines.json`` ``moe_kernel``)."""
    kernel, bad = moe_kernel_of(engine, spec)
    return ([] if kernel is None else list(ENGINES[engine]["moe_kernel"][kernel])), bad


def vllm(plan: Plan, batch: int, spec: ExportSpec, role: str, port: int) -> list[LaunchConfig]:
    """``vllm serve`` of the plan, one command per node."""
    f, eng = ENGINES["vllm"]["flags"], ENGINES["vllm"]
    bad = [KEEP] if plan.moe_tp_mode == "keep" and plan.tp > 1 and not plan.moe_tp else []
    expert_parallel, moe_bad = _vllm_moe(plan)
    bad += moe_bad
    if spec.eplb_redundant and not expert_parallel:
        bad.append(EPLB_NEEDS_EP.format(flag="vLLM's --enable-eplb",
                                        what="--enable-expert-parallel"))  # fmt: skip
    if plan.ep > 1 and plan.dp > 1 and not plan.moe_tp:
        bad.append(
            "with --enable-expert-parallel the experts span every tp x dp rank; a plan with "
            "dp > 1 and ep > 1 keeps dp replicas of each expert group"
        )
    fmt, notes, fbad = _formats("vllm", spec.precision, spec)
    moe, mbad = _moe_argv("vllm", spec)
    fbad += mbad
    replicas, size = plan.dp * plan.ep, plan.tp * plan.pp * plan.cp
    nodes, per_node = _layout(replicas, size, spec.gpus_per_node)
    if nodes is not None and nodes > 1 and size > spec.gpus_per_node and replicas > 1:
        bad.append(
            f"{replicas} replicas of {size} devices each over nodes of {spec.gpus_per_node}: "
            "vLLM's multi-node modes take either one replica over nodes or whole replicas per "
            "node"
        )
    if nodes is None:
        bad.append(
            f"a server of {replicas * size} devices does not fill whole nodes of "
            f"{spec.gpus_per_node}"
        )
    if bad or fbad:
        return _refuse("vllm", role, bad + fbad)
    argv = [a.format(model=spec.model) for a in eng["command"]]
    argv += [f["tp"], str(plan.tp)]
    if plan.pp > 1:
        argv += [f["pp"], str(plan.pp)]
    if plan.cp > 1:
        argv += [f["prefill_cp"], str(plan.cp), f["decode_cp"], str(plan.cp)]
    if replicas > 1:
        argv += [f["dp"], str(replicas)]
    if expert_parallel:
        argv.append(f["expert_parallel"])
    if spec.eplb_redundant:  # vLLM EPLBConfig.num_redundant_experts
        argv += [f["eplb"], f["eplb_config"], _json({"num_redundant_experts": spec.eplb_redundant})]
    argv += [*running_argv("vllm", role, plan, batch), f["max_len"], str(spec.max_len)]
    argv += budget_argv("vllm", spec)
    argv += [f["memory_fraction"], f"{spec.memory_fraction:g}", *fmt, *moe, f["port"], str(port)]
    if role in ("prefill", "decode"):
        argv += [f["kv_transfer"], _json(eng["kv_connector"])]
    if plan.comm_overlap == "full":
        notes.append("comm_overlap full is the engine's own scheduling; no argument")
    if nodes == 1:
        return [LaunchConfig("vllm", role, argv, notes)]
    out = []
    for k in range(nodes):
        if size > spec.gpus_per_node:  # one replica over nodes
            extra = [f["nnodes"], str(nodes), f["node_rank"], str(k), f["master_addr"], HEAD_IP]
        else:  # whole replicas on each node
            extra = [
                f["dp_local"],
                str(per_node),
                f["dp_address"],
                HEAD_IP,
                f["dp_rpc_port"],
                str(eng["ports"]["dp_rpc"]),
            ]
            if k > 0:
                extra += [f["dp_start_rank"], str(k * per_node)]
        if k > 0:
            extra.append(f["headless"])
        out.append(LaunchConfig("vllm", role, argv + extra, notes, node=k))
    return out


def _layout(replicas: int, size: int, gpn: int) -> tuple[int | None, int]:
    """(nodes, replicas per node) of ``replicas`` × ``size`` devices on nodes of ``gpn``;
    nodes None when they do not fill whole nodes."""
    total = replicas * size
    if total <= gpn:
        return 1, replicas
    if total % gpn:
        return None, 0
    if size > gpn:
        return (total // gpn if size % gpn == 0 else None), 1
    if gpn % size:
        return None, 0
    return total // gpn, gpn // size


def _json(doc: dict) -> str:
    import json

    return json.dumps(doc, separators=(",", ":"))


def sglang(plan: Plan, batch: int, spec: ExportSpec, role: str, port: int) -> list[LaunchConfig]:
    """``python -m sglang.launch_server`` of the plan, one command per node."""
    f, eng = ENGINES["sglang"]["flags"], ENGINES["sglang"]
    bad = [KEEP] if plan.moe_tp_mode == "keep" and plan.tp > 1 and not plan.moe_tp else []
    if plan.moe_tp and plan.dp > 1:
        bad.append(REPLICATED_GROUPS)
    if plan.ep > 1 and not plan.moe_tp:
        bad.append(
            "ep > 1: SGLang's --ep-size splits the experts inside the TP group (ep-size <= "
            "tp-size), while the plan's expert groups sit beside tp as separate replicas; "
            "not the priced layout"
        )
    if spec.eplb_redundant and not (plan.moe_tp and _split(plan)[1] > 1):
        bad.append(EPLB_NEEDS_EP.format(flag="SGLang's --ep-num-redundant-experts",
                                        what="--ep-size > 1"))  # fmt: skip
    fmt, notes, fbad = _formats("sglang", spec.precision, spec)
    moe, mbad = _moe_argv("sglang", spec)
    fbad += mbad
    total = plan.world_size
    if total > spec.gpus_per_node and total % spec.gpus_per_node:
        bad.append(f"a server of {total} devices does not fill whole nodes of {spec.gpus_per_node}")
    if bad or fbad:
        return _refuse("sglang", role, bad + fbad)
    argv = [a.format(model=spec.model) for a in eng["command"]]
    argv += [f["tp"], str(plan.tp * plan.cp * plan.ep)]
    if plan.moe_tp:  # attention TP tp-size/dp-size, experts EP ep-size x TP tp-size/ep-size
        if plan.ep > 1:
            argv += [f["dp_attention"], f["dp"], str(plan.ep)]
        if _split(plan)[1] > 1:
            argv += [f["ep"], str(_split(plan)[1])]
    if spec.eplb_redundant:
        argv += [f["eplb"], f["eplb_redundant"], str(spec.eplb_redundant)]
    if plan.cp > 1:
        argv += [f["attn_cp"], str(plan.cp), f["prefill_cp"]]
        notes.append(
            f"differs from the priced plan: SGLang keeps the MLP tensor-parallel over all "
            f"{plan.tp * plan.cp} ranks of the TP group (weights split tp*cp ways, not "
            "replicated over the cp groups)"
        )
    if plan.pp > 1:
        argv += [f["pp"], str(plan.pp)]
    if plan.dp > 1:
        argv += [f["dp"], str(plan.dp)]
    argv += [*running_argv("sglang", role, plan, batch), f["max_len"], str(spec.max_len)]
    argv += budget_argv("sglang", spec)
    argv += [f["memory_fraction"], f"{spec.memory_fraction:g}", *fmt, *moe, f["port"], str(port)]
    if role in ("prefill", "decode"):
        argv += [f["disaggregation"], role, f["transfer_backend"], eng["transfer_backend"]]
        if role == "prefill":
            argv += [f["bootstrap_port"], str(eng["ports"]["bootstrap"])]
    if plan.comm_overlap == "full":
        notes.append("comm_overlap full is the engine's own scheduling; no argument")
    nodes = max(1, total // spec.gpus_per_node) if total > spec.gpus_per_node else 1
    if nodes == 1:
        return [LaunchConfig("sglang", role, argv, notes)]
    addr = f"{HEAD_IP}:{eng['ports']['dist_init']}"
    return [
        LaunchConfig(
            "sglang",
            role,
            argv + [f["nnodes"], str(nodes), f["node_rank"], str(k), f["dist_init_addr"], addr],
            notes,
            node=k,
        )
        for k in range(nodes)
    ]


def trtllm(plan: Plan, batch: int, spec: ExportSpec, role: str, port: int) -> list[LaunchConfig]:
    """``trtllm-serve`` of one replica (run ``dp·ep`` of them) with its extra options YAML."""
    f, eng = ENGINES["trtllm"]["flags"], ENGINES["trtllm"]
    bad = [KEEP] if plan.moe_tp_mode == "keep" and plan.tp > 1 and not plan.moe_tp else []
    if plan.moe_tp and plan.tp > 1 and plan.ep > 1:
        bad.append(
            f"attention tp={plan.tp} x dp={plan.ep}: TensorRT-LLM's attention DP "
            "(enable_attention_dp) runs attention TP1 over all tp_size ranks"
        )
    if plan.ep > 1 and not plan.moe_tp:
        bad.append(
            "ep > 1: trtllm-serve's --ep_size splits experts inside the TP group; the "
            "plan's expert groups beside tp are not mapped"
        )
    if plan.cp > 1:
        bad.append(
            "cp > 1: which trtllm-serve cp_config type (cp_type) matches the priced "
            "context parallelism was not verified for this version"
        )
    if role in ("prefill", "decode"):
        bad.append(
            "disaggregated serving (trtllm-serve disaggregated with a cache "
            "transceiver per server) is not written by this version"
        )
    size = plan.tp * plan.pp * (plan.ep if plan.moe_tp else 1)
    if size > spec.gpus_per_node:
        bad.append(
            f"a replica of {size} devices spans nodes: trtllm-serve then needs an MPI "
            "or Slurm launch (trtllm-llmapi-launch), not written here"
        )
    bad += _trtllm_eplb_refusals(plan, spec)
    vendor = engine_refusal("trtllm", spec.chip)
    bad += [vendor] if vendor else []
    _, notes, fbad = _formats("trtllm", spec.precision, spec)
    kernel, mbad = moe_kernel_of("trtllm", spec)
    fbad += mbad
    if bad or fbad:
        return _refuse("trtllm", role, bad + fbad)
    yaml = ["kv_cache_config:", f"  free_gpu_memory_fraction: {spec.memory_fraction:g}"]
    if spec.kv_precision in eng["precision"]["kv_cache_dtype"]:
        yaml.append(f"  dtype: {eng['precision']['kv_cache_dtype'][spec.kv_precision]}")
    replicas = plan.dp * (1 if plan.moe_tp else plan.ep)
    if plan.moe_tp:
        yaml += _trtllm_moe(plan, eng["llm_args"])
    if spec.eplb_redundant or kernel is not None:
        yaml.append("moe_config:")
    if kernel is not None:  # MoeConfig.backend: the priced MoE kernel
        yaml.append(f"  backend: {eng['moe_kernel'][kernel]}")
    if spec.eplb_redundant:  # MoeConfig.load_balancer (MoeLoadBalancerConfig.num_slots)
        slots = spec.num_experts + spec.eplb_redundant
        yaml += ["  load_balancer:", f"    num_slots: {slots}"]
    argv = [a.format(model=spec.model) for a in eng["command"]]
    argv += [f["tp"], str(size // plan.pp), f["pp"], str(plan.pp)]
    argv += [
        *running_argv("trtllm", role, plan, batch),  # per replica, or per attention-DP rank
        f["max_len"],
        str(spec.max_len),
        *budget_argv("trtllm", spec),
    ]
    argv += [f["memory_fraction"], f"{spec.memory_fraction:g}", f["port"], str(port)]
    argv += [f["extra"], eng["extra_file"]]
    notes.append(
        "--kv_cache_free_gpu_memory_fraction is the share of the memory left after "
        "the weights, not of the whole device (vLLM's --gpu-memory-utilization)"
    )
    if replicas > 1:
        notes.append(
            f"run {replicas} instances of this command ({size} GPUs each) behind one "
            "load balancer: the plan's replicas"
        )
    return [LaunchConfig("trtllm", role, argv, notes, files={eng["extra_file"]: "\n".join(yaml)})]


def _trtllm_moe(plan: Plan, keys: dict[str, str]) -> list[str]:
    """The options YAML lines of an explicit MoE split (attention DP when ``ep`` > 1)."""
    mt, me = _split(plan)
    lines = [f"{keys['attention_dp']}: true"] if plan.ep > 1 else []
    return lines + [f"{keys['moe_ep']}: {me}", f"{keys['moe_tp']}: {mt}"]


def _trtllm_eplb_refusals(plan: Plan, spec: ExportSpec) -> list[str]:
    """Why TensorRT-LLM's MoE load balancer cannot carry ``spec.eplb_redundant`` (empty: it can)."""
    if not spec.eplb_redundant:
        return []
    if not (plan.moe_tp and _split(plan)[1] > 1):
        return [EPLB_NEEDS_EP.format(flag="TensorRT-LLM's moe_load_balancer",
                                     what="moe_expert_parallel_size > 1")]  # fmt: skip
    if not spec.num_experts:
        return ["eplb_redundant: TensorRT-LLM's load_balancer num_slots is experts + redundant "
                "experts, and the model's expert count was not given"]  # fmt: skip
    return []


BUILDERS = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm}
