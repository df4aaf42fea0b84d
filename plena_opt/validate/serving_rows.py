"""Rows of a serving benchmark results file, resolved to what the product prices, or refused.

The schema is that of ``data/serving/measured_serving_h100_b200.csv`` (AIConfigurator's silicon
sample columns; see ``../shared/data/validation/serving/README.md``). A row is priced only as it
was deployed: its system, engine, checkpoint, formats and parallel split must each map to the
product exactly, else the row is refused with the reason (never priced as a neighbour).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, replace
from pathlib import Path

from plena_opt.chip.gpu.vendor import AMD_CHIPS, NVIDIA_ONLY_ENGINES
from plena_opt.errors import PlenaInputError
from plena_opt.validate.serving_kv import KvRefused, kv_cache_format
from plena_opt.validate.serving_mtp import speculative_run
from plena_opt.validate.serving_recipes import (
    INFERENCEX_ID,
    marlin_recipe,
    sglang_recv_interval,
    trtllm_adp_balance,
    trtllm_batch_wait,
    trtllm_gen_moe,
    trtllm_kv_fraction,
    trtllm_max_num_tokens,
    vllm_async_scheduling,
    vllm_large_tier_row,
    with_formats,
)

# AIConfigurator system name -> (GPU chip profile, one-node NoC profile, GPUs per node)
SYSTEMS = {
    "h100_sxm": ("h100-sxm", "hgx-h100x8", 8),
    "h200_sxm": ("h200-sxm", "hgx-h200x8", 8),
    "b200_sxm": ("b200", "hgx-b200x8", 8),
    "b300_sxm": ("b300", "hgx-b300x8", 8),
    # Grace-Blackwell racks: one 72-GPU NVLink domain per rack, racks joined by InfiniBand
    "gb200": ("gb200", "gb200-nvl72", 72),
    "gb300": ("gb300", "gb300-nvl72", 72),
    # AMD Instinct platforms: 8 OAM GPUs fully connected by Infinity Fabric (mi325x-x8: 7 xGMI
    # links per GPU, AMD MI325X datasheet, cited in the profile), nodes joined by 400G NICs
    "mi325x": ("mi325x", "mi325x-x8", 8),
    "mi300x": ("mi300x", "mi300x-x8", 8),
}
# Other spellings of a system, accepted only where one product is meant: "gb200_sxm" /
# "gb300_sxm" (AIConfigurator's <gpu>_sxm pattern) name the same Grace-Blackwell superchip GPUs
# "gb200" / "gb300" name (one NVL72 NVLink domain, as "gb200" is priced); "mi325x_sxm" /
# "mi300x_sxm" follow the same pattern for AMD parts that ship only as the 8-GPU OAM platform
# (AMD Instinct MI325X / MI300X platform: 8 OAM modules on one baseboard). "b200" / "h100"
# without "_sxm" are not accepted: PCIe / NVL parts of those names differ in clocks and links.
SYSTEM_ALIASES = {"gb200_sxm": "gb200", "gb300_sxm": "gb300", "mi325x_sxm": "mi325x",
                  "mi300x_sxm": "mi300x"}  # fmt: skip
# engines that run on one vendor's GPUs only: TensorRT-LLM is built on CUDA (NVIDIA GPUs only);
# vLLM and SGLang ship ROCm builds for AMD Instinct (their ROCm docker images). On AMD they run
# the scheduler defaults of ``serving.engines`` (chosen there by HBM size, as the engines' own
# code does on any GPU) and the same host time per step as on NVIDIA parts: 0 s, or a user's
# ``--calibration`` overlay entry for (engine, "mi325x"). No ROCm host-time measurement ships
# with the project, so no other value is assumed; the MI325X kernel efficiencies are H200's
# (mi325x.json says so at each number).
# (``chip.gpu.vendor``: NVIDIA_ONLY_ENGINES, AMD_CHIPS)


def system_of(name: str) -> str:
    """The SYSTEMS key of a row's ``system`` (an alias resolved); raises ``Refused``."""
    system = SYSTEM_ALIASES.get(name, name)
    if system not in SYSTEMS:
        raise Refused(f"system {name!r} is not modelled (known: "
                      f"{', '.join([*SYSTEMS, *SYSTEM_ALIASES])})")  # fmt: skip
    return system


