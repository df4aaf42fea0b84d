"""``validate --measurements``: price each row of a serving results file under its workload.

Each priced row runs a benchmark run (``serving.benchmark_run``: start burst, then the
closed-loop steady state) of its engine's default scheduler on its plan, with step times from the
evaluator (MoE routing ``power_law``, as the fig09 scorecard); a fixed-length row runs the
replay of its run from the start burst (``serving.benchmark.fixed_length_run``), and an undated
row the step budget AIConfigurator's generator wrote (``validate.aic_deploy``).
Rows whose measured columns are empty are predicted only.
The summary gives MAPE of TTFT and TPOT overall and by GPU, engine, model, mode and concurrency
band. No constant is fitted on these rows (the engines' host time per step is 0). A vLLM or
SGLang row runs at most the requests its KV pool holds at the engine's default memory setting
(``kv_capped``, ``serving.kv_admission``); the clients beyond them queue.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from plena_opt.serving.error_bars import band_of
from plena_opt.validate.aic_deploy import generated_batch, generated_engine
from plena_opt.validate.serving_rows import Deployment, Refused, read_rows, resolve

if TYPE_CHECKING:
    from plena_opt.estimate import Plan
    from plena_opt.serving import EngineModel, ServingMetrics, StepModel
    from plena_opt.validate.serving_rows import ServingRow

# The InferenceX rows' prompt and output lengths are drawn, not fixed: InferenceX runs its
# benchmark with RANDOM_RANGE_RATIO 0.8 (InferenceMAX README, "Benchmark Client Configuration":
# ``--dataset-name random --random-range-ratio $RANDOM_RANGE_RATIO``). Drawn lengths keep the
# clients from running in lock step (``serving.steady``), so those rows are priced in the spread
# regime, at the mean lengths the row names. A row of the file carries its InferenceX run date in
# ``measured_on`` (the file's README: the provenance column reduced to concurrency, measured_on,
# engine_image). The undated rows are NVIDIA's gap-analysis grids (isl 1k-4k x osl 128-512 on
# H100), run with fixed lengths as aiperf / genai-perf runs are written (``--synthetic-input-
# tokens-stddev 0 --output-tokens-stddev 0``): priced at range ratio 0 (lock step). Evidence, not
# a fit: on the 84 undated SGLang rows the lock-step wave of a prefill-first engine gives TTFT /
# TPOT MAPE 18 / 6 % against 84 / 56 % when priced as drawn, and on the 169 dated SGLang rows the
# wave is worse than the spread regime (127 % against 53 % TTFT). A ``random_range_ratio`` column,
# when present, gives the ratio of each row.
ROWS_RANGE_RATIO = 0.8
FIXED_LENGTHS_RANGE_RATIO = 0.0
GROUPS = ("system", "backend", "model", "mode", "band")


@dataclass(frozen=True)
class RowResult:
    """One row: its status, the reason if refused, and predicted/measured ms where known."""

    id: str
    status: str  # "priced" | "refused"
    reason: str
    system: str
    backend: str
    model: str
    mode: str
    concurrency: str
    isl: str = ""
    osl: str = ""
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    output_tps_per_gpu: float | None = None
    measured_ttft_ms: float | None = None
    measured_tpot_ms: float | None = None

    @property
    def band(self) -> str:
        return band_of(int(self.concurrency) if self.concurrency.isdigit() else 0)


@dataclass
class ServingReport:
    rows: list[RowResult] = field(default_factory=list)

    def summary(self) -> dict:
        """Counts, priced fraction, and MAPE (%) of TTFT and TPOT overall and per group."""
        priced = [r for r in self.rows if r.status == "priced"]
        out: dict = {"rows": len(self.rows), "priced": len(priced),
                     "priced_fraction": len(priced) / len(self.rows) if self.rows else 0.0,
                     "refused": len(self.rows) - len(priced), "overall": _mape(priced)}  # fmt: skip
        for g in GROUPS:
            keys = sorted({getattr(r, g) for r in priced})
            out[f"by_{g}"] = {k: _mape([r for r in priced if getattr(r, g) == k]) for k in keys}
        reasons: dict[str, int] = {}
        for r in self.rows:
            if r.status == "refused":
                reasons[r.reason] = reasons.get(r.reason, 0) + 1
        out["refusals"] = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
        out["tpot_ranking"] = tpot_ranking(priced)
        out["tpot_ranking_same_concurrency"] = tpot_ranking(priced, same_concurrency=True)
        return out

    def to_dict(self) -> dict:
        return {"rows": [asdict(r) for r in self.rows], "summary": self.summary()}


def _mape(rows: list[RowResult]) -> dict:
    """MAPE (%) and signed bias (%) of TTFT and TPOT over rows with a measurement."""
    out: dict = {"rows": len(rows)}
    for name in ("ttft", "tpot"):
        pairs = [(getattr(r, f"{name}_ms"), getattr(r, f"measured_{name}_ms")) for r in rows]
        errs = [p / m - 1 for p, m in pairs if p is not None and m]
        out[f"{name}_points"] = len(errs)
        out[f"{name}_mape"] = 100 * sum(map(abs, errs)) / len(errs) if errs else None
        out[f"{name}_bias"] = 100 * sum(errs) / len(errs) if errs else None
    return out


def _ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (None when either side has no spread)."""
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sx = sum((a - mx) ** 2 for a in rx) ** 0.5
    sy = sum((b - my) ** 2 for b in ry) ** 0.5
    if not sx or not sy:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True)) / (sx * sy)


