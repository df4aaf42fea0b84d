"""Search, StreamSearch and GetStudy: proto → ``plena_opt.search.run_search`` → proto.

Deadlines (service-conventions §2.3): the search budget is the RPC's ``time_remaining()`` minus a
safety margin (and at most the server's longest supported deadline); the library stops between
trials when it is spent and returns the front so far, marked partial. Cancellation (§2.4):
``context.add_callback`` sets a stop flag that the library polls between trials; CancelSearch and
SIGTERM set the same flag. Finished trials are told to the study as they finish, so nothing done
is lost.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from plena_proto import plena_opt_pb2 as pb
from plena_proto.traces import pack_trace, trace_chunks

from plena_opt.errors import PlenaInputError
from plena_server import convert
from plena_server.errors import ServerLimitError
from plena_server.limits import MIB
from plena_server.registry import StopSignal

MAX_BATCH_SIZES = 64
# Answer from the study when less than this share of the deadline (0.5–3 s) is left.
ANSWER_RESERVE_SHARE = 0.05
_DONE = object()
_STAGES = {"done": pb.STAGE_DONE, "recheck": pb.STAGE_RECHECK, "traces": pb.STAGE_TRACES}


def deadline_budget(remaining: float | None, longest: float) -> float:
    """Seconds the search may spend given the RPC's remaining time (None: no deadline).

    The margin (20 % of the remaining time, between 0.5 s and 5 s) leaves room for the trial in
    flight, the front and hypervolume, and the reply.
    """
    if remaining is None or not math.isfinite(remaining):
        return longest
    margin = min(5.0, max(0.5, 0.2 * remaining))
    return max(0.05, min(longest, remaining - margin))


def _inline_label(kind: str, text: str, name: str = "") -> str:
    """Pseudo path naming inline data by content, so the same inline search resumes its study."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or kind
    return f"inline-{digest}/{safe}.json"


