"""The job runner of Search and StreamSearch: slot, budget, stop flag, worker thread, re-check,
reply (request mapping: ``search_request``; stored studies: ``studies``).

Deadlines (service-conventions §2.3): the search budget is the RPC's ``time_remaining()`` minus a
safety margin (and at most the server's longest supported deadline); the library stops between
trials when it is spent and returns the front so far, marked partial. Cancellation (§2.4):
``context.add_callback`` sets a stop flag that the library polls between trials; CancelSearch and
SIGTERM set the same flag. Finished trials are told to the study as they finish, so nothing done
is lost.
"""

from __future__ import annotations

import math
import queue
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from plena_proto import plena_opt_pb2 as pb
from plena_proto.traces import pack_trace, trace_chunks

from plena_opt import api, jsonio
from plena_opt.api import limits as bounds
from plena_opt.api.recheck import DEFAULT_SAMPLES
from plena_opt.api.robust import annotate_front
from plena_opt.api.search_io import SearchResult, default_study_name
from plena_opt.api.serving_wire import decisions_to_proto, recommendation_to_proto
from plena_opt.api.wire import front_entry_to_proto, recheck_to_proto
from plena_opt.errors import PlenaInputError
from plena_opt.stop import StopToken
from plena_server import convert
from plena_server.limits import MIB
from plena_server.registry import StopSignal
from plena_server.search_request import recheck_noise, search_field, search_request
from plena_server.studies import fail_stale_trials, fallback_result

MAX_BATCH_SIZES = bounds.MAX_BATCH_SIZES
# Answer from the study when less than this share of the deadline (0.5–3 s) is left.
ANSWER_RESERVE_SHARE = 0.05
# Seconds between the re-check's deadline and that answer: building and packing the result.
RECHECK_MARGIN = 0.25
_DONE = object()
_STAGES = {
    "done": pb.STAGE_DONE,
    "recheck": pb.STAGE_RECHECK,
    "traces": pb.STAGE_TRACES,
    "serving": pb.STAGE_SERVING,
}


def deadline_budget(remaining: float | None, longest: float) -> float:
    """Seconds the search may spend given the RPC's remaining time (None: no deadline).

    The margin (20 % of the remaining time, between 0.5 s and 5 s) leaves room for the trial in
    flight, the front and hypervolume, and the reply.
    """
    if remaining is None or not math.isfinite(remaining):
        return longest
    margin = min(5.0, max(0.5, 0.2 * remaining))
    return max(0.05, min(longest, remaining - margin))


def result_to_proto(result: SearchResult, stop: StopSignal) -> pb.SearchResult:
    reason = result.stop_reason or "completed"
    if result.partial and stop.reason == "shutdown":
        reason = "shutdown"
    from plena_opt.api.under_load_wire import load_basis_to_proto

    out = pb.SearchResult(
        study_name=result.study_name,
        partial=result.partial,
        stop_reason=reason,
        trials_completed=result.trials_completed,
        front=[front_entry_to_proto(e) for e in result.front],
        hypervolume=result.hypervolume or 0.0,
        elapsed_seconds=result.elapsed_s,
        warnings=list(result.warnings),
        objectives=list(result.objectives),
        result_json=result.model_dump_json(),
    )
    if result.under_load is not None:  # issue 23
        out.under_load.CopyFrom(load_basis_to_proto(result.under_load))
    return out