def tpot_ranking(rows: list[RowResult], min_rows: int = 3, same_concurrency: bool = False) -> dict:
    """Within each (model, GPU, engine, lengths[, concurrency]) group of at least ``min_rows``
    measured rows: Spearman ρ between predicted and measured TPOT (how the configurations rank;
    with ``same_concurrency`` only the plans and formats at one concurrency are ranked)."""
    groups: dict[tuple, list[RowResult]] = {}
    for r in rows:
        if r.tpot_ms is not None and r.measured_tpot_ms:
            key = (r.model, r.system, r.backend, r.isl, r.osl)
            groups.setdefault(key + ((r.concurrency,) if same_concurrency else ()), []).append(r)
    rhos = [spearman([r.tpot_ms for r in g], [r.measured_tpot_ms for r in g])  # type: ignore[misc]
            for g in groups.values() if len(g) >= min_rows]  # fmt: skip
    rhos = [x for x in rhos if x is not None]
    return {"groups": len(rhos), "mean_rho": sum(rhos) / len(rhos) if rhos else None,
            "groups_rho_at_least_0_9": sum(x >= 0.9 for x in rhos)}  # fmt: skip


def shipped_serving_csv() -> Path:
    """The serving measurements the package ships (a copy of ../shared's)."""
    base = resources.files("plena_opt.validate") / "data" / "serving"
    return Path(str(base / "measured_serving_h100_b200.csv"))


def score_serving(path: Path, host_step_seconds: dict[str, float] | None = None) -> ServingReport:
    """Price every row of ``path``; ``host_step_seconds``: per-engine host time per step (s)."""
    report, steps = ServingReport(), {}
    for row in read_rows(path):
        report.rows.append(_price_row(row, steps, host_step_seconds or {}))
    return report


def _price_row(row: ServingRow, steps: dict, host: dict[str, float]) -> RowResult:
    from plena_opt.errors import PlenaInputError
    from plena_opt.serving import ServingWorkload
    from plena_opt.serving.benchmark import fixed_length_run

    base = dict(id=row.id, system=row.get("system"), backend=row.get("backend"),
                model=row.get("model_path"), mode=row.get("mode"),
                concurrency=row.get("concurrency"), isl=row.get("isl"), osl=row.get("osl"),
                measured_ttft_ms=row.measured_ms("ttft_ms"),
                measured_tpot_ms=row.measured_ms("tpot_ms"))  # fmt: skip
    try:
        d = replace(resolve(row), generated_batch=generated_batch(row))
        if d.pools is not None:
            return price_disaggregated(d, host, base, ROWS_RANGE_RATIO)
        rr = range_ratio_of(row)
        if d.pp > 1:  # one of the pipeline's in-flight batches and its clients (serving.pipeline)
            step, clients = pipeline_load(d, steps, host)
        else:
            step, clients = cached_step(d, steps, host), d.concurrency
        m: ServingMetrics = fixed_length_run(step.with_spread(rr),
                                             ServingWorkload(clients, d.input_len, d.output_len,
                                                             rr))  # fmt: skip
    except (Refused, PlenaInputError) as exc:
        return RowResult(status="refused", reason=str(exc), **base)  # type: ignore[arg-type]
    return RowResult(status="priced", reason="", ttft_ms=1e3 * m.ttft_seconds,
                     tpot_ms=1e3 * m.tpot_seconds, e2e_ms=1e3 * m.e2e_seconds,
                     output_tps_per_gpu=m.output_tps_per_gpu, **base)  # type: ignore[arg-type]  # fmt: skip


