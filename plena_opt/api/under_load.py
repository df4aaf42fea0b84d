"""Use case: one plan served under load by a serving engine (``estimate --concurrency``).

A closed loop of ``concurrency`` clients (``vllm bench serve --max-concurrency``) or a Poisson
``request_rate`` (``--request-rate``), fixed prompt/output lengths (the problem's workload), run by
the default scheduler of ``engine`` (``plena_opt.serving.engine_model``: chunked-prefill budget,
running cap, CUDA-graph limit, each cited) at the one version those defaults are for. Two models
of the same scheduler: the discrete-event replay (means and p50/p90/p99 of TTFT, TPOT, ITL, E2E
over the requests after the start burst and its echoes) and the steady state (means only; what the
search prices). GPU chips only (no engine targets PLENA chips, ``engine`` is refused there; and
TensorRT-LLM on AMD GPUs). Times in seconds, throughputs in tokens/s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from plena_opt.bounds import MAX_CONCURRENCY, MAX_REPLAY_TOKENS, MAX_REQUEST_RATE
from plena_opt.errors import PlenaInputError
from plena_opt.serving.benchmark import PROMPTS_PER_CLIENT

if TYPE_CHECKING:
    from plena_opt.estimate.plan import Plan
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.serving import ServingMetrics
    from plena_opt.serving.error_bars import ErrorBand

WARMUP_WAVES = 4  # closed loop: the first 4·C requests (start burst and echoes) not measured
OPEN_LOOP_MEASURED = 256  # Poisson: requests measured, after as many warm-up arrivals


@dataclass(frozen=True)
class Stats:
    """Mean and nearest-rank percentiles of one per-request metric (seconds)."""

    mean: float
    p50: float
    p90: float
    p99: float

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True)
class UnderLoad:
    """A plan under a serving workload: the settings priced, the replay's distributions and the
    steady state's means (seconds; ``*_tps*`` tokens/s; ``request_throughput`` requests/s)."""

    engine: str
    engine_version: str
    budget_tokens: int
    max_running: int | None
    cuda_graph_max_batch: int | None
    host_step_seconds: float
    engine_source: str
    concurrency: int | None
    request_rate_per_s: float | None
    input_len: int
    output_len: int
    range_ratio: float
    gpus: int
    replayed_requests: int
    ttft: Stats
    tpot: Stats
    itl: Stats
    e2e: Stats
    output_tps_per_gpu: float
    output_tps_per_user: float
    request_throughput_per_s: float
    steady: ServingMetrics
    # closed loop: mean TTFT of a whole benchmark run of PROMPTS_PER_CLIENT·C requests measured
    # from its start burst (``serving.benchmark_run``; what a bench run's "Mean TTFT" reports)
    run_ttft_seconds: float | None = None
    # the measured spread of the model on the closest group of the shipped serving measurements
    # (``validate.error_bars``); None: no group of that engine
    error_band: ErrorBand | None = None
    # DP replicas of the plan (each an engine of ``gpus`` GPUs, ⌈C/dp⌉ clients or rate/dp): the
    # figures are one replica's (its tokens/s per GPU are the plan's at an even split)
    replicas: int = 1
    attention_dp_imbalance: float | None = None  # ``serving.attention_dp``; None: no such ranks
    # pp stages, batches in flight (``serving.pipeline``): figures of one batch (per GPU: all)
    pp: int = 1
    in_flight_batches: int = 1
    max_running_source: str = "the engine's default"  # api.running_cap

    @property
    def mean_ttft_seconds(self) -> float:
        """The mean TTFT a benchmark reports: the whole run's (closed loop), else the replay's."""
        return self.ttft.mean if self.run_ttft_seconds is None else self.run_ttft_seconds

    def error_bars(self) -> dict[str, Any] | None:
        """Interval of mean TTFT and mean TPOT (s) from the measured error (see ``to_dict``)."""
        b = self.error_band
        if b is None:
            return None
        ttft, tpot = self.mean_ttft_seconds, self.tpot.mean
        return {
            "level": b.level,
            "group": b.group,
            "group_rows": b.rows,
            "ttft_mean_seconds_low": ttft * b.ttft_low,
            "ttft_mean_seconds_high": ttft * b.ttft_high,
            "tpot_mean_seconds_low": tpot * b.tpot_low,
            "tpot_mean_seconds_high": tpot * b.tpot_high,
        }

    def to_dict(self) -> dict[str, Any]:
        """The ``serving_under_load`` document of ``estimate --json`` (SI)."""
        st = self.steady
        return {
            "workload": {
                "kind": "closed_loop" if self.concurrency else "poisson",
                "concurrency": self.concurrency,
                "request_rate_per_s": self.request_rate_per_s,
                "input_seq_len": self.input_len,
                "output_seq_len": self.output_len,
                "range_ratio": self.range_ratio,
            },
            "engine": {
                "name": self.engine,
                "version": self.engine_version,
                "max_num_batched_tokens": self.budget_tokens,
                "max_running_requests": self.max_running,
                "max_running_source": self.max_running_source,
                "cuda_graph_max_batch": self.cuda_graph_max_batch,
                "host_step_seconds": self.host_step_seconds,
                "source": self.engine_source,
            },
            "gpus": self.gpus,
            "replicas": self.replicas,
            "pipeline": {"stages": self.pp, "batches_in_flight": self.in_flight_batches},
            "attention_dp_imbalance": self.attention_dp_imbalance,
            "replay": {
                "requests": self.replayed_requests,
                "ttft_seconds": self.ttft.to_dict(),
                "tpot_seconds": self.tpot.to_dict(),
                "itl_seconds": self.itl.to_dict(),
                "e2e_seconds": self.e2e.to_dict(),
                "output_tps_per_gpu": self.output_tps_per_gpu,
                "output_tps_per_user": self.output_tps_per_user,
                "request_throughput_per_s": self.request_throughput_per_s,
            },
            "benchmark_run": None
            if self.run_ttft_seconds is None
            else {"prompts_per_client": PROMPTS_PER_CLIENT, "ttft_seconds": self.run_ttft_seconds},
            "error_bars": self.error_bars(),
            "steady_state": {
                "ttft_seconds": st.ttft_seconds,
                "tpot_seconds": st.tpot_seconds,
                "itl_seconds": st.tpot_seconds,  # every gap is one step: mean ITL = TPOT
                "e2e_seconds": st.e2e_seconds,
                "output_tps_per_gpu": st.output_tps_per_gpu,
                "output_tps_per_user": st.output_tps_per_user,
                "request_throughput_per_s": st.request_throughput_per_s,
            },
        }

    def to_text(self) -> str:
        """The block ``plena-opt estimate`` prints after the static-batch figures (ms)."""
        graphs = (
            f"up to batch {self.cuda_graph_max_batch}"
            if self.cuda_graph_max_batch
            else "at every batch"
        )
        running = self.max_running or "KV-bound"
        if self.concurrency:
            load = f"closed loop, {self.concurrency} concurrent clients"
        else:
            load = f"Poisson arrivals at {self.request_rate_per_s:g} requests/s"
        st = self.steady
        r = self.range_ratio
        lengths = f"drawn in ±{100 * r:g} %" if r else "fixed lengths"
        after = "after " + ("the start burst and its echoes" if self.concurrency else
                            "as many warm-up arrivals")  # fmt: skip
        rows = [
            ("TTFT", self.ttft, st.ttft_seconds),
            ("TPOT", self.tpot, st.tpot_seconds),
            ("ITL", self.itl, st.tpot_seconds),
            ("E2E", self.e2e, st.e2e_seconds),
        ]
        lines = [
            "",
            f"Under load ({load}, {self.input_len} prompt + {self.output_len} output tokens "
            f"each, {lengths})",
            f"  engine {self.engine} {self.engine_version}: chunked prefill "
            f"{self.budget_tokens} tokens/step, max running {running} ({self.max_running_source}), "
            f"CUDA graphs {graphs}, host {self.host_step_seconds * 1e3:g} ms/step, "
            f"{self.gpus} GPUs"
            + (f" (one of {self.replicas} DP replicas)" if self.replicas > 1 else "")
            + (f"; one of {self.in_flight_batches} batches in flight" * (self.pp > 1)),
            *(f"  {n}" for n in self.engine_source.split("; ") if n.startswith("decode kernels")),
            f"  replay of {self.replayed_requests} requests ({after}):",
            f"  {'':8}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}   steady-state mean",
        ]
        for name, s, mean in rows:
            cells = "".join(f"{1e3 * v:10.1f}" for v in (s.mean, s.p50, s.p90, s.p99))
            lines.append(f"  {name + ' ms':8}{cells}   {1e3 * mean:10.1f}")
        lines.append(
            f"  output tokens/s per GPU {self.output_tps_per_gpu:.1f} (steady "
            f"{st.output_tps_per_gpu:.1f}), per user {self.output_tps_per_user:.1f} (steady "
            f"{st.output_tps_per_user:.1f}); requests/s {self.request_throughput_per_s:.3f} "
            f"(steady {st.request_throughput_per_s:.3f})"
        )
        if self.run_ttft_seconds is not None:
            lines.append(
                f"  a benchmark run of {PROMPTS_PER_CLIENT}×{self.concurrency} requests timed "
                f"from its start burst: mean TTFT {1e3 * self.run_ttft_seconds:.1f} ms"
            )
        if self.attention_dp_imbalance is not None:
            lines.append(
                f"  attention DP: busiest rank's KV {self.attention_dp_imbalance:.3f}x the mean"
            )
        bars = self.error_bars()
        if bars is not None:
            lines.append(
                f"  {100 * bars['level']:g} % interval from measured error (group "
                f"{bars['group']}, {bars['group_rows']} rows): mean TTFT "
                f"{1e3 * bars['ttft_mean_seconds_low']:.1f}–"
                f"{1e3 * bars['ttft_mean_seconds_high']:.1f} ms, mean TPOT "
                f"{1e3 * bars['tpot_mean_seconds_low']:.1f}–"
                f"{1e3 * bars['tpot_mean_seconds_high']:.1f} ms"
            )
        return "\n".join(lines)


