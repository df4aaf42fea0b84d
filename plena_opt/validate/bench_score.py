"""``validate --measurements RESULT.json`` with a deployment: each benchmark run priced as run.

The deployment is what the runs measured: a plan key as ``search`` prints it (``--deployment
KEY``) with ``--model``, ``--gpu`` and ``--engine``, or the ``deployment.json`` that ``plena-opt
export --out-dir DIR`` writes beside the launch scripts (``--bundle DIR``; a flag given too fills
or overrides its field). Each run (``bench_results``) brings its load and mean lengths: a closed
loop (``max_concurrency`` with ``request_rate`` inf) is priced as a benchmark run of
``completed / max_concurrency`` prompts per client (``serving.benchmark_run``: start burst and
steady state), a Poisson rate without a concurrency cap by ``serving.open_loop``. A
disaggregated key (``xP:KEY+yD:KEY``) is priced as its pools (``serving.disaggregated``: prefill
queue, KV transfer, decode batch). A run or plan the product cannot express (a rate with a cap,
every prompt at once, pipeline or context parallelism, MoE or non-TP pool workers) is refused
with the reason, as the CSV rows are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError
from plena_opt.validate.bench_results import BenchRun, read_bench_runs
from plena_opt.validate.serving_rows import (
    AMD_CHIPS,
    NVIDIA_ONLY_ENGINES,
    SYSTEM_ALIASES,
    SYSTEMS,
    Deployment,
    Refused,
    catalog_model,
)
from plena_opt.validate.serving_score import (
    RowResult,
    ServingReport,
    price_disaggregated,
)

if TYPE_CHECKING:
    from plena_opt.serving import StepModel

DEPLOYMENT_FILE = "deployment.json"  # written by plena_opt.export.files.write_deployment


@dataclass(frozen=True)
class BenchTarget:
    """The deployment the runs measured: plan key, catalog model and its id, AIConfigurator
    system name, engine, the weight format (None: the key's suffix, else the checkpoint's), and
    what an export bundle's launch files set: the KV-cache format (None: the engine's default)
    and the memory setting (share of GPU memory; None: the engine's default)."""

    key: str
    model: str
    model_id: str
    system: str
    engine: str
    precision: str | None = None
    kv_precision: str | None = None
    memory_fraction: float | None = None


def target_from_flags(key: str | None, model: str | None, gpu: str | None, engine: str | None,
                      precision: str | None = None, kv_precision: str | None = None,
                      memory_fraction: float | None = None) -> BenchTarget:  # fmt: skip
    """Check and resolve the names given; a missing or unknown one raises naming its flag."""
    from plena_opt.serving import ENGINES

    for name, v in (("deployment", key), ("model", model), ("gpu", gpu), ("engine", engine)):
        if not v:
            raise PlenaInputError(
                name,
                f"a benchmark result file needs --{name} (or --bundle "
                "DIR holding the deployment.json plena-opt export wrote)",
            )
    from plena_opt.export import parse_deployment_key, parse_point_key

    try:
        parse_deployment_key(key) or parse_point_key(key)  # type: ignore[arg-type]
    except PlenaInputError as exc:
        raise PlenaInputError("deployment", f"--deployment: {exc}") from None
    resolved = catalog_model(model)  # type: ignore[arg-type]
    if resolved is None:
        from plena_opt.models import list_models

        raise PlenaInputError(
            "model",
            f"--model {model!r}: not a catalog model nor a Hugging "
            f"Face id it prices (known: {', '.join(list_models())})",
        )
    name, hf = resolved
    chips = {v[0]: k for k, v in SYSTEMS.items()}
    gpu = SYSTEM_ALIASES.get(gpu, gpu)  # type: ignore[arg-type]
    system = gpu if gpu in SYSTEMS else chips.get(gpu)  # type: ignore[arg-type]
    if system is None:
        raise PlenaInputError("gpu", f"--gpu {gpu!r} is not modelled (known: "
                              f"{', '.join([*SYSTEMS, *chips])})")  # fmt: skip
    if engine not in ENGINES:
        raise PlenaInputError("engine", f"--engine {engine!r}: one of {', '.join(ENGINES)}")
    if engine in NVIDIA_ONLY_ENGINES and SYSTEMS[system][0] in AMD_CHIPS:
        raise PlenaInputError("engine", f"--engine {engine} on --gpu {gpu}: TensorRT-LLM runs "
                              "on NVIDIA GPUs only (no ROCm build)")  # fmt: skip
    return BenchTarget(key, name, hf, system, engine, precision,  # type: ignore[arg-type]
                       kv_precision, memory_fraction)  # fmt: skip


def target_from_bundle(folder: str, model: str | None = None, gpu: str | None = None,
                       engine: str | None = None) -> BenchTarget:  # fmt: skip
    """The deployment ``plena-opt export`` described in ``folder/deployment.json``."""
    from plena_opt.jsonio import load_document

    path = Path(folder) / DEPLOYMENT_FILE
    if not path.is_file():
        raise PlenaInputError("bundle", f"--bundle {folder}: no {DEPLOYMENT_FILE} there "
                              "(written by plena-opt export --out-dir)")  # fmt: skip
    doc = load_document(path.read_bytes(), "bundle", f"{DEPLOYMENT_FILE} in {folder!r}")
    if not isinstance(doc, dict) or not isinstance(doc.get("key"), str):
        raise PlenaInputError(
            "bundle", f"--bundle {path.parent}: {DEPLOYMENT_FILE} field 'key' is missing"
        )
    engines, kv, fraction = _bundle_fields(path, doc)
    if engine is None and len(engines) == 1:
        engine = engines[0]
    if engine is not None and engines and engine not in engines:
        raise PlenaInputError("engine", f"--engine {engine}: the bundle runs {', '.join(engines)}")
    try:
        return target_from_flags(doc["key"], model or doc.get("catalog_model") or doc.get("model"),
                                 gpu or doc.get("gpu"), engine, doc.get("precision"), kv,
                                 fraction)  # fmt: skip
    except PlenaInputError as exc:  # a field of the file, not a flag the user gave
        field = {"deployment": "key", "gpu": None if gpu else "gpu",
                 "model": None if model else "catalog_model"}.get(exc.field)  # fmt: skip
        if field is None:
            raise
        said = exc.rule.removeprefix(f"--{exc.field}: ").removeprefix(f"--{exc.field} ")
        raise PlenaInputError("bundle", _where(path) + f"field {field!r}: {said}") from None


def _where(path: Path) -> str:
    return f"--bundle {path.parent}: {DEPLOYMENT_FILE} "


def _bundle_fields(path: Path, doc: dict) -> tuple[list[str], str | None, float | None]:
    """(engines, KV format, memory setting) of a deployment.json, each checked naming it."""
    from plena_opt.chip.precision import FORMATS

    engines = doc.get("engines") or []
    if not isinstance(engines, list) or not all(isinstance(e, str) for e in engines):
        raise PlenaInputError("bundle", _where(path) + "field 'engines' must be a list of engine "
                              f"names, got {str(engines)[:32]!r}")  # fmt: skip
    kv, fraction = doc.get("kv_precision"), doc.get("memory_fraction")
    if kv is not None and kv not in FORMATS:
        raise PlenaInputError("bundle", _where(path) + "field 'kv_precision' must be one of "
                              f"{', '.join(FORMATS)}, got {str(kv)[:16]!r}")  # fmt: skip
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, int | float)
                                 or not 0 < fraction <= 1):  # fmt: skip
        raise PlenaInputError("bundle", _where(path) + "field 'memory_fraction' must be in (0, 1], "
                              f"got {str(fraction)[:16]!r}")  # fmt: skip
    return engines, kv, fraction