def range_ratio_of(row: ServingRow) -> float:
    """The row's length range ratio: its ``random_range_ratio`` column, else 0.8 for a dated
    (InferenceX) row and 0 (fixed lengths) for an undated one (``ROWS_RANGE_RATIO`` comment)."""
    v = row.get("random_range_ratio")
    if v:
        try:
            r = float(v)
        except ValueError:
            raise Refused(f"random_range_ratio {v!r} is not a number") from None
        if not 0 <= r < 1:
            raise Refused(f"random_range_ratio {v!r} is not in [0, 1)")
        return r
    return ROWS_RANGE_RATIO if row.get("measured_on") else FIXED_LENGTHS_RANGE_RATIO


def price_disaggregated(d: Deployment, host: dict[str, float], base: dict, range_ratio: float,
                        request_rate: float | None = None,
                        caps: tuple[int | None, int] | None = None,
                        memory_fraction: float | None = None) -> RowResult:  # fmt: skip
    """A disaggregated run: the steady state of its pools (``serving.disaggregated``) under
    ``d.concurrency`` closed-loop clients, or Poisson ``request_rate`` (requests/s) when given;
    ``caps``: (prefill, decode) running caps the launch files write per worker (None: the
    engine's default), ``memory_fraction`` their memory setting (None: the engine's defaults)."""
    from plena_opt.serving.disaggregated import Pools, disaggregated_under_load
    from plena_opt.serving.pools import pool_steps
    from plena_opt.validate.serving_pools import launch_capped, moe_pool_steps

    pools = Pools(*d.pools)  # type: ignore[misc]  # an MoE pool's "tp": a worker's GPUs
    parts = _parts(d, host.get(d.engine, 0.0))
    pool_weights_fit(d, parts)
    if d.pool_plans is not None:  # MoE workers: attention TP x DP and their MoE split
        prefill, decode, transfer = moe_pool_steps(d, parts)
    else:
        prefill, decode, transfer = pool_steps(*parts[:5], pools, parts[5], memory_fraction)
    if caps is not None:
        prefill = launch_capped(prefill, caps[0], "prefill")
        decode = launch_capped(decode, caps[1], "decode")
    lengths = (d.input_len, d.output_len, range_ratio)
    if request_rate is not None:
        m = disaggregated_under_load(prefill, decode, transfer, pools, lengths, None, request_rate)
    else:
        m = disaggregated_under_load(prefill, decode, transfer, pools, lengths, d.concurrency)
    return RowResult(status="priced", reason="", ttft_ms=1e3 * m.ttft_seconds,
                     tpot_ms=1e3 * m.tpot_seconds, e2e_ms=1e3 * m.e2e_seconds,
                     output_tps_per_gpu=m.output_tps_per_gpu, **base)  # type: ignore[arg-type]  # fmt: skip


def cached_step(d: Deployment, steps: dict, host: dict[str, float]) -> StepModel:
    """``step_model(d)``, memoised in ``steps`` by what it depends on (not the concurrency)."""
    key = (d.chip, d.noc, d.gpus, d.model, d.precision, d.tp, d.ep, d.moe_tp_mode, d.engine,
           d.input_len, d.output_len, d.moe_tp, d.fp8_block_gemm, d.fp8_block_moe,
           d.kv_precision, d.async_scheduling, d.generated_batch, d.batch_wait,
           d.recv_interval, d.marlin_moe, d.trtllm_gen_moe, d.mxfp8_moe, d.bf16_moe,
           d.eplb_redundant, d.pp, d.adp_balance, d.max_num_tokens, d.trt_kv_fraction,
           d.bf16_attention, d.fp8_static_input)  # fmt: skip
    if key not in steps:
        steps[key] = step_model(d, host.get(d.engine, 0.0))
    return steps[key]


