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

from plena_opt.errors import PlenaInputError

# AIConfigurator system name -> (GPU chip profile, one-node NoC profile, GPUs per node)
SYSTEMS = {
    "h100_sxm": ("h100-sxm", "hgx-h100x8", 8),
    "h200_sxm": ("h200-sxm", "hgx-h200x8", 8),
    "b200_sxm": ("b200", "hgx-b200x8", 8),
    "b300_sxm": ("b300", "hgx-b300x8", 8),
    # Grace-Blackwell racks: one 72-GPU NVLink domain per rack, racks joined by InfiniBand
    "gb200": ("gb200", "gb200-nvl72", 72),
    "gb300": ("gb300", "gb300-nvl72", 72),
}
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


# published quant mode -> product format ("fp8_block": fp8 with 128x128 block scales, priced on
# the chip's fitted fp8_block GEMM / fused-MoE curves: Workload.fp8_block_gemm / _moe)
QUANT_MODES = {"": "bf16", "bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4",
               "w4a16_mxfp4": "mxfp4", "int4_wo": "int4"}  # fmt: skip
FOUR_BIT = frozenset({"fp4", "mxfp4", "int4"})
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
    async_scheduling: bool = False  # the engine ran overlap (async) scheduling beyond its default
    generated_batch: int | None = None  # AIConfigurator wrote its engine config (``aic_deploy``)
    batch_wait: tuple[int, float] | None = None  # TensorRT-LLM batch waiting of the recipe
    recv_interval: int = 1  # SGLang --scheduler-recv-interval of the recipe
    marlin_moe: bool = False  # W4A16 experts on vLLM's Marlin MoE (the recipe note below)


class Refused(Exception):
    """A row the product cannot price as deployed; the message is the reason."""


def read_rows(path: Path) -> list[ServingRow]:
    """The rows of a results CSV; bad files raise naming ``measurements``."""
    if not path.is_file():
        raise PlenaInputError("measurements", f"no such file: {path}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise PlenaInputError("measurements", f"file is over {MAX_FILE_BYTES >> 20} MiB")
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

    system = row.get("system")
    if system not in SYSTEMS:
        raise Refused(f"system {system!r} is not modelled (known: {', '.join(SYSTEMS)})")
    engine = row.get("backend")
    if engine not in ENGINES:
        raise Refused(f"engine {engine!r} is not modelled (known: {', '.join(ENGINES)})")
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
    tp, ep, mode, gpus, moe_tp = _split(row, model)
    _check_id_sizes(row, gpus)
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
                   kv_precision=kv_cache_format(row, system, engine, model),
                   async_scheduling=ix_vllm,
                   marlin_moe=ix_vllm and _weight_only(fmt, chip))  # fmt: skip
    d = replace(d, batch_wait=trtllm_batch_wait(row, system, d),
                recv_interval=sglang_recv_interval(row, system, d))  # fmt: skip
    return _with_block(row, d)


def _weight_only(fmt: str, chip_name: str) -> bool:
    """True when ``chip_name`` runs ``fmt`` weight-only (W4A16: no tensor cores of that width)."""
    from plena_opt.chip import load_chip
    from plena_opt.chip.precision import is_weight_only

    chip = load_chip(chip_name)
    return is_weight_only(fmt, chip.formats[fmt])  # type: ignore[union-attr]