# Hugging Face ids resolve through the catalog (``plena_opt.models.catalog.resolve_model_id``:
# hf_id / hf_aliases, quantised variants such as nvidia/…-NVFP4, -Instruct checkpoints). The
# validation tables group DeepSeek-R1 and DeepSeek-V3.1 rows as deepseek-v3: their config.json
# has DeepSeek-V3's architecture fields (tests/models/test_models_catalog_added.py checks it).
ARCHITECTURE_TWINS = {"deepseek-r1": "deepseek-v3", "deepseek-v3.1": "deepseek-v3"}


def catalog_model(model: str) -> tuple[str, str] | None:
    """``(catalog entry priced, Hugging Face id)`` of a Hugging Face id or catalog name."""
    from plena_opt.models.catalog import resolve_model_id

    found = resolve_model_id(model)
    if found is None:
        return None
    return ARCHITECTURE_TWINS.get(found.name, found.name), found.hf_id


MAX_ROWS = 100_000  # rows one file may hold
MAX_FILE_BYTES = 64 << 20


@dataclass(frozen=True)
class ServingRow:
    """One measured (or to-be-predicted) serving run, as the file names it."""

    id: str
    fields: dict[str, str]

    def get(self, name: str) -> str:
        return (self.fields.get(name) or "").strip()

    def measured_ms(self, name: str) -> float | None:
        v = self.get(name)
        return float(v) if v else None


PoolPlan = tuple[int, int, str, int, int]


@dataclass(frozen=True)
class Deployment:
    """A row resolved: chip, NoC, catalog model, format, plan sizes and engine."""

    chip: str
    noc: str
    gpus: int
    model: str
    precision: str
    tp: int
    ep: int
    moe_tp_mode: str
    engine: str
    input_len: int
    output_len: int
    concurrency: int
    moe_tp: int = 0  # an explicit MoE split (``Plan.moe_tp``); 0: ``moe_tp_mode`` says
    # disaggregated rows: (prefill workers, prefill TP, decode workers, decode TP); None: agg
    pools: tuple[int, int, int, int] | None = None
    fp8_block_gemm: bool = False  # the row's GEMMs / experts are fp8_block (Workload fields)
    fp8_block_moe: bool = False
    kv_precision: str | None = None  # the KV-cache format the engine ran (None: bf16)
    # vLLM async scheduling: recipe flag or version default (``serving_recipes``); None: default
    async_scheduling: bool | None = None
    vllm_large_tier: bool | None = None  # vLLM: its release has the >= 160 GiB budget tier
    generated_batch: int | None = None  # AIConfigurator wrote its engine config (``aic_deploy``)
    batch_wait: tuple[int, float] | None = None  # TensorRT-LLM batch waiting of the recipe
    recv_interval: int = 1  # SGLang --scheduler-recv-interval of the recipe
    adp_balance: tuple[int, int] | None = None  # TensorRT-LLM attention-DP balancing of the recipe
    max_num_tokens: int | None = None  # the recipe's TensorRT-LLM step budget (None: default)
    # the recipe's TensorRT-LLM KV fraction (None: the default; False: admission not known)
    trt_kv_fraction: float | None | bool = False
    marlin_moe: bool = False  # W4A16 experts on vLLM's Marlin MoE (the recipe note below)
    trtllm_gen_moe: bool = False  # fp8 block experts on TensorRT-LLM-gen (``trtllm_gen_moe``)
    mxfp8_moe: bool = False  # 4-bit experts x MXFP8 activations (``serving_recipes.mxfp8_moe``)
    bf16_moe: bool = False  # 4-bit experts x bf16 activations (``serving_recipes.moe_kernel``)
    # a disaggregated MoE row: (tp, attention dp, moe_tp_mode, moe_tp, EPLB replicas) of a
    # prefill and a decode worker (``pools``: each pool's workers and GPUs per worker); None: TP
    pool_plans: tuple[PoolPlan, PoolPlan] | None = None
    pp: int = 1  # pipeline stages of an aggregated worker (``gpus`` counts them)
    eplb_redundant: int = 0  # redundant expert replicas an uneven EP size needs (eplb_redundant)
    bf16_attention: str = ""  # MLA projections the checkpoint keeps in bf16 (Workload field)
    fp8_static_input: bool = False  # static fp8 activation scales (Workload field)


class Refused(Exception):
    """A row the product cannot price as deployed; the message is the reason."""