def check_load(
    concurrency: int | None, request_rate: float | None, range_ratio: float = 0.0
) -> None:
    """Exactly one of a concurrency (1..MAX_CONCURRENCY) or a rate (0, MAX_REQUEST_RATE]/s;
    a range ratio in [0, 1)."""
    if not 0 <= range_ratio < 1:
        raise PlenaInputError(
            "range_ratio", f"--range-ratio must be at least 0 and below 1, got {range_ratio!r}"
        )
    from plena_opt.bounds import check_count

    if concurrency is not None and request_rate is not None:
        raise PlenaInputError(
            "request_rate",
            "give --concurrency or --request-rate, not both "
            "(a rate with a concurrency cap is not modelled)",
        )
    if concurrency is None and request_rate is None:
        msg = "serving under load needs --concurrency or --request-rate"
        raise PlenaInputError("concurrency", msg)
    if concurrency is not None:
        check_count(concurrency, "concurrency", "--concurrency", 1, MAX_CONCURRENCY)
    if request_rate is not None and not 0 < request_rate <= MAX_REQUEST_RATE:
        raise PlenaInputError(
            "request_rate",
            f"--request-rate must be above 0 and at most "
            f"{MAX_REQUEST_RATE:,.0f} requests/s, got {request_rate!r}",
        )