# The KV-cache format of an InferenceX run is its launch recipe's (SemiAnalysisAI/InferenceX,
# benchmarks/*.sh): every recipe of the file's (system, engine, model) groups stores an fp8 KV
# cache except gpt-oss on H100 (gptoss_fp4_h100.sh sets no kv-cache-dtype: vLLM's "auto" keeps
# the bf16 of the checkpoint's activations). TRT-LLM: ``kv_cache_config: dtype: fp8``
# (70b_fp8_b200_trt_slurm.sh, 70b_fp4_b200_trt_slurm.sh, gptoss_fp4_b200_trt.sh,
# dsr1_fp4_b200_trt.sh, dsr1_fp8_b200_trt.sh); vLLM ``kv-cache-dtype: fp8`` (70b_fp8_h100_slurm.sh,
# 70b_fp8_b200_docker.sh, 70b_fp4_b200_docker.sh, gptoss_fp4_b200.sh); SGLang ``--kv-cache-dtype
# fp8_e4m3`` (dsr1_fp4_b200.sh, dsr1_fp8_b200.sh). An InferenceX row is one whose id starts with
# its dump date (``2026_04_06_…``). Not fitted: on the shipped file it moved B200 TPOT MAPE from
# 35.0 to 30.0 % (every B200 engine and model group closer) and H100 vLLM Llama-3.1-70B's from
# 5.5 to 9.3 % (bias +0.5 to -6.9 %: that fp8-KV decode is slower than the HBM bytes say).
INFERENCEX_ID = re.compile(r"^\d{4}_\d\d_\d\d_")
INFERENCEX_BF16_KV = frozenset({("h100_sxm", "vllm", "gpt-oss-120b")})
# The InferenceX vLLM recipes also run ``async-scheduling: true`` (the same scripts' config.yaml;
# gptoss_fp4_h100.sh too), which vLLM's default leaves off: such a row's engine overlaps
# scheduling as SGLang and TensorRT-LLM do by default (``EngineModel.overlap_schedule``).
# The InferenceX vLLM recipes that run 4-bit experts weight-only (gptoss_fp4_h100.sh,
# gptoss_fp4_h200.sh) export ``VLLM_MXFP4_USE_MARLIN=1``: their experts run vLLM's Marlin MoE,
# not the Triton backend the kernel table's ``vllm_mxfp4_moe`` rows timed (``Deployment
# .marlin_moe``; ``chip.gpu.perf.MARLIN_MOE_NOTE``). Not fitted: on the shipped file it moved
# gpt-oss-120b H100 vLLM TPOT MAPE from 23.8 to 11.9 % (bias +20.4 to -11.1 %; c512 rows aside).
# a ``kv_cache_dtype`` column, when present, names the row's KV format (engine spellings)
KV_CACHE_DTYPES = {"": None, "auto": None, "bf16": None, "fp8": "fp8", "fp8_e4m3": "fp8"}


def kv_cache_format(row: ServingRow, system: str, engine: str, model: str) -> str | None:
    """The KV-cache format of ``row`` (None: bf16): its ``kv_cache_dtype`` column, else an
    InferenceX row's recipe format (``INFERENCEX_ID``), else bf16."""
    if "kv_cache_dtype" in row.fields:
        v = row.get("kv_cache_dtype")
        if v not in KV_CACHE_DTYPES:
            raise Refused(f"kv_cache_dtype {v!r} is not modelled (known: "
                          f"{', '.join(k for k in KV_CACHE_DTYPES if k)})")  # fmt: skip
        return KV_CACHE_DTYPES[v]
    if INFERENCEX_ID.match(row.id) and (system, engine, model) not in INFERENCEX_BF16_KV:
        return "fp8"
    return None


# The InferenceX TensorRT-LLM recipes of Llama-3.1-70B (benchmarks/70b_fp8_b200_trt_slurm.sh,
# 70b_fp4_b200_trt_slurm.sh, 70b_fp8_h200_trt_slurm.sh) write ``batch_wait_timeout_iters: 20``
# and ``batch_wait_max_tokens_ratio: 0.9`` when ISL = OSL = 1024 and TP < 8 ("will improve the
# performance, by default they are all zeros"): waiting prompts are held back up to 20 steps
# (``serving.steady.batch_wait_steps``). Not fitted; on the shipped file those 72 B200 rows were
# under-predicted 2.5-3x (TP 1-4; the TP 8 rows, without the setting, within ~10 %).
TRTLLM_BATCH_WAIT = {("llama-3.1-70b", 1024, 1024): (20, 0.9)}
TRTLLM_BATCH_WAIT_SYSTEMS = frozenset({"b200_sxm", "h200_sxm"})  # the recipes' systems
TRTLLM_BATCH_WAIT_MAX_TP = 7  # ``${TP} -lt 8``


def trtllm_batch_wait(row: ServingRow, system: str, d: Deployment) -> tuple[int, float] | None:
    """(``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``) an InferenceX TensorRT-LLM
    recipe ran ``row`` with (``TRTLLM_BATCH_WAIT``), else None (the engine default: off)."""
    if d.engine != "trtllm" or not INFERENCEX_ID.match(row.id) or d.tp > TRTLLM_BATCH_WAIT_MAX_TP:
        return None
    if system not in TRTLLM_BATCH_WAIT_SYSTEMS:
        return None
    return TRTLLM_BATCH_WAIT.get((d.model, d.input_len, d.output_len))