def pipeline_load(d: Deployment, steps: dict, host: dict[str, float]) -> tuple[StepModel, int]:
    """(step model of one in-flight batch, its clients) of a pipeline-parallel worker under
    ``d.concurrency`` clients: ``min(pp, C)`` batches in flight, ``ceil(C / k)`` clients each
    (``serving.pipeline.in_flight_load``, as ``estimate --pp`` prices a plan under load)."""
    from plena_opt.estimate import Plan
    from plena_opt.serving.pipeline import in_flight_load

    key = ("pp", d, host.get(d.engine, 0.0))
    if key not in steps:
        model, noc, memory, chip, wl, eng = _parts(d, host.get(d.engine, 0.0))
        plan = Plan(tp=d.tp, ep=d.ep, pp=d.pp, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
        weights_fit((model, noc, memory, chip, wl), plan, eng)
        step, clients, _, _ = in_flight_load((model, noc, memory, chip), wl, plan, eng,
                                             d.concurrency, None)  # fmt: skip
        steps[key] = (step, clients)
    return steps[key]


def step_model(d: Deployment, host_step_seconds: float = 0.0) -> StepModel:
    """The evaluator's step costs of a resolved deployment under its engine's scheduler."""
    from plena_opt.estimate import Plan
    from plena_opt.serving import StepModel

    model, noc, memory, chip, wl, eng = _parts(d, host_step_seconds)
    plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
    weights_fit((model, noc, memory, chip, wl), plan, eng)
    eng = kv_capped(eng, (model, noc, memory, chip, wl), plan, d.trt_kv_fraction)
    return StepModel.from_problem(model, noc, memory, chip, wl, plan, eng)  # type: ignore[arg-type]


def weights_fit(parts: tuple, plan: Plan, eng: EngineModel) -> None:
    """Refuse a worker whose weights alone (per device of its fullest stage, as ``kv_cap``
    counts them) exceed the device memory the engine sees (``engine_device_memory``: the
    CUDA-reported total): no engine starts it, so no figure is priced for it. Only the weights
    are checked, not activations or the KV pool, which a deployment that ran may have set
    otherwise than the engine's default (``kv_running_cap``)."""
    from plena_opt.serving.kv_admission import engine_device_memory, kv_cap

    model, noc, memory, chip, wl = parts
    cap = kv_cap(model, noc, memory, chip, wl, plan, eng.name, eng.budget_tokens)  # type: ignore[arg-type]
    if cap is None:
        return
    device = engine_device_memory(chip, float(memory.capacity_bytes))
    if cap.weight_bytes > device:
        raise Refused(f"the weights do not fit: {cap.weight_bytes / 1e9:.1f} GB per GPU of a "
                      f"{plan.tp * plan.ep * plan.pp}-GPU worker against the {device / 1e9:.1f} "
                      f"GB of one {chip.name}")  # fmt: skip


def pool_weights_fit(d: Deployment, parts: tuple) -> None:
    """``weights_fit`` for a prefill and a decode worker of a disaggregated ``d`` (each on its
    own first devices, as ``serving.pools`` / ``validate.serving_pools`` price them)."""
    from plena_opt.estimate import Plan
    from plena_opt.estimate.disaggregated import sub_noc

    model, noc, memory, chip, wl, eng = parts
    assert d.pools is not None
    plans = d.pool_plans or ((d.pools[1], 1, "replace", 0, 0), (d.pools[3], 1, "replace", 0, 0))
    for tp, dp, mode, moe_tp, redundant in plans:
        sub = (model, sub_noc(noc, tp * dp), memory, chip, replace(wl, eplb_redundant=redundant))
        weights_fit(sub, Plan(tp=tp, ep=dp, moe_tp_mode=mode, moe_tp=moe_tp), eng)


def kv_capped(eng: EngineModel, parts: tuple, plan: object,
              trt_fraction: float | None | bool = False,
              fraction: float | None = None) -> EngineModel:  # fmt: skip
    """``eng`` with ``max_running`` no larger than the requests its KV pool holds at once on
    ``plan`` at the engine's default memory setting (``serving.kv_admission.admitted``, the rule
    every command applies; ``parts``: model, NoC, memory, chip, Workload); engines outside
    ``KV_CAPPED_ENGINES`` unchanged, except TensorRT-LLM where its recipe's KV fraction is known
    (``trt_fraction``: None the engine default, False unknown; ``trtllm_kv_fraction``);
    ``fraction``: the memory setting of vLLM's and SGLang's pool (None: the engine default)."""
    from plena_opt.serving.kv_admission import admitted, binds, kv_cap

    if eng.name == "trtllm" and trt_fraction is not False:
        cap = kv_cap(*parts, plan, "trtllm", eng.budget_tokens, trt_fraction)  # type: ignore[arg-type, misc]
        return replace(eng, max_running=cap.requests) if binds(cap, eng) else eng  # type: ignore[union-attr]
    return admitted(eng, parts, plan, fraction)[0]  # type: ignore[arg-type]


def _parts(d: Deployment, host_step_seconds: float) -> tuple:
    """(model, NoC of the row's GPUs, memory, chip, estimate Workload, engine) of a row."""
    from deepstack import load_noc_profile
    from deepstack.gpu_nodes import first_devices

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model
    from plena_opt.serving import engine_model
    from plena_opt.serving.calibration import calibrated
    from plena_opt.serving.vllm_budget import vllm_batch_defaults

    chip, model = load_chip(d.chip), load_model(d.model)
    noc = load_noc_profile(d.noc)
    per_node = noc.levels[2].size  # the L1 switch: one node's / rack's GPUs
    if d.gpus < noc.num_devices and (d.gpus <= per_node or d.gpus % per_node == 0):
        noc = first_devices(noc, d.gpus)  # else disaggregated pools on part of the last rack
    routing = "power_law" if model.num_experts else "balanced"
    wl = Workload(batch_size=1, input_seq_len=d.input_len, output_seq_len=d.output_len,
                  precision=d.precision, routing=routing, fp8_block_gemm=d.fp8_block_gemm,
                  fp8_block_moe=d.fp8_block_moe, kv_precision=d.kv_precision,
                  marlin_moe=d.marlin_moe, trtllm_gen_moe=d.trtllm_gen_moe, mxfp8_moe=d.mxfp8_moe,
                  bf16_moe=d.bf16_moe, engine="",  # the kernel: with_formats' flags alone
                  eplb_redundant=d.eplb_redundant, bf16_attention=d.bf16_attention,
                  fp8_static_input=d.fp8_static_input)  # fmt: skip
    eng = engine_model(d.engine, float(chip.hbm.capacity_bytes.value), host_step_seconds)  # type: ignore[union-attr]
    eng = calibrated(eng, d.chip)  # a --calibration overlay in force
    if d.async_scheduling is not None:  # vLLM: the row's recipe flag or version default
        eng = replace(eng, overlap_schedule=d.async_scheduling)
    if d.vllm_large_tier is not None:  # vLLM: the row's release's default budget
        hbm = float(chip.hbm.capacity_bytes.value)  # type: ignore[union-attr]
        eng = replace(eng, budget_tokens=vllm_batch_defaults(hbm, d.vllm_large_tier)[0])
    if d.batch_wait is not None:  # the recipe's TensorRT-LLM batch waiting
        eng = replace(
            eng, batch_wait_iters=d.batch_wait[0], batch_wait_tokens_ratio=d.batch_wait[1]
        )
    if d.max_num_tokens is not None:  # the recipe's TensorRT-LLM step budget
        eng = replace(eng, budget_tokens=d.max_num_tokens)
    if d.adp_balance is not None:  # the recipe's TensorRT-LLM attention-DP balancing
        eng = replace(eng, adp_ranks=d.ep, adp_timeout_iters=d.adp_balance[0],
                      adp_batching_wait_iters=d.adp_balance[1])  # fmt: skip
    if d.recv_interval > 1:  # the recipe's SGLang receive interval
        eng = replace(eng, recv_interval_steps=d.recv_interval)
    if d.generated_batch is not None:  # the step budget AIConfigurator's generator wrote
        eng = generated_engine(eng, d.generated_batch, d.input_len)
    return model, noc, gpu_memory(chip), chip, wl, eng
