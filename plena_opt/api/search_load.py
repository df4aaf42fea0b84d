"""Search under load (issue 23): every plan a search scores is also priced under the request's
serving workload, and the objectives and SLAs read those figures.

``LoadedEvaluator`` wraps the search's evaluator: each plan's static metrics come back with
``ttft_seconds`` = the under-load TTFT, ``tps_per_sequence`` = 1 / the under-load TPOT (both at
the request's percentile), ``tps`` = the plan's output tokens/s under the load (so tokens/s per
device and cost per token follow it); the static-batch figures stay under ``static_*`` names and
the under-load figures in ``under_load`` (``search.record.summarise_metrics``). Energy per token
stays static (its basis is named in the front). Memory is judged as the engine holds it
(``api.running_cap.load_memory``): the weights, the step's activations where the engine reserves
them and the KV cache of the requests its pool admits, at the memory setting the launch files
write (``--memory-fraction``, default 0.9); the clients beyond the pool wait in its queue and
their wait is in TTFT, so such a plan fits (``fits_in_memory``, ``kv_cache_bytes_per_device``:
the admitted requests'), and a plan whose pool holds no request is refused naming ``plan``.

Inside the search each plan costs the **steady state** (``serving.closed_loop`` /
``serving.open_loop``: means; step costs from evaluators shared by every plan of the search),
never the replay. Percentiles: the steady-state mean × the replay's percentile / mean ratio,
taken once per search on its first priced plan (``pilot``; one replay per search) — a stated
approximation: the ratio comes from the lengths' spread and the queue, which the pilot shares
with the other plans of the same workload (``tests/search/run/test_search_under_load.py``: within 25
% of each plan's own replay at p90 and p99, TP 8 down to eight TP 1 replicas). Plans the serving
model does not express (cp above 1) or a rate a plan does not serve are scored invalid (not on the
front), never priced as something else. A plan with ``pp`` stages keeps ``k = min(pp, ⌈C/dp⌉)``
batches in flight per replica, each priced as an engine whose step is a turn of the pipeline
(``serving.pipeline``): the clients split over ``dp·k`` such batches as over replicas. A plan
with ``dp`` replicas is ``dp`` engine instances behind a balancer: the clients split as evenly
as they go (the TTFT and TPOT judged are the busiest replica's, ``⌈C/dp⌉`` clients; tokens/s sums
the replicas), a Poisson rate splits in ``dp`` equal parts.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from plena_opt.errors import PlenaInputError

BASIS = "steady state under load; percentiles: steady mean × the pilot replay's ratio"
PERCENTILES = {"p50": 50, "p90": 90, "p99": 99}


class LoadedMetrics:
    """A plan's static metrics with the serving figures under load (seconds, tokens/s)."""

    def __init__(self, static: Any, ttft_s: float, tpot_s: float, tps: float,
                 under_load: dict[str, Any], memory: Any = None) -> None:  # fmt: skip
        self._static = static
        if memory is not None:  # the engine's admission (``api.running_cap.LoadMemory``)
            self.fits_in_memory = True
            self.kv_cache_bytes_per_device = memory.kv_bytes
        self.ttft_seconds, self.tps = ttft_s, tps
        self.tps_per_sequence = 1.0 / tpot_s if tpot_s > 0 else math.nan
        self.under_load = under_load
        self.e2e_seconds = under_load.get("e2e_mean_seconds")  # TTFT + (output − 1)·TPOT
        self.static_figures = {
            "static_ttft_ms": float(static.ttft_seconds) * 1e3,
            "static_tps": float(static.tps),
            "static_tps_per_sequence": float(static.tps_per_sequence),
        }

    def __getattr__(self, name: str) -> Any:
        return getattr(self._static, name)