def score_bench(path: Path, target: BenchTarget,
                host_step_seconds: dict[str, float] | None = None) -> ServingReport:  # fmt: skip
    """Price every run of the result file at ``path`` on ``target``."""
    report, steps = ServingReport(), {}
    runs = read_bench_runs(path)
    for run in runs:
        if run.engine is not None and run.engine != target.engine:
            raise PlenaInputError("engine", f"--engine {target.engine}: run {run.id} was measured "
                                  f"with backend {run.engine!r}, a client of {run.engine} only "
                                  f"(give --engine {run.engine})")  # fmt: skip
    for run in runs:
        report.rows.append(_price(run, target, steps, host_step_seconds or {}))
    return report


def _price(run: BenchRun, t: BenchTarget, steps: dict, host: dict[str, float]) -> RowResult:
    from plena_opt.serving import OpenLoopWorkload, ServingWorkload, benchmark_run, open_loop

    base = dict(id=run.id, system=t.system, backend=t.engine, model=t.model_id, mode="agg",
                concurrency=str(run.concurrency or ""), isl=str(run.input_len),
                osl=str(run.output_len), measured_ttft_ms=run.ttft_ms,
                measured_tpot_ms=run.tpot_ms)  # fmt: skip
    try:
        d = deployment(t, run)
        if d.pools is not None:
            base["mode"] = "disagg"
            rate = run.request_rate_per_s if run.concurrency is None else None
            return price_disaggregated(d, host, base, run.range_ratio, rate, pool_caps(t),
                                       t.memory_fraction)  # fmt: skip
        step = launch_step(d, t, steps, host).with_spread(run.range_ratio)
        if run.concurrency is not None:
            per_client = max(1, round(run.completed / run.concurrency))
            wl = ServingWorkload(run.concurrency, run.input_len, run.output_len, run.range_ratio)
            m = benchmark_run(step, wl, per_client)
        else:
            m = open_loop(
                step, OpenLoopWorkload(run.request_rate_per_s, run.input_len, run.output_len)
            )  # type: ignore[arg-type]
    except (Refused, PlenaInputError) as exc:
        return RowResult(status="refused", reason=str(exc), **base)  # type: ignore[arg-type]
    return RowResult(
        status="priced",
        reason="",
        ttft_ms=1e3 * m.ttft_seconds,
        tpot_ms=1e3 * m.tpot_seconds,
        e2e_ms=1e3 * m.e2e_seconds,
        output_tps_per_gpu=m.output_tps_per_gpu,
        **base,
    )  # type: ignore[arg-type]