def read_rows(path: Path) -> list[ServingRow]:
    """The rows of a results CSV; bad files raise naming ``measurements``."""
    if not path.is_file():
        raise PlenaInputError("measurements", f"no such file: {path}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise PlenaInputError("measurements", f"file is over {MAX_FILE_BYTES >> 20} MiB")
    if not path.read_bytes().strip():
        raise PlenaInputError("measurements", f"{path.name!r} is empty (no header row)")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"id", "backend", "model_path", "system", "mode", "isl", "osl", "concurrency"}
        missing = need - set(reader.fieldnames or ())
        if missing:
            raise PlenaInputError("measurements", "missing columns: " + ", ".join(sorted(missing)))
        rows = []
        for i, r in enumerate(reader):
            if i >= MAX_ROWS:
                raise PlenaInputError("measurements", f"more than {MAX_ROWS} rows")
            rows.append(
                ServingRow(r.get("id") or f"row{i + 1}", {k: v or "" for k, v in r.items()})
            )
    return rows


def _int(row: ServingRow, name: str, default: int | None = None) -> int:
    v = row.get(name)
    if not v:
        if default is None:
            raise Refused(f"{name} is empty")
        return default
    try:
        n = int(float(v))
    except ValueError:
        raise Refused(f"{name} {v!r} is not a number") from None
    if n < 1 or n != float(v):
        raise Refused(f"{name} {v!r} is not a positive integer")
    return n


def resolve(row: ServingRow) -> Deployment:
    """The deployment of ``row``; raises ``Refused`` with the reason."""
    from plena_opt.serving import ENGINES

    system = system_of(row.get("system"))
    engine = row.get("backend")
    if engine not in ENGINES:
        raise Refused(f"engine {engine!r} is not modelled (known: {', '.join(ENGINES)})")
    if engine in NVIDIA_ONLY_ENGINES and SYSTEMS[system][0] in AMD_CHIPS:
        raise Refused(f"backend {engine!r} on system {row.get('system')!r}: TensorRT-LLM runs "
                      "on NVIDIA GPUs only (no ROCm build)")  # fmt: skip
    hf = row.get("model_path")
    resolved = catalog_model(hf)
    if resolved is None:
        raise Refused(f"model {hf!r} is not in the catalog")
    if row.get("mode") == "disagg":
        if not row.get("prefill_num_workers") or not row.get("decode_num_workers"):
            raise Refused("deployment not fully specified: disagg row without worker counts")
        return _disaggregated(row, system, engine, resolved[0])
    if row.get("mode") != "agg":
        raise Refused(f"mode {row.get('mode')!r} is not agg or disagg")
    chip, noc, per_node = SYSTEMS[system]
    model = resolved[0]
    fmt = _format(row, chip, model)
    tp, ep, mode, stage_gpus, moe_tp = _split(row, model)
    redundant = eplb_redundant(row, model)
    pp = _int(row, "pp_size", 1)  # pipeline stages of the worker (serving.pipeline prices them)
    gpus = stage_gpus * pp
    _check_id_sizes(row, stage_gpus, gpus)
    conc, batch = _int(row, "concurrency"), row.get("batch_size")
    if batch and conc != _int(row, "batch_size") * _int(row, "attention_dp_size", 1):
        raise Refused(f"deployment not fully specified: concurrency {conc} is not batch_size x "
                      "attention DP of one worker (replicas not recorded)")  # fmt: skip
    if gpus > per_node and gpus % per_node:
        raise Refused(f"{gpus} GPUs is not a whole number of {per_node}-GPU nodes / racks")
    noc_name = noc if gpus <= per_node else f"{noc}@{gpus // per_node}"
    ix_vllm = engine == "vllm" and bool(INFERENCEX_ID.match(row.id))
    d = Deployment(chip, noc_name, gpus, model, fmt, tp, ep, mode, engine,
                   _int(row, "isl"), _int(row, "osl"), conc, moe_tp,
                   kv_precision=_kv_format(row, system, engine, model),
                   async_scheduling=vllm_async_scheduling(row, chip, model, pp),
                   vllm_large_tier=vllm_large_tier_row(row),
                   pp=pp, eplb_redundant=redundant,
                   marlin_moe=marlin_recipe(chip, fmt, ix_vllm, _mxfp4(model), _day(row)),
                   trtllm_gen_moe=trtllm_gen_moe(engine, chip, _int(row, "isl"), conc))  # fmt: skip
    d = replace(d, batch_wait=trtllm_batch_wait(row, system, d),
                recv_interval=sglang_recv_interval(row, system, d),
                adp_balance=trtllm_adp_balance(row, system, d),
                max_num_tokens=trtllm_max_num_tokens(row, system, d),
                trt_kv_fraction=trtllm_kv_fraction(row, system, d))  # fmt: skip
    if why := speculative_run(row, system, d):
        raise Refused(why)
    return with_formats(row, d)


