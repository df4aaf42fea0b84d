"""Use case: a disaggregated deployment under load (``estimate --concurrency --prefill-workers``).

``P`` prefill workers of TP ``tp_p`` and ``D`` decode workers of TP ``tp_d`` on the first
``P·tp_p + D·tp_d`` devices of the NoC, run by ``engine``'s default scheduler, under a closed
loop of ``concurrency`` clients or a Poisson ``request_rate``: the steady state of
``plena_opt.serving.disaggregated`` (prefill queue over the pool, KV transfer on the network
model, decode pool batch; TTFT includes the prefill queue). A decode worker runs at most its
engine's default running cap, or the requests its KV pool holds at the exported memory setting
where fewer (vLLM, SGLang: ``api.running_cap``); the requests beyond wait for a slot, in TTFT.
GPU chips only. Seconds, tokens/s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.serving.disaggregated import DisaggMetrics, Pools

POOL_FIELDS = ("prefill_workers", "prefill_tp", "decode_workers", "decode_tp")


@dataclass(frozen=True)
class DisaggUnderLoad:
    """The settings priced and the steady state of a disaggregated deployment under load."""

    engine: str
    engine_version: str
    budget_tokens: int
    host_step_seconds: float
    engine_source: str
    pools: Pools
    concurrency: int | None
    request_rate_per_s: float | None
    input_len: int
    output_len: int
    range_ratio: float
    metrics: DisaggMetrics
    decode_max_running: int | None = None  # requests one decode worker runs (None: no cap)
    decode_max_running_source: str = "the engine's default"

    def to_dict(self) -> dict[str, Any]:
        """The ``serving_under_load`` document of ``estimate --json`` for pools (SI)."""
        m, p = self.metrics, self.pools

        def stats(mean: float, q: tuple[float, float, float]) -> dict[str, float]:
            return {"mean": mean, "p50": q[0], "p90": q[1], "p99": q[2]}

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
                "decode_max_running_requests": self.decode_max_running,
                "decode_max_running_source": self.decode_max_running_source,
                "host_step_seconds": self.host_step_seconds,
                "source": self.engine_source,
            },
            "mode": "disaggregated",
            "pools": {f: getattr(p, f) for f in POOL_FIELDS},
            "gpus": p.gpus,
            "steady_state": {
                "prefill_wait_seconds": m.prefill_wait_seconds,
                "prefill_seconds": m.prefill_seconds,
                "kv_transfer_seconds": m.transfer_seconds,
                "prefill_utilisation": m.prefill_utilisation,
                "decode_wait_seconds": m.decode_wait_seconds,
                "decode_batch_per_worker": m.decode_batch_per_worker,
                "ttft_seconds": stats(m.ttft_seconds, m.ttft_quantiles_seconds),
                "tpot_seconds": m.tpot_seconds,
                "e2e_seconds": stats(m.e2e_seconds, m.e2e_quantiles_seconds),
                "output_tps_per_gpu": m.output_tps_per_gpu,
                "output_tps_per_user": m.output_tps_per_user,
                "request_throughput_per_s": m.request_rate_per_s,
            },
        }

    def to_text(self) -> str:
        """The block ``plena-opt estimate`` prints after the static-batch figures (ms)."""
        m, p = self.metrics, self.pools
        if self.concurrency:
            load = f"closed loop, {self.concurrency} concurrent clients"
        else:
            load = f"Poisson arrivals at {self.request_rate_per_s:g} requests/s"
        r = self.range_ratio
        lengths = f"drawn in ±{100 * r:g} %" if r else "fixed lengths"
        t50, t90, t99 = (1e3 * v for v in m.ttft_quantiles_seconds)
        return "\n".join([
            "",
            f"Under load, disaggregated ({load}, {self.input_len} prompt + {self.output_len} "
            f"output tokens each, {lengths})",
            f"  engine {self.engine} {self.engine_version}: {p.prefill_workers} prefill workers × "
            f"TP{p.prefill_tp}, {p.decode_workers} decode workers × TP{p.decode_tp} "
            f"({p.gpus} GPUs); chunked prefill {self.budget_tokens} tokens/step; decode max "
            f"running {self.decode_max_running or 'KV-bound'} per worker "
            f"({self.decode_max_running_source})",
            f"  steady state: prefill queue {1e3 * m.prefill_wait_seconds:.1f} ms + prefill "
            f"{1e3 * m.prefill_seconds:.1f} ms (pool {100 * m.prefill_utilisation:.0f} % busy) + "
            f"KV transfer {1e3 * m.transfer_seconds:.2f} ms"
            + (f" + wait for a decode slot {1e3 * m.decode_wait_seconds:.1f} ms"
               if m.decode_wait_seconds else "")
            + "; decode batch "
            f"{m.decode_batch_per_worker:.1f} per worker",
            f"  TTFT ms mean {1e3 * m.ttft_seconds:.1f}, p50 {t50:.1f}, p90 {t90:.1f}, "
            f"p99 {t99:.1f}; TPOT ms {1e3 * m.tpot_seconds:.2f}; E2E ms "
            f"{1e3 * m.e2e_seconds:.1f}",
            f"  output tokens/s per GPU {m.output_tps_per_gpu:.1f}, per user "
            f"{m.output_tps_per_user:.1f}; requests/s {m.request_rate_per_s:.3f}",
        ])  # fmt: skip


def check_pools(values: dict[str, int | None]) -> Pools | None:
    """The pools of ``--prefill-workers/--prefill-tp/--decode-workers/--decode-tp`` (all four
    or none; each 1..MAX_DEVICES), else an error naming the field."""
    from plena_opt.api.limits import MAX_DEVICES
    from plena_opt.bounds import check_count
    from plena_opt.serving.disaggregated import Pools

    given = [f for f in POOL_FIELDS if values.get(f) not in (None, 0)]
    if not given:
        return None
    for f in POOL_FIELDS:
        if f not in given:
            flag = "--" + f.replace("_", "-")
            raise PlenaInputError(
                f,
                "a disaggregated deployment needs all of --prefill-workers, --prefill-tp, "
                f"--decode-workers, --decode-tp; {flag} is missing",
            )
        check_count(values[f], f, "--" + f.replace("_", "-"), 1, MAX_DEVICES)
    return Pools(*(int(values[f]) for f in POOL_FIELDS))  # type: ignore[arg-type]


def serve_disaggregated(
    problem: EvaluatorInputs,
    pools: Pools,
    engine: str = "vllm",
    concurrency: int | None = None,
    request_rate: float | None = None,
    engine_version: str | None = None,
    range_ratio: float = 0.0,
    memory_fraction: float | None = None,
) -> DisaggUnderLoad:
    """``pools`` on ``problem``'s GPU chip and NoC under the workload (fields as
    ``serve_under_load``'s; the decode workers' KV pool at ``memory_fraction``, None: the
    exported default); bad input raises naming the field."""
    from plena_opt.api.load_cap import KV_BOUND
    from plena_opt.api.moe_kernel import engine_inputs
    from plena_opt.api.running_cap import (
        EXPORTED_MEMORY_FRACTION,
        check_memory_fraction,
        replica_kv_cap,
    )
    from plena_opt.api.under_load import check_load, check_target_engine
    from plena_opt.estimate.disaggregated import sub_noc
    from plena_opt.estimate.plan import Plan
    from plena_opt.serving import engine_model
    from plena_opt.serving.calibration import calibrated
    from plena_opt.serving.disaggregated import disaggregated_under_load
    from plena_opt.serving.pools import pool_steps

    check_load(concurrency, request_rate, range_ratio)
    frac = check_memory_fraction(memory_fraction) or EXPORTED_MEMORY_FRACTION
    version = check_target_engine(problem, engine, engine_version)
    problem = engine_inputs(problem, engine)
    noc = problem.noc
    if pools.gpus > noc.num_devices:  # type: ignore[union-attr]
        raise PlenaInputError(
            "decode_workers",
            f"the pools need {pools.gpus} GPUs (prefill_workers × prefill_tp + decode_workers × "
            f"decode_tp); the NoC has {noc.num_devices}",  # type: ignore[union-attr]
        )
    hbm = float(problem.chip.hbm.capacity_bytes.value)  # type: ignore[union-attr]
    eng = calibrated(engine_model(engine, hbm), problem.chip.name)
    wl = problem.workload
    parts = (problem.model, noc, problem.memory, problem.chip, wl)
    prefill, decode, transfer = pool_steps(*parts, pools, eng, frac)  # type: ignore[arg-type]
    lengths = (wl.input_seq_len, wl.output_seq_len, range_ratio)
    m = disaggregated_under_load(prefill, decode, transfer, pools, lengths, concurrency,
                                 request_rate)  # fmt: skip
    running = decode.engine.max_running
    source = "the engine's default" if running is not None else KV_BOUND
    if running != eng.max_running:  # the decode worker's KV pool binds (pools.pool_steps)
        sub = replace(problem, noc=sub_noc(noc, pools.decode_tp))  # type: ignore[arg-type]
        cap = replica_kv_cap(sub, Plan(tp=pools.decode_tp), eng, frac)
        source = cap.describe(wl.input_seq_len, wl.output_seq_len) if cap else source
    return DisaggUnderLoad(engine, version, eng.budget_tokens, eng.host_step_seconds, eng.source,
                           pools, concurrency, request_rate, wl.input_seq_len, wl.output_seq_len,
                           range_ratio, m, running, source)  # fmt: skip