def deployment(t: BenchTarget, run: BenchRun) -> Deployment:
    """The resolved deployment of one run; raises ``Refused`` with the reason."""
    from plena_opt.chip import load_chip
    from plena_opt.export import parse_deployment_key, parse_point_key
    from plena_opt.models import load_model

    if run.concurrency is not None and run.request_rate_per_s is not None:
        raise Refused("a request rate with a concurrency cap is not modelled")
    if run.concurrency is None and run.request_rate_per_s is None:
        raise Refused("max_concurrency null and request_rate inf: every prompt sent at once")
    if run.concurrency is None and run.unmodelled:  # a closed loop sends on completions
        raise Refused(run.unmodelled)
    pools = parse_deployment_key(t.key)
    if pools is not None:
        return _disaggregated(t, run, pools)
    plan, _, key_precision = parse_point_key(t.key)
    for dim in ("pp", "dp", "cp"):
        if getattr(plan, dim) != 1:
            raise Refused(f"{dim} {getattr(plan, dim)}: only one engine instance of TP/EP is "
                          "modelled under load")  # fmt: skip
    if plan.ep != 1 and not load_model(t.model).num_experts:
        raise Refused("expert parallelism on a dense model")
    chip_name, noc, per_node = SYSTEMS[t.system]
    fmt = t.precision or key_precision or load_model(t.model_id or t.model).checkpoint_precision
    if fmt not in load_chip(chip_name).formats:  # type: ignore[union-attr]
        raise Refused(f"{chip_name} has no {fmt} tensor cores")
    gpus = plan.world_size
    if gpus > per_node and gpus % per_node:
        raise Refused(f"{gpus} GPUs is not a whole number of {per_node}-GPU nodes")
    noc_name = noc if gpus <= per_node else f"{noc}@{gpus // per_node}"
    return Deployment(chip_name, noc_name, gpus, t.model, fmt, plan.tp, plan.ep,
                      plan.moe_tp_mode, t.engine, run.input_len, run.output_len,
                      run.concurrency or 1, moe_tp=plan.moe_tp, kv_precision=_kv(t),
                      trt_kv_fraction=False if t.memory_fraction is None
                      else t.memory_fraction)  # fmt: skip


def _kv(t: BenchTarget) -> str | None:
    """The KV-cache format the engine ran: the bundle's, else the one its checkpoint declares
    where the engine's default inherits it (``models.checkpoint``, as ``estimate`` prices it)."""
    from plena_opt.models.checkpoint import checkpoint_kv_format, engine_inherits_kv

    if t.kv_precision is not None:
        return t.kv_precision
    kv = checkpoint_kv_format(t.model_id)
    return kv if kv is not None and engine_inherits_kv(t.engine, None) else None