class LoadedEvaluator:
    """The search's evaluator, its plans priced under ``request``'s workload as well."""

    def __init__(self, inner: Any, inputs: Any, request: Any, shared: dict) -> None:
        from plena_opt.api.under_load import check_target_engine
        from plena_opt.serving import engine_model
        from plena_opt.serving.calibration import calibrated

        self._inner, self._inputs, self._req = inner, inputs, request
        self.engine = request.engine or "vllm"
        self.version = check_target_engine(inputs, self.engine, request.engine_version)
        hbm = float(inputs.chip.hbm.capacity_bytes.value)
        self._eng = calibrated(engine_model(self.engine, hbm), inputs.chip.name)
        self._shared = shared  # evaluators and the pilot ratios, shared across batch sizes
        self._q = PERCENTILES[str(request.percentile)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def evaluate(self, plan: Any) -> Any:
        return self._price(plan, self._inner.evaluate(plan))

    def evaluate_batch(self, plans: list) -> list:
        return [self._price(p, m) for p, m in zip(plans, self._inner.evaluate_batch(plans),
                                                  strict=True)]  # fmt: skip

    def _replica(self, plan: Any) -> tuple[Any, Any, int | None, float | None]:
        """(one DP replica's plan, its NoC, its clients (the busiest), its request rate)."""
        from plena_opt.estimate.disaggregated import sub_noc

        r, dp = self._req, plan.dp
        one = replace(plan, dp=1)
        noc = self._inputs.noc if dp == 1 else sub_noc(self._inputs.noc, one.world_size)
        clients = None if r.concurrency is None else -(-r.concurrency // dp)
        rate = None if r.request_rate is None else r.request_rate / dp
        return one, noc, clients, rate

    def _admission(self, plan: Any) -> tuple[Any, Any]:
        """(The engine a plan is priced with, its replica's KV pool): its running cap as
        ``estimate`` prices it (``api.running_cap``: the plan's batch under a request rate,
        under a concurrency none (the batch is the concurrency, which the clients never
        exceed); the KV pool at the exported memory setting). A pool that holds no request
        raises naming ``plan``."""
        from plena_opt.api.running_cap import memo_admission

        batch = None if self._req.request_rate is None else self._inner.workload.batch_size
        problem = replace(self._inputs, workload=self._inner.workload)
        frac = self._req.memory_fraction
        return memo_admission(self._shared, problem, plan, self._eng, batch, frac)

    def _engine(self, plan: Any) -> Any:
        return self._admission(plan)[0]

    def _memory(self, plan: Any) -> Any:
        """What one device holds under the load (``api.running_cap.LoadMemory``; None: the
        memory has no capacity, the static check stands)."""
        from plena_opt.api.running_cap import load_memory

        eng, cap = self._admission(plan)
        one, _, clients, _ = self._replica(plan)
        return None if cap is None else load_memory(cap, eng, clients, one)

    def _steady(self, plan: Any) -> tuple[Any, float]:
        """(the busiest replica's steady state, the plan's output tokens/s over its replicas)."""
        from plena_opt.serving import OpenLoopWorkload, ServingWorkload, closed_loop, open_loop
        from plena_opt.serving.pipeline import in_flight_load

        one, noc, clients, rate = self._replica(plan)
        wl = replace(self._inner.workload, batch_size=1)
        evs = self._shared.setdefault(("evaluators", wl.precision, one.world_size), {})
        i, ratio = self._inputs, self._req.range_ratio
        # pp > 1: one of k in-flight batches (serving.pipeline), the clients over dp·k of them
        step, clients, rate, k = in_flight_load((i.model, noc, i.memory, i.chip), wl, one,
                                                self._engine(plan), clients, rate, evs,
                                                ratio)  # fmt: skip
        lengths = (wl.input_seq_len, wl.output_seq_len, ratio)
        if rate is not None:
            st = open_loop(step, OpenLoopWorkload(rate, *lengths))
            return st, st.output_tps * plan.dp * k
        st = closed_loop(step, ServingWorkload(clients, *lengths))  # type: ignore[arg-type]
        c, dp = self._req.concurrency, plan.dp * k
        busy, rest = c % dp or dp, (c // dp if c % dp else 0)  # replicas at ⌈C/dp⌉ and ⌊C/dp⌋
        tps = busy * st.output_tps
        if rest and dp - busy:
            tps += (dp - busy) * closed_loop(step, ServingWorkload(rest, *lengths)).output_tps
        return st, tps

    def _ratios(self, plan: Any) -> tuple[float, float]:
        """(TTFT, TPOT) percentile / mean of the pilot replay (computed once per search)."""
        if "ratios" not in self._shared:
            from plena_opt.api.under_load import serve_under_load

            r = self._req  # the whole plan: serve_under_load splits it into replicas as _replica
            problem = replace(self._inputs, workload=self._inner.workload)
            batch = None if r.request_rate is None else self._inner.workload.batch_size
            u = serve_under_load(problem, plan, self.engine, r.concurrency, r.request_rate,
                                 r.engine_version, r.range_ratio, batch,
                                 r.memory_fraction)  # fmt: skip
            q = f"p{self._q}"
            self._shared["ratios"] = (getattr(u.ttft, q) / u.ttft.mean,
                                      getattr(u.tpot, q) / u.tpot.mean)  # fmt: skip
            self._shared["pilot"] = plan
        return self._shared["ratios"]

    def _price(self, plan: Any, static: Any) -> Any:
        nan = math.nan
        if plan.cp != 1:
            from plena_opt.serving.pipeline import CP_REFUSED

            return LoadedMetrics(static, nan, nan, nan, {"refused": CP_REFUSED})
        try:
            st, tps = self._steady(plan)
        except PlenaInputError as exc:  # this plan does not serve the load
            return LoadedMetrics(static, nan, nan, nan, {"refused": str(exc)})
        k_ttft, k_tpot = self._ratios(plan)  # a workload the replay cannot run stops the search
        ttft, tpot = st.ttft_seconds * k_ttft, st.tpot_seconds * k_tpot
        doc = {
            "percentile": f"p{self._q}",
            "ttft_seconds": ttft,
            "tpot_seconds": tpot,
            "ttft_mean_seconds": st.ttft_seconds,
            "tpot_mean_seconds": st.tpot_seconds,
            "e2e_mean_seconds": st.e2e_seconds,
            "output_tps_per_gpu": st.output_tps_per_gpu,
            "output_tps_per_user": st.output_tps_per_user,
            "request_throughput_per_s": st.request_throughput_per_s,
        }
        doc["output_tps_per_gpu"] = tps / plan.world_size
        memory = self._memory(plan)
        if memory is not None:
            doc["running_requests"] = memory.running
            doc["pool_requests"] = memory.pool_requests * plan.dp  # over the DP replicas
            doc["kv_pool_bytes_per_device"] = memory.pool_bytes
            doc["memory_fraction"] = memory.fraction
        return LoadedMetrics(static, ttft, tpot, tps, doc, memory)


def loaded_factory(factory: Any, inputs: Any, request: Any) -> Any:
    """``factory`` (batch[, precision] → evaluator) whose evaluators price under load."""
    shared: dict = {}

    def make(*args: Any) -> LoadedEvaluator:
        return LoadedEvaluator(factory(*args), inputs, request, shared)

    return make


def load_document(request: Any, engine_version: str) -> dict[str, Any]:
    """The search result's ``under_load`` block: the workload, engine and basis."""
    return {
        "kind": "closed_loop" if request.concurrency is not None else "poisson",
        "concurrency": request.concurrency,
        "request_rate_per_s": request.request_rate,
        "range_ratio": request.range_ratio,
        "engine": request.engine or "vllm",
        "engine_version": engine_version,
        "percentile": str(request.percentile),
        "memory_fraction": request.memory_fraction,  # the KV pool's share; None: 0.9
        "basis": BASIS,
        "static_basis": "energy per token: static batch; memory: the engine's admission (weights"
        " + the KV cache of the requests its pool holds at the memory fraction; the rest queue)",
    }