# The InferenceX SGLang recipes of DeepSeek-R1 on B200 (benchmarks/dsr1_fp4_b200.sh,
# dsr1_fp8_b200.sh) pass ``--scheduler-recv-interval`` 10, or 30 from a concurrency of 16 (fp8 at
# TP 4: always 10): the scheduler reads arrivals every that many decode steps. Not fitted.
SGLANG_RECV_INTERVAL_SYSTEMS = frozenset({"b200_sxm"})
SGLANG_RECV_INTERVAL_MODELS = frozenset({"deepseek-v3"})  # DeepSeek-R1 (ARCHITECTURE_TWINS)


def sglang_recv_interval(row: ServingRow, system: str, d: Deployment) -> int:
    """The ``--scheduler-recv-interval`` an InferenceX SGLang recipe ran ``row`` with, else 1."""
    if d.engine != "sglang" or not INFERENCEX_ID.match(row.id):
        return 1
    if system not in SGLANG_RECV_INTERVAL_SYSTEMS or d.model not in SGLANG_RECV_INTERVAL_MODELS:
        return 1
    if d.precision == "fp8" and d.tp * d.ep == 4:
        return 10
    return 30 if d.concurrency >= 16 else 10


# InferenceX row ids end with the worker's GPUs and expert-parallel size, e.g.
# ``..._agg_1024x1024_c64_tp8_ep8_937`` (``_tp8_0_ep8_0_`` in some dumps; ``epnone`` when unset).
ID_SIZES = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+|none)(?:_0)?_\d+$")


def _check_id_sizes(row: ServingRow, gpus: int) -> None:
    """Refuse an agg row whose id names another GPU count than its size fields (the file's
    README: "a few rows' id and size fields disagree"). On the shipped file these are 107
    DeepSeek-R1 B200 rows whose fields say 16 or 64 GPUs (tp 64, or attention DP 64, x MoE 8x8)
    where the id says tp4/tp8 on one node; some repeat, to the last digit, the TPOT of a row
    with consistent fields. Neither reading is priced: the row does not say which is true."""
    m = ID_SIZES.search(row.id)
    if m is None:
        return
    if int(m.group(1)) != gpus:
        dp = row.get("attention_dp_size") or "1"
        raise Refused(f"size fields disagree with the row id: id tp{m.group(1)} (one worker of "
                      f"{m.group(1)} GPUs) vs tp_size {row.get('tp_size')} x attention_dp_size "
                      f"{dp} = {gpus} GPUs")  # fmt: skip


def _format(row: ServingRow, chip_name: str, model_name: str) -> str:
    from plena_opt.chip import load_chip
    from plena_opt.models import load_model

    model, chip = load_model(model_name), load_chip(chip_name)
    gemm = row.get("gemm_quant_mode")
    modes = [gemm] + ([row.get("moe_quant_mode")] if model.num_experts else [])
    fmts = []
    for i, m in enumerate(modes):
        if m not in QUANT_MODES:
            raise Refused(f"quant mode {m!r} is not modelled (known: {', '.join(QUANT_MODES)})")
        kind = "gemm" if i == 0 else "moe"
        if m == "fp8_block" and "fp8_block" not in getattr(chip, kind, {}):
            raise Refused(f"fp8_block {kind} on {chip.name}: no {kind}.fp8_block curve (no "
                          f"{kind} kernel table with fp8_block rows for this chip)")  # fmt: skip
        fmts.append(QUANT_MODES[m])
    if len(set(fmts)) > 1:
        raise Refused(f"GEMM and MoE formats differ ({' vs '.join(modes)}): one format per plan")
    return _on_chip(fmts[0], modes[0], chip, model)


def _with_block(row: ServingRow, d: Deployment) -> Deployment:
    """``d`` with the row's fp8_block GEMM / MoE modes."""
    gemm = row.get("gemm_quant_mode") == "fp8_block"
    moe = row.get("moe_quant_mode") == "fp8_block"
    return replace(d, fp8_block_gemm=gemm, fp8_block_moe=moe) if gemm or moe else d