# The InferenceX vLLM recipes that run 4-bit experts weight-only (gptoss_fp4_h100.sh,
# gptoss_fp4_h200.sh) export ``VLLM_MXFP4_USE_MARLIN=1``: their experts run vLLM's Marlin MoE,
# not the Triton backend the kernel table's ``vllm_mxfp4_moe`` rows timed (``Deployment
# .marlin_moe``; ``chip.gpu.perf.MARLIN_MOE_NOTE``). Not fitted: on the shipped file it moved
# gpt-oss-120b H100 vLLM TPOT MAPE from 23.8 to 11.9 % (bias +20.4 to -11.1 %; c512 rows aside).
# InferenceX row ids end with the worker's GPUs and expert-parallel size, e.g.
# ``..._agg_1024x1024_c64_tp8_ep8_937`` (``_tp8_0_ep8_0_`` in some dumps; ``epnone`` when unset).
ID_SIZES = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+|none)(?:_0)?_\d+$")


def _mxfp4(model: str) -> bool:
    """Whether the catalog ``model``'s checkpoint is MXFP4 (gpt-oss)."""
    from plena_opt.models import load_model

    return load_model(model).checkpoint_precision == "mxfp4"


def _day(row: ServingRow) -> str:
    """The ISO day ``row`` was measured: ``measured_on``, else an InferenceX id's dump date."""
    if row.get("measured_on"):
        return row.get("measured_on")
    return row.id[:10].replace("_", "-") if INFERENCEX_ID.match(row.id) else ""


def _check_id_sizes(row: ServingRow, gpus: int, with_stages: int | None = None) -> None:
    """Refuse an agg row whose id names another GPU count than its size fields (the file's
    README: "a few rows' id and size fields disagree"). On the shipped file these are 107
    DeepSeek-R1 B200 rows whose fields say 16 or 64 GPUs (tp 64, or attention DP 64, x MoE 8x8)
    where the id says tp4/tp8 on one node; some repeat, to the last digit, the TPOT of a row
    with consistent fields. Neither reading is priced: the row does not say which is true.
    ``with_stages``: the worker's GPUs with its pipeline stages (an id may count either)."""
    m = ID_SIZES.search(row.id)
    if m is None:
        return
    if int(m.group(1)) not in (gpus, with_stages or gpus):
        dp = row.get("attention_dp_size") or "1"
        raise Refused(f"size fields disagree with the row id: id tp{m.group(1)} (one worker of "
                      f"{m.group(1)} GPUs) vs tp_size {row.get('tp_size')} x attention_dp_size "
                      f"{dp} = {gpus} GPUs")  # fmt: skip


def _kv_format(row: ServingRow, system: str, engine: str, model: str, recipes: bool = True
               ) -> str | None:  # fmt: skip
    """``serving_kv.kv_cache_format``, its refusal as the row's."""
    try:
        return kv_cache_format(row, system, engine, model, recipes)
    except KvRefused as exc:
        raise Refused(str(exc)) from None


def _format(row: ServingRow, chip_name: str, model_name: str) -> str:
    from plena_opt.validate.serving_formats import FormatRefused, row_format

    try:
        return row_format(row, chip_name, model_name)
    except FormatRefused as exc:
        raise Refused(str(exc)) from None