def problem_spec(system: pb.SystemSpec, workload: Any) -> Any:
    """The ``ProblemSpec`` of a request (names as given, inline documents by content digest)."""
    from plena_opt.estimate.problem import DEFAULT_MEMORY, ProblemSpec

    kw: dict[str, Any] = {}
    if system.model.WhichOneof("source") == "name":
        kw["model"] = system.model.name
    else:
        kw["model"] = None
        kw["model_path"] = _inline_label(
            "model", system.model.hf_config_json, system.model.display_name or "custom"
        )

    def _src(src: pb.ProfileSource, kind: str) -> str | None:
        which = src.WhichOneof("source")
        if which == "name":
            return src.name
        if which == "json":
            return _inline_label(kind, src.json)
        return None

    kw["noc"] = _src(system.noc, "noc")
    mem = system.memory
    if mem.WhichOneof("source") == "fixed_bandwidth":
        kw["memory"] = None
        kw["fixed_bandwidth_gbs"] = mem.fixed_bandwidth.bandwidth_gbytes_per_s
        if mem.fixed_bandwidth.HasField("capacity_gib"):
            kw["fixed_capacity_gib"] = mem.fixed_bandwidth.capacity_gib
    else:
        kw["memory"] = _src(mem, "memory") or DEFAULT_MEMORY
    kw["chip"] = _src(system.chip, "chip")
    kw.update(
        batch_size=workload.batch_size,
        input_seq=workload.input_seq_len,
        output_seq=workload.output_seq_len,
        include_lm_head=workload.include_lm_head,
        overlap=workload.overlap_policy,
        routing=workload.routing,
        frequency_hz=workload.frequency_hz,
    )
    return ProblemSpec(**kw)


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def search_request(request: pb.SearchRequest, storage: str | None, limits: Any) -> tuple[Any, Any]:
    """Validate a proto request; return (``SearchRequest``, ``EvaluatorInputs``)."""
    from pydantic import ValidationError

    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.request import SearchRequest

    system = convert.load_system(request.system, limits)
    workload = convert.to_workload(request.workload)
    o = request.options
    trials = _opt(o, "trials")
    if trials is not None and trials > limits.max_trials:
        raise ServerLimitError(
            "options.trials", f"options.trials is above the server limit of {limits.max_trials}"
        )
    if len(o.batch_sizes) > MAX_BATCH_SIZES:
        raise ServerLimitError(
            "options.batch_sizes", f"options.batch_sizes has more than {MAX_BATCH_SIZES} entries"
        )
    seed = _opt(o, "seed")
    if seed is not None and not 0 <= seed < 2**32:
        raise PlenaInputError("options.seed", "options.seed must be between 0 and 2**32 - 1")
    if o.study_name and not re.fullmatch(r"[A-Za-z0-9._:@+-]{1,128}", o.study_name):
        raise PlenaInputError(
            "options.study_name",
            "options.study_name must be 1-128 characters from A-Z a-z 0-9 . _ : @ + -",
        )
    _check_recheck(o, limits)
    for name in ("max_ttft_ms", "min_tps_per_seq", "timeout_seconds", "auto_budget_seconds"):
        v = _opt(o, name)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise PlenaInputError(f"options.{name}", f"options.{name} must be greater than zero")
    kw: dict[str, Any] = {
        "problem": problem_spec(request.system, workload),
        "batch_sizes": list(o.batch_sizes) or None,
        "max_ttft_ms": _opt(o, "max_ttft_ms"),
        "min_tps_per_seq": _opt(o, "min_tps_per_seq"),
        "timeout": _opt(o, "timeout_seconds"),
        "seed": _opt(o, "seed"),
        "study": o.study_name or None,
        "storage": storage,
        "compare_exact": _opt(o, "compare_exact"),
    }
    if o.objectives:
        kw["objectives"] = list(o.objectives)
    if o.sampler:
        kw["sampler"] = o.sampler
    if trials is not None:
        kw["trials"] = trials
    if o.HasField("auto_budget_seconds"):
        kw["auto_budget_s"] = o.auto_budget_seconds
    try:
        req = SearchRequest(**kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        field = "options." + {
            "batch_sizes": "batch_sizes",
            "timeout": "timeout_seconds",
            "study": "study_name",
            "auto_budget_s": "auto_budget_seconds",
        }.get(loc, loc)
        raise PlenaInputError(field, f"{field}: {err['msg']}") from exc
    return req, EvaluatorInputs(system.model, system.noc, system.memory, workload, system.chip)


def _check_recheck(o: pb.SearchOptions, limits: Any) -> None:
    k = _opt(o, "recheck_top_k")
    if k is not None and not 0 <= k <= limits.max_recheck_top_k:
        raise PlenaInputError(
            "options.recheck_top_k",
            f"options.recheck_top_k must be between 0 and {limits.max_recheck_top_k}",
        )
    n = _opt(o, "mc_samples")
    if n is not None and n < 1:
        raise PlenaInputError("options.mc_samples", "options.mc_samples must be greater than zero")
    if n is not None and n > limits.max_samples:
        raise ServerLimitError(
            "options.mc_samples",
            f"options.mc_samples is above the server limit {limits.max_samples}",
        )
    t = _opt(o, "max_trace_bytes")
    if t is not None and not 0 <= t <= limits.max_trace_bytes:
        raise PlenaInputError(
            "options.max_trace_bytes",
            f"options.max_trace_bytes must be between 0 and {limits.max_trace_bytes}",
        )
    if o.HasField("noise"):
        _noise(o)  # validate now, before the search runs


def _noise(o: pb.SearchOptions, default: str = "") -> Any:
    from plena_server.simulate_job import noise_spec

    try:
        return noise_spec(o, default) if default else noise_spec(o)
    except PlenaInputError as exc:
        raise type(exc)(f"options.{exc.field}", exc.rule) from exc


def front_entry_to_proto(e: Any) -> pb.PlanMetrics:
    """``plena_opt.search.result.FrontEntry`` → ``PlanMetrics`` (ms → s)."""
    p = e.plan
    msg = pb.PlanMetrics(
        plan=pb.Plan(**{k: p[k] for k in convert.PLAN_FIELDS if k in p}),
        ttft_seconds=e.ttft_ms / 1e3,
        tps=e.tps,
        tps_per_sequence=e.tps_per_sequence,
        weight_bytes_per_device=e.weight_bytes_per_device,
        kv_cache_bytes_per_device=e.kv_cache_bytes_per_device,
        bottleneck=e.bottleneck or "",
        warnings=list(e.warnings),
        label=e.label,
        constraints=[pb.NamedValue(name=k, value=v) for k, v in e.constraints.items()],
        batch_size=int(p.get("batch_size", 0)),
    )
    if e.energy_j_per_token is not None:
        msg.energy_per_token_joules = e.energy_j_per_token
    if e.fits_in_memory is not None:
        msg.fits_in_memory = e.fits_in_memory
    if e.trial_number is not None:
        msg.trial_number = e.trial_number
    return msg


def result_to_proto(result: Any, stop: StopSignal) -> pb.SearchResult:
    reason = result.stop_reason or "completed"
    if result.partial and stop.reason == "shutdown":
        reason = "shutdown"
    return pb.SearchResult(
        study_name=result.study_name,
        partial=result.partial,
        stop_reason=reason,
        trials_completed=result.trials,
        front=[front_entry_to_proto(e) for e in result.front],
        hypervolume=result.hypervolume or 0.0,
        elapsed_seconds=result.elapsed_s,
        warnings=list(result.warnings),
        objectives=list(result.objectives),
        result_json=result.model_dump_json(),
    )


class Recheck:
    """Monte Carlo re-check of the first ``k`` front plans (``plena_opt.api.recheck``, as the
    CLI runs it), with traces packed for the reply."""

    def __init__(self, job: SearchJob, options: pb.SearchOptions) -> None:
        from plena_opt.api.recheck import DEFAULT_NOISE, DEFAULT_SAMPLES

        self.job = job
        self.k = options.recheck_top_k if options.HasField("recheck_top_k") else 0
        self.samples = options.mc_samples if options.HasField("mc_samples") else DEFAULT_SAMPLES
        self.seed = options.seed if options.HasField("seed") else 0
        self.noise = _noise(options, DEFAULT_NOISE)
        self.traces = options.include_traces
        limit = job.servicer.limits.max_trace_bytes
        self.trace_cap = (
            options.max_trace_bytes if options.HasField("max_trace_bytes") else min(4 * MIB, limit)
        )

    def run(self, result: Any, progress: Any, emit_trace: Any) -> pb.SearchResult:
        """The proto result of ``result`` with the re-check of its first ``k`` front plans."""
        from plena_opt.api.recheck import recheck_front

        out = result_to_proto(result, self.job.stop)
        out.recheck_json = "[]"
        if self.k <= 0 or not result.front:
            return out
        if self.job.stop.is_set():
            out.warnings.append("re-check skipped: the search was stopped")
            return out
        progress("recheck", 0, min(self.k, len(result.front)))
        with tempfile.TemporaryDirectory() as tmp:
            checks = recheck_front(
                result,
                self.job.inputs,
                top_k=self.k,
                samples=self.samples,
                noise=self.noise,
                seed=self.seed,
                trace_dir=tmp if self.traces else None,
                should_stop=self.job.stop.is_set,
            )
            docs = []
            for i, rc in enumerate(checks):
                out.recheck.append(recheck_to_proto(i, rc))
                doc = rc.to_dict()
                doc["trace_paths"] = [Path(p).stem for p in rc.trace_paths]
                docs.append(doc)
            out.recheck_json = json.dumps(docs)
            if self.traces and checks:
                progress("traces", 0, len(checks))
                self._pack(checks, out, emit_trace)
        if len(checks) < min(self.k, len(result.front)):
            out.partial = True
            out.warnings.append(f"re-check stopped after {len(checks)} plans")
        return out

    def _pack(self, checks: list[Any], out: pb.SearchResult, emit_trace: Any) -> None:
        used = 0
        for rc in checks:
            for path in rc.trace_paths:
                name = Path(path).stem
                packed = pack_trace(Path(path).read_bytes(), name, rc.index)
                if used + packed.compressed_bytes > self.trace_cap:
                    out.warnings.append(f"trace {name} dropped: over the {self.trace_cap}-byte cap")
                    continue
                used += packed.compressed_bytes
                emit_trace(out, packed)


def recheck_to_proto(index: int, rc: Any) -> pb.RecheckResult:
    from plena_server.simulate_job import distribution

    res = rc.serving
    msg = pb.RecheckResult(
        plan_index=index,
        ttft_deterministic_seconds=res.ttft_deterministic,
        tps_deterministic=res.tps_deterministic,
        notes=list(res.causes),
    )
    if res.ttft is not None:
        msg.distributions.append(distribution("ttft", "s", res.ttft))
    if res.tps is not None:
        msg.distributions.append(distribution("tps", "tokens/s", res.tps))
    return msg


class SearchJob:
    """One Search/StreamSearch call: validation, slot, budget, stop flag, run, reply."""

    def __init__(
        self,
        servicer: Any,
        request: pb.SearchRequest,
        context: grpc.ServicerContext,
        streaming: bool,
    ) -> None:
        self.servicer = servicer
        self.context = context
        self.stop = StopSignal()
        context.add_callback(lambda: self.stop.set("cancelled"))
        self.request, self.inputs = search_request(request, servicer.storage, servicer.limits)
        self.factory = self.inputs.evaluator
        self.study_name = self.request.study or _default_name(self.request)
        self.recheck = Recheck(self, request.options)
        self.events: queue.Queue[Any] | None = None
        self.t0 = time.perf_counter()
        remaining = context.time_remaining()
        finite = remaining is not None and math.isfinite(remaining)
        self.reserve = min(3.0, max(0.5, ANSWER_RESERVE_SHARE * remaining)) if finite else 0.0

    def _run(self, progress: Any = None) -> Any:
        from plena_opt.search.runner import run_search

        # Sized now, after validation and the slot, from what is left of the RPC deadline.
        limit = self.servicer.limits.max_deadline_seconds
        budget = deadline_budget(self.context.time_remaining(), limit)
        request = self.request.model_copy(update={"deadline": budget})
        try:
            return run_search(
                request, self.factory, progress=progress, should_stop=self.stop.is_set
            )
        except PlenaInputError as exc:
            raise convert.qualify(_search_field(exc)) from exc

    def _start(self, progress: Any, recheck_progress: Any, emit_trace: Any) -> dict[str, Any]:
        """Take the slot and run search + re-check in a worker thread, which releases the slot
        when it ends (possibly after the RPC has answered from the study, see ``_watch``)."""
        registry = self.servicer.registry
        registry.acquire(self.study_name, self.stop)
        outcome: dict[str, Any] = {"done": threading.Event()}

        def work() -> None:
            try:
                fail_stale_trials(self.servicer.storage, self.study_name)
                result = self._run(progress)
                outcome["result"] = self.recheck.run(result, recheck_progress, emit_trace)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the RPC thread
                outcome["error"] = exc
            finally:
                registry.release(self.study_name)
                outcome["done"].set()
                if self.events is not None:
                    self.events.put(_DONE)

        threading.Thread(target=work, name=f"search-{self.study_name}", daemon=True).start()
        return outcome

    def _overdue(self) -> bool:
        remaining = self.context.time_remaining()
        return remaining is not None and remaining < self.reserve

    def _finish(self, outcome: dict[str, Any]) -> pb.SearchResult:
        if "error" in outcome:
            raise outcome["error"]
        if "result" in outcome:
            return outcome["result"]
        # The library has not stopped in time (a slow trial): answer from the stored trials.
        self.stop.set("deadline")
        return fallback_result(self.servicer.storage, self.study_name, self.t0)

    def run_unary(self) -> pb.SearchResult:
        self.events = None
        outcome = self._start(None, lambda *a: None, lambda out, t: out.traces.append(t))
        while not outcome["done"].wait(0.05):
            if self._overdue():
                break
        return self._finish(outcome)

    def _progress_event(
        self,
        stage: int,
        done: int,
        total: int | None,
        rate: float = 0.0,
        front: int = 0,
        hv: float | None = None,
    ) -> pb.SearchEvent:
        return pb.SearchEvent(
            progress=pb.SearchProgress(
                stage=stage,
                trials_done=done,
                trials_total=total or 0,
                trials_per_second=rate,
                front_size=front,
                hypervolume=hv or 0.0,
                elapsed_seconds=time.perf_counter() - self.t0,
                study_name=self.study_name,
            )
        )

    def run_stream(self) -> Iterator[pb.SearchEvent]:
        self.events = queue.Queue()
        events = self.events

        def progress(p: Any) -> None:
            stage = _STAGES.get(p.stage, pb.STAGE_SEARCH)
            if stage == pb.STAGE_DONE:
                stage = pb.STAGE_SEARCH  # the search stage is done; re-check may follow
            events.put(
                self._progress_event(
                    stage, p.done, p.total, p.trials_per_s, p.front_size, p.hypervolume
                )
            )

        def recheck_progress(stage: str, i: int, n: int) -> None:
            events.put(self._progress_event(_STAGES[stage], i, n))

        def emit_trace(out: pb.SearchResult, trace: pb.Trace) -> None:
            for chunk in trace_chunks(trace):
                events.put(pb.SearchEvent(trace_chunk=chunk))

        outcome = self._start(progress, recheck_progress, emit_trace)
        while True:
            try:
                item = events.get(timeout=0.05)
            except queue.Empty:
                if self._overdue():
                    break
                continue
            if item is _DONE:
                break
            if not self.stop.is_set() or item.WhichOneof("event") == "trace_chunk":
                yield item
        result = self._finish(outcome)
        if self.stop.reason == "cancelled" and not self.context.is_active():
            return  # the client has gone; nothing to send
        yield self._progress_event(
            pb.STAGE_DONE,
            result.trials_completed,
            None,
            front=len(result.front),
            hv=result.hypervolume,
        )
        yield pb.SearchEvent(result=result)


def fallback_result(storage: str | None, name: str, t0: float) -> pb.SearchResult:
    """A partial result read from the study (the library did not return before the deadline)."""
    try:
        study = get_study(storage, name)
    except PlenaInputError:  # the study was not even created yet
        study = pb.GetStudyResponse(study_name=name)
    return pb.SearchResult(
        study_name=name,
        partial=True,
        stop_reason="deadline",
        trials_completed=study.trials_completed,
        front=study.front,
        objectives=study.objectives,
        elapsed_seconds=time.perf_counter() - t0,
        warnings=["the search did not stop in time; the front was read from the study"],
    )


def _default_name(request: Any) -> str:
    from plena_opt.search.runner import default_study_name

    return default_study_name(request)


def _search_field(exc: PlenaInputError) -> PlenaInputError:
    mapping = {"study": "options.study_name", "storage": "storage", "noc": "system.noc"}
    if exc.field in mapping and "." not in exc.field:
        return type(exc)(mapping[exc.field], exc.rule)
    return exc


# --- stored studies ------------------------------------------------------------------------------


_STORES: dict[str, Any] = {}
_STORES_LOCK = threading.Lock()


def _open(storage: str | None) -> Any:
    """The server's study store, opened once (a journal is then synced incrementally)."""
    from plena_opt.search.storage import DEFAULT_STORAGE, open_storage, storage_exists

    url = storage or DEFAULT_STORAGE
    with _STORES_LOCK:
        if url in _STORES:
            return _STORES[url]
        if not storage_exists(storage):
            return None
        _STORES[url] = open_storage(storage)
        return _STORES[url]


def fail_stale_trials(storage: str | None, name: str) -> int:
    """Mark RUNNING trials of study ``name`` FAIL (returns how many).

    Called only while this server holds the study's slot, so a RUNNING trial is left over from a
    process that died mid-trial (e.g. kill -9): ask/tell has no heartbeat (service-conventions
    §1.4), so the service fails stale trials itself. Completed trials are untouched.
    """
    import optuna
    from optuna.trial import TrialState

    store = _open(storage)
    if store is None or name not in optuna.get_all_study_names(store):
        return 0
    study_id = store.get_study_id_from_name(name)
    stale = store.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
    for t in stale:
        store.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
    return len(stale)


def study_exists(storage: str | None, name: str) -> bool:
    import optuna

    store = _open(storage)
    return store is not None and name in optuna.get_all_study_names(store)


def get_study(storage: str | None, name: str) -> pb.GetStudyResponse:
    """The feasible Pareto front of a stored study's completed trials."""
    import numpy as np
    from optuna.trial import TrialState

    from plena_opt.errors import PlenaNotFoundError
    from plena_opt.search.pareto import pareto_mask
    from plena_opt.search.record import METRICS_ATTR, PLAN_ATTR

    store = _open(storage)
    if store is None:
        raise PlenaNotFoundError("study_name", f"unknown study {name!r}; the store is empty")
    from plena_opt.search.storage import load_existing_study

    try:
        study = load_existing_study(name, store)
    except PlenaNotFoundError as exc:
        raise PlenaNotFoundError("study_name", str(exc)) from exc
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = [
        t
        for t in trials
        if t.user_attrs.get("feasible", True) and METRICS_ATTR in t.user_attrs and t.values
    ]
    out = pb.GetStudyResponse(
        study_name=name,
        trials_completed=len(trials),
        objectives=list(study.metric_names or []),
    )
    if feasible:
        signs = np.array([1.0 if d.name == "MINIMIZE" else -1.0 for d in study.directions])
        pts = np.array([t.values for t in feasible]) * signs
        mask = pareto_mask(pts)
        front = [t for t, keep in zip(feasible, mask, strict=True) if keep]
        front.sort(key=lambda t: (-t.user_attrs[METRICS_ATTR]["tps"], t.number))
        for t in front:
            out.front.append(_trial_to_proto(t, PLAN_ATTR, METRICS_ATTR))
    return out


def _trial_to_proto(t: Any, plan_attr: str, metrics_attr: str) -> pb.PlanMetrics:
    p, s = t.user_attrs[plan_attr], t.user_attrs[metrics_attr]
    msg = pb.PlanMetrics(
        plan=pb.Plan(**{k: p[k] for k in convert.PLAN_FIELDS if k in p}),
        ttft_seconds=s["ttft_ms"] / 1e3,
        tps=s["tps"],
        tps_per_sequence=s["tps_per_sequence"],
        weight_bytes_per_device=s["weight_bytes_per_device"],
        kv_cache_bytes_per_device=s["kv_cache_bytes_per_device"],
        bottleneck=s.get("bottleneck") or "",
        attribution_seconds=[
            pb.NamedValue(name=k, value=v) for k, v in s.get("attribution_s", {}).items()
        ],
        decode_step_seconds=sum(s.get("attribution_s", {}).values()),
        warnings=list(s.get("warnings", [])),
        label=str(t.user_attrs.get("label", "")),
        batch_size=int(p.get("batch_size", 0)),
        trial_number=t.number,
    )
    if s.get("energy_j_per_token") is not None:
        msg.energy_per_token_joules = s["energy_j_per_token"]
    if s.get("fits_in_memory") is not None:
        msg.fits_in_memory = s["fits_in_memory"]
    return msg