class Recheck:
    """Monte Carlo re-check of the first ``k`` front plans (``plena_opt.api.recheck``, as the
    CLI runs it), with traces packed for the reply."""

    def __init__(self, job: SearchJob, options: pb.SearchOptions) -> None:
        self.job = job
        self.k = options.recheck_top_k if options.HasField("recheck_top_k") else 0
        self.samples = options.mc_samples if options.HasField("mc_samples") else DEFAULT_SAMPLES
        self.seed = options.seed if options.HasField("seed") else 0
        self.noise = recheck_noise(options)
        self.traces = options.include_traces
        limit = job.servicer.limits.max_trace_bytes
        self.trace_cap = (
            options.max_trace_bytes if options.HasField("max_trace_bytes") else min(4 * MIB, limit)
        )

    def run(self, result: Any, progress: Any, emit_trace: Any) -> pb.SearchResult:
        """The proto result of ``result`` with the re-check of its first ``k`` front plans."""
        out = result_to_proto(result, self.job.stop)
        out.recheck_json = "[]"
        out.serving_json = "{}"
        if self.k <= 0 or not result.front:
            self._serving(result, [], out, progress)
            return out
        if self.job.stop.is_set() or (result.partial and result.stop_reason == "deadline"):
            # a search that spent its deadline budget leaves the re-check no time of its own
            out.warnings.append("re-check skipped: the search was stopped")
            out.partial, out.stop_reason = True, self.job.stop.reason or result.stop_reason
            return out
        progress("recheck", 0, min(self.k, len(result.front)))
        token = self.job.recheck_token()
        with tempfile.TemporaryDirectory() as tmp:
            checks = api.recheck_front(
                result,
                self.job.inputs,
                top_k=self.k,
                samples=self.samples,
                noise=self.noise,
                seed=self.seed,
                trace_dir=tmp if self.traces else None,
                stop=token,
            )
            docs = []
            for i, rc in enumerate(checks):
                out.recheck.append(recheck_to_proto(i, rc))
                doc = rc.to_dict()
                doc["trace_paths"] = [Path(p).stem for p in rc.trace_paths]
                docs.append(doc)
            out.recheck_json = jsonio.dumps(docs)
            if self.traces and checks and not token.is_set():
                progress("traces", 0, len(checks))
                self._pack(checks, out, emit_trace)
        if len(checks) < min(self.k, len(result.front)) or any(rc.partial for rc in checks):
            out.partial, out.stop_reason = True, token.reason or "deadline"
            done = sum(not rc.partial for rc in checks)
            out.warnings.append(
                f"re-check stopped ({out.stop_reason}) after {done} complete plans"
                + (" and one partly sampled" if done < len(checks) else "")
            )
        self._serving(result, checks, out, progress)
        return out

    def _serving(
        self, result: SearchResult, checks: list[Any], out: pb.SearchResult, progress: Any
    ) -> None:
        """Goodput and the serving comparison (``api.decide_serving``, as the CLI runs it),
        stopped by the search's stop flag and the RPC deadline (a partial comparison)."""
        if self.job.stop.is_set():
            return
        if self.job.request.serving != "aggregated":
            progress("serving", 0, 0)
        try:
            api.decide_serving(result, checks, self.job.request, self.job.inputs,
                               stop=self.job.recheck_token())  # fmt: skip
        except PlenaInputError as exc:  # e.g. the comparison's study name is someone else's
            out.warnings.append(f"serving comparison not stored: {exc}")
        comparison = result.serving.get("comparison", {})
        out.warnings.extend(f"serving comparison: {w}" for w in comparison.get("warnings", []))
        if comparison.get("partial"):
            out.partial, out.stop_reason = True, comparison["stop_reason"]
            out.warnings.append(
                f"serving comparison stopped ({out.stop_reason}): partial fronts, not stored"
            )
        try:
            out.serving_json = jsonio.dumps(result.serving)
            decisions_to_proto(result.serving, out.serving)
        except PlenaInputError as exc:
            out.warnings.append(f"serving figures not sent: {exc}")
        rec = api.recommend(result, self.job.request)
        if rec is not None:
            recommendation_to_proto(rec, out.recommendation, result.front)

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


class SearchJob:
    """One Search/StreamSearch call: validation, slot, budget, stop flag, run, reply."""

    def __init__(
        self,
        servicer: Any,
        request: pb.SearchRequest,
        context: grpc.ServicerContext,
    ) -> None:
        self.servicer = servicer
        self.context = context
        self.stop = StopSignal()
        context.add_callback(lambda: self.stop.set("cancelled"))
        self.request, self.inputs = search_request(request, servicer.storage, servicer.limits)
        self.study_name = self.request.study or default_study_name(self.request)
        self.recheck = Recheck(self, request.options)
        self.events: queue.Queue[Any] | None = None
        self.t0 = time.perf_counter()
        remaining = context.time_remaining()
        finite = remaining is not None and math.isfinite(remaining)
        self.reserve = min(3.0, max(0.5, ANSWER_RESERVE_SHARE * remaining)) if finite else 0.0

    def _run(self, progress: Any = None) -> SearchResult:
        # Sized now, after validation and the slot, from what is left of the RPC deadline.
        limit = self.servicer.limits.max_deadline_seconds
        budget = deadline_budget(self.context.time_remaining(), limit)
        request = self.request.model_copy(update={"deadline": budget})
        try:
            result = api.search_plans(
                request, self.inputs, progress=progress, should_stop=self.stop.is_set
            )
            if result.front:  # error bars and robust marks, as local mode (issue 30)
                annotate_front(result, request, self.inputs)
            return result
        except PlenaInputError as exc:
            raise convert.qualify(search_field(exc)) from exc

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

    def recheck_token(self) -> StopToken:
        """The re-check's stop token: the search's stop flag plus the RPC deadline less the
        answer reserve and :data:`RECHECK_MARGIN` (so that the result is ready before
        :meth:`_overdue` answers from the study)."""
        remaining = self.context.time_remaining()
        budget = None
        if remaining is not None and math.isfinite(remaining):
            budget = max(remaining - self.reserve - RECHECK_MARGIN, 0.0)
        return StopToken.within(budget, parent=self.stop)

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