def serve_under_load(
    problem: EvaluatorInputs,
    plan: Plan,
    engine: str = "vllm",
    concurrency: int | None = None,
    request_rate: float | None = None,
    engine_version: str | None = None,
    range_ratio: float = 0.0,
    batch: int | None = None,
    memory_fraction: float | None = None,
) -> UnderLoad:
    """``plan`` of ``problem`` (a GPU chip on a NoC) under the workload, priced by ``engine``'s
    scheduler: replay and steady state. ``range_ratio``: 0 fixed lengths, else each request's
    lengths drawn uniformly within ±ratio of the workload's (the replay draws them; the steady
    state uses the means). ``batch``: the plan's global batch, exported as the engine's running
    cap, under the KV cap of the pool at ``memory_fraction`` (``api.running_cap``; None: the
    exported default). Bad input raises naming the field."""
    from plena_opt.api.moe_kernel import engine_inputs
    from plena_opt.api.running_cap import check_memory_fraction, plan_engine
    from plena_opt.serving.error_bars import band_of, load_table, lookup
    from plena_opt.serving.pipeline import check_plan, in_flight_load

    check_load(concurrency, request_rate, range_ratio)
    memory_fraction = check_memory_fraction(memory_fraction)
    version = check_target_engine(problem, engine, engine_version)
    problem = engine_inputs(problem, engine)  # its MoE kernels price the experts
    check_plan(plan)
    eng, cap_source = plan_engine(problem, plan, engine, batch, memory_fraction)
    dp = plan.dp
    if dp > 1:  # one replica: its devices, its share of the clients or the rate
        from plena_opt.estimate.disaggregated import sub_noc

        plan = replace(plan, dp=1)
        problem = replace(problem, noc=sub_noc(problem.noc, plan.world_size))  # type: ignore[arg-type]
        concurrency = None if concurrency is None else -(-concurrency // dp)
        request_rate = None if request_rate is None else request_rate / dp
    wl = problem.workload
    measured = OPEN_LOOP_MEASURED if concurrency is None else max(4 * concurrency, 64)
    rounds = measured + (measured if concurrency is None else WARMUP_WAVES * concurrency)
    if rounds * wl.output_seq_len * (1 + range_ratio) > MAX_REPLAY_TOKENS:
        raise PlenaInputError(
            "concurrency",
            f"the replay would generate {rounds:,} × {wl.output_seq_len:,} tokens, over "
            f"{MAX_REPLAY_TOKENS:,}: lower --concurrency or --output-seq",
        )
    inputs = (problem.model, problem.noc, problem.memory, problem.chip)
    # pp > 1: one of the replica's in-flight batches, its clients or rate (serving.pipeline)
    step, concurrency, request_rate, in_flight = in_flight_load(
        inputs, wl, plan, eng, concurrency, request_rate, range_ratio=range_ratio
    )
    lengths = (wl.input_seq_len, wl.output_seq_len, range_ratio)
    steady, replay = _run(step, lengths, concurrency, request_rate)
    return UnderLoad(
        engine,
        version,
        eng.budget_tokens,
        eng.max_running,
        eng.cuda_graph_max_batch,
        eng.host_step_seconds,
        eng.source,
        concurrency,
        request_rate,
        wl.input_seq_len,
        wl.output_seq_len,
        range_ratio,
        plan.world_size,
        measured,
        *_stats(replay),
        replay.output_tps_per_gpu,
        replay.output_tps_per_user,
        replay.request_throughput_per_s,
        steady,
        _run_ttft(step, lengths, concurrency),
        lookup(load_table(), engine, problem.chip.name, band_of(concurrency)),
        dp,
        None if step.attention_dp is None else step.attention_dp.factor(steady.decode_batch),
        plan.pp,
        in_flight,
        cap_source,
    )


def _run_ttft(step: Any, lengths: tuple[int, int, float], concurrency: int | None) -> float | None:
    """Mean TTFT of a closed-loop benchmark run from its start burst (None: Poisson)."""
    from plena_opt.serving import ServingWorkload, benchmark_run

    if concurrency is None:
        return None
    return benchmark_run(step, ServingWorkload(concurrency, *lengths)).ttft_seconds


def check_target_engine(problem: EvaluatorInputs, engine: str, version: str | None) -> str:
    """A GPU chip on a NoC and a known engine at its one modelled version (returned)."""
    from plena_opt.chip.gpu import GpuChipProfile, engine_refusal
    from plena_opt.serving.engines import ENGINES, VERSIONS

    if not isinstance(problem.chip, GpuChipProfile):
        raise PlenaInputError(
            "engine",
            "no serving engine targets PLENA chips and "
            "plena_opt.serving models no generic engine: serving under load "
            "(--engine, --concurrency, --request-rate) needs a GPU --chip",
        )
    if problem.noc is None:
        raise PlenaInputError("noc", "a GPU chip is priced on a node profile: give --noc")
    if engine not in ENGINES:  # a choice, worded as chip.gpu.moe_kernels words it
        raise PlenaInputError("engine", f"engine must be one of {', '.join(ENGINES)}")
    if why := engine_refusal(engine, problem.chip.name):  # TensorRT-LLM on an AMD GPU
        raise PlenaInputError("engine", why)
    if version is not None and version != VERSIONS[engine]:
        raise PlenaInputError(
            "engine_version",
            f"the {engine} scheduler defaults are modelled "
            f"for version {VERSIONS[engine]} only; got {version!r}",
        )
    return VERSIONS[engine]


def _run(
    step: Any, lengths: tuple[int, int, float], concurrency: int | None, rate: float | None
) -> tuple[ServingMetrics, ServingMetrics]:
    """(steady state, replay) of the closed loop or the Poisson workload."""
    from plena_opt import serving as sv

    if concurrency is not None:
        wl = sv.ServingWorkload(concurrency, *lengths)
        return sv.closed_loop(step, wl), sv.replay_closed_loop(step, wl, warmup_waves=WARMUP_WAVES)
    owl = sv.OpenLoopWorkload(float(rate), *lengths)  # type: ignore[arg-type]
    return sv.open_loop(step, owl), sv.replay_open_loop(step, owl, measured=OPEN_LOOP_MEASURED)


def _stats(m: ServingMetrics) -> tuple[Stats, Stats, Stats, Stats]:
    """TTFT, TPOT, ITL and E2E of a replay."""

    def of(name: str, mean: float) -> Stats:
        p = [getattr(m, f"{name}_p{q}_seconds") for q in (50, 90, 99)]
        return Stats(mean, *(v if v is not None else mean for v in p))

    itl = m.itl_seconds if m.itl_seconds is not None else m.tpot_seconds
    return (
        of("ttft", m.ttft_seconds),
        of("tpot", m.tpot_seconds),
        of("itl", itl),
        of("e2e", m.e2e_seconds),
    )