def _split(row: ServingRow, model_name: str, pool: str = "") -> tuple[int, int, str, int, int]:
    """(plan tp, plan ep, moe_tp_mode, GPUs, plan moe_tp) of the row's attention and MoE sizes
    (``pool``: "prefill_" / "decode_" for a disaggregated pool's fields): a shorthand where one
    gives the row's MoE split, else the explicit ``moe_tp``."""
    from plena_opt.estimate.shard import moe_parallel
    from plena_opt.models import load_model

    tp, pp = _int(row, f"{pool}tp_size"), _int(row, f"{pool}pp_size", 1)
    dp = _int(row, f"{pool}attention_dp_size", 1)
    if pp != 1 and pool:
        raise Refused(f"{pool}pp_size {pp}: pipeline-parallel workers of a disaggregated pool are "
                      "not modelled (serving.pools prices TP / EP workers)")  # fmt: skip
    experts = load_model(model_name).num_experts
    if not experts:
        if dp != 1:
            raise Refused(f"{pool}attention_dp_size {dp}: attention data parallelism on a dense "
                          "model is not modelled")  # fmt: skip
        return tp, 1, "replace", tp, 0
    mtp, mep = _int(row, f"{pool}moe_tp_size"), _int(row, f"{pool}moe_ep_size")
    if mtp * mep != tp * dp:
        raise Refused(f"size fields disagree: {pool}moe {mtp}x{mep} GPUs vs attention {tp}x{dp}")
    for mode in ("keep", "replace"):
        try:
            if moe_parallel(tp, dp, experts, mode) == (mtp, mep):
                return tp, dp, mode, tp * dp, 0
        except PlenaInputError:
            continue
    return tp, dp, "replace", tp * dp, mtp


# An expert-parallel size that does not divide the routed experts runs only with redundant expert
# replicas (EPLB: vLLM --enable-eplb num_redundant_experts, SGLang --ep-num-redundant-experts,
# TensorRT-LLM's load balancer num_slots; each needs experts + replicas divisible by the EP
# size, estimate.eplb). A row does not record the replica count: it is priced with the fewest
# the engines accept, (-E) mod EP. For DeepSeek's 256 experts over the 48 decode GPUs LMSYS ran
# SGLang with on GB200 NVL72 (lmsys.org/blog/2025-06-16-gb200-part-1: 12 decode nodes) that is
# 32 replicas, 288 physical experts, 6 per rank; over 72 ranks the same 288 slots TensorRT-LLM's
# wide-EP examples configure (MoeLoadBalancerConfig num_slots). An assumption, not fitted.
def eplb_redundant(row: ServingRow, model_name: str, field: str = "moe_ep_size") -> int:
    """Redundant expert replicas of the row's EP size ``field`` where it does not divide the
    model's experts (a dense model's MoE fields are not read)."""
    from plena_opt.models import load_model

    experts = load_model(model_name).num_experts
    if not experts:
        return 0
    moe_ep = _int(row, field, 1)
    if experts % moe_ep == 0:
        return 0
    if moe_ep > experts:
        raise Refused(f"{field} {moe_ep} is more than the model's {experts} experts")
    return -experts % moe_ep


def _disaggregated(row: ServingRow, system: str, engine: str, model: str) -> Deployment:
    """A disagg row with its pools: per worker, the pool's attention TP x DP and MoE split (the
    aggregated rules, on the ``prefill_*`` / ``decode_*`` fields)."""
    pools: list[int] = []
    plans = []
    for role in ("prefill", "decode"):
        tp, dp, mode, width, moe_tp = _split(row, model, f"{role}_")
        pools += [_int(row, f"{role}_num_workers"), width]
        plans.append((tp, dp, mode, moe_tp, eplb_redundant(row, model, f"{role}_moe_ep_size")))
    chip, noc, per_node = SYSTEMS[system]
    gpus = pools[0] * pools[1] + pools[2] * pools[3]
    # the pools fill the first ``gpus`` devices of whole nodes / racks (``serving.pools``: each
    # worker priced on its own devices, the KV transfer over the whole NoC), so a last node or
    # rack the deployment fills only in part is expressible: e.g. 96 GPUs of two NVL72 racks
    nodes = -(-gpus // per_node)
    noc_name = noc if nodes == 1 else f"{noc}@{nodes}"
    dense = all(p[1:] == (1, "replace", 0, 0) for p in plans)
    # the KV format: the column or the checkpoint's (the InferenceX recipe rule is the
    # aggregated recipes'; a disaggregated row keeps bf16 where neither says)
    kv = _kv_format(row, system, engine, model, recipes=False)
    d = Deployment(chip, noc_name, gpus, model, _format(row, chip, model), pools[3], 1,
                   "replace", engine, _int(row, "isl"), _int(row, "osl"),
                   _int(row, "concurrency"), pools=tuple(pools),  # type: ignore[arg-type]
                   kv_precision=kv,
                   async_scheduling=vllm_async_scheduling(row, chip, model, 1),
                   vllm_large_tier=vllm_large_tier_row(row),
                   pool_plans=None if dense else tuple(plans))  # type: ignore[arg-type]  # fmt: skip
    return with_formats(row, d)