def _on_chip(fmt: str, mode: str, chip, model) -> str:
    """The format ``chip`` runs the row's ``fmt`` at. A 4-bit label on a GPU without FP4 tensor
    cores (AIConfigurator writes ``nvfp4`` for gpt-oss on H100) is the checkpoint's own 4-bit
    format run weight-only (W4A16) where the chip runs that format so; else refused."""
    from plena_opt.chip.precision import is_weight_only

    ckpt = model.checkpoint_precision
    if fmt not in chip.formats and fmt in FOUR_BIT and ckpt in FOUR_BIT:
        if ckpt in chip.formats and is_weight_only(ckpt, chip.formats[ckpt]):
            fmt = ckpt  # e.g. openai/gpt-oss-120b: quantization_config mxfp4 -> W4A16 MXFP4
    if fmt not in chip.formats:
        raise Refused(f"{chip.name} has no {fmt} support (it runs {', '.join(chip.formats)}); "
                      f"the checkpoint ships {ckpt} ({model.checkpoint_source})")  # fmt: skip
    if mode.startswith("w4a16") and not is_weight_only(fmt, chip.formats[fmt]):
        raise Refused(f"{mode} on {chip.name}, which runs {fmt} on its "
                      f"{chip.formats[fmt]} tensor cores, is not modelled")  # fmt: skip
    return fmt


def _split(row: ServingRow, model_name: str) -> tuple[int, int, str, int, int]:
    """(plan tp, plan ep, moe_tp_mode, GPUs, plan moe_tp) of the row's attention and MoE sizes:
    a shorthand where one gives the row's MoE split, else the explicit ``moe_tp``."""
    from plena_opt.estimate.shard import moe_parallel
    from plena_opt.models import load_model

    tp, pp, dp = _int(row, "tp_size"), _int(row, "pp_size", 1), _int(row, "attention_dp_size", 1)
    if pp != 1:
        raise Refused("pipeline-parallel rows are not priced by validate yet (estimate and search "
                      "price PP under load: serving.pipeline)")  # fmt: skip
    experts = load_model(model_name).num_experts
    if not experts:
        if dp != 1:
            raise Refused("attention data parallelism on a dense model is not modelled")
        return tp, 1, "replace", tp, 0
    mtp, mep = _int(row, "moe_tp_size"), _int(row, "moe_ep_size")
    if mtp * mep != tp * dp:
        raise Refused(f"size fields disagree: moe {mtp}x{mep} GPUs vs attention {tp}x{dp}")
    for mode in ("keep", "replace"):
        try:
            if moe_parallel(tp, dp, experts, mode) == (mtp, mep):
                return tp, dp, mode, tp * dp, 0
        except PlenaInputError:
            continue
    if experts % mep:
        raise Refused(f"{experts} experts do not split over moe_ep_size {mep}")
    return tp, dp, "replace", tp * dp, mtp


def _disaggregated(row: ServingRow, system: str, engine: str, model: str) -> Deployment:
    """A disagg row with its pools: dense models, one attention-TP plan per worker."""
    from plena_opt.models import load_model

    if load_model(model).num_experts:
        raise Refused("disaggregated MoE pools under load are not modelled (issue 24)")
    pools = []
    for role in ("prefill", "decode"):
        if _int(row, f"{role}_pp_size", 1) != 1 or _int(row, f"{role}_attention_dp_size", 1) != 1:
            raise Refused(f"{role} pool: pipeline or attention DP workers are not modelled")
        pools += [_int(row, f"{role}_num_workers"), _int(row, f"{role}_tp_size")]
    chip, noc, per_node = SYSTEMS[system]
    gpus = pools[0] * pools[1] + pools[2] * pools[3]
    if gpus > per_node and gpus % per_node:
        raise Refused(f"{gpus} GPUs is not a whole number of {per_node}-GPU nodes")
    noc_name = noc if gpus <= per_node else f"{noc}@{gpus // per_node}"
    d = Deployment(chip, noc_name, gpus, model, _format(row, chip, model), pools[3], 1,
                   "replace", engine, _int(row, "isl"), _int(row, "osl"),
                   _int(row, "concurrency"), pools=tuple(pools))  # type: ignore[arg-type]  # fmt: skip
    return _with_block(row, d)