def launch_step(d: Deployment, t: BenchTarget, steps: dict, host: dict[str, float]) -> StepModel:
    """The step model of ``d`` (``serving_score.step_model``) under what its launch files set:
    the key's batch as the engine's running cap per replica (``export.engines.running_cap``:
    --max-num-seqs, --max-running-requests, --max_batch_size, the cap estimate and search price)
    and the KV pool at the bundle's memory setting; memoised in ``steps``."""
    from plena_opt.estimate import Plan
    from plena_opt.export import parse_point_key
    from plena_opt.export.engines import running_cap
    from plena_opt.serving import StepModel
    from plena_opt.validate.serving_score import _parts, kv_capped, weights_fit

    key = ("launch", d, t.key, t.memory_fraction, host.get(d.engine, 0.0))
    if key not in steps:
        model, noc, memory, chip, wl, eng = _parts(d, host.get(d.engine, 0.0))
        plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
        weights_fit((model, noc, memory, chip, wl), plan, eng)
        cap = running_cap(d.engine, plan, parse_point_key(t.key)[1])
        if eng.max_running is None or cap < eng.max_running:
            eng = replace(eng, max_running=cap)
        eng = kv_capped(eng, (model, noc, memory, chip, wl), plan, d.trt_kv_fraction,
                        t.memory_fraction)  # fmt: skip
        steps[key] = StepModel.from_problem(model, noc, memory, chip, wl, plan, eng)
    return steps[key]


def _disaggregated(t: BenchTarget, run: BenchRun, pools: tuple[int, str, int, str]) -> Deployment:
    """A ``xP:KEY+yD:KEY`` bundle's run: its pools as ``serving.disaggregated`` prices them
    (dense models, one attention-TP plan per worker, both pools in one format)."""
    from plena_opt.chip import load_chip
    from plena_opt.export import parse_point_key
    from plena_opt.models import load_model

    if load_model(t.model).num_experts:
        raise Refused("disaggregated MoE pools under load are not modelled (issue 24)")
    x, pkey, y, dkey = pools
    (pplan, _, pfmt), (dplan, _, dfmt) = parse_point_key(pkey), parse_point_key(dkey)
    for role, plan in (("prefill", pplan), ("decode", dplan)):
        for dim in ("ep", "pp", "dp", "cp"):
            if getattr(plan, dim) != 1:
                raise Refused(f"{role} pool: {dim} {getattr(plan, dim)}: a pool worker is one "
                              "TP engine instance under load")  # fmt: skip
    if pfmt != dfmt:
        raise Refused(f"prefill pool in {pfmt}, decode pool in {dfmt}: one format per bundle")
    chip_name, noc, per_node = SYSTEMS[t.system]
    fmt = t.precision or pfmt or load_model(t.model_id or t.model).checkpoint_precision
    if fmt not in load_chip(chip_name).formats:  # type: ignore[union-attr]
        raise Refused(f"{chip_name} has no {fmt} tensor cores")
    gpus = x * pplan.tp + y * dplan.tp
    if gpus > per_node and gpus % per_node:
        raise Refused(f"{gpus} GPUs is not a whole number of {per_node}-GPU nodes")
    noc_name = noc if gpus <= per_node else f"{noc}@{gpus // per_node}"
    return Deployment(chip_name, noc_name, gpus, t.model, fmt, dplan.tp, 1, "replace", t.engine,
                      run.input_len, run.output_len, run.concurrency or 1,
                      pools=(x, pplan.tp, y, dplan.tp), kv_precision=_kv(t))  # fmt: skip


def pool_caps(t: BenchTarget) -> tuple[int | None, int]:
    """(prefill, decode) running caps one worker of each pool of ``t``'s ``xP:KEY+yD:KEY`` runs
    as the launch files write them: the prefill server none (the engine's default, its steps
    bounded by the token budget; ``export.caps.running_argv``), the decode server its key's
    batch (``export.engines.running_cap``: ``--max-num-seqs``, ``--max-running-requests``)."""
    from plena_opt.export import parse_deployment_key, parse_point_key
    from plena_opt.export.engines import running_cap

    dkey = parse_deployment_key(t.key)[3]  # type: ignore[index]
    return None, running_cap(t.engine, *parse_point_key(dkey)[:2])
