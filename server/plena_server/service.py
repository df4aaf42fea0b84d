"""The ``plena_opt.v1.PlenaOpt`` servicer: validates requests and calls the libraries."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import grpc
from plena_proto import plena_opt_pb2 as pb
from plena_proto import plena_opt_pb2_grpc as pb_grpc

from plena_opt import api, jsonio
from plena_opt.api.wire import (
    estimate_to_proto,
    metrics_to_proto,
    model_to_proto,
    profile_description,
)
from plena_opt.bounds import MAX_CONCURRENCY
from plena_opt.errors import PlenaInputError, PlenaNotFoundError, echo
from plena_server import convert, search_runner, simulate_job, studies
from plena_server.engine_kernel import with_engine
from plena_server.errors import stream_errors, unary_errors
from plena_server.evaluator_cache import EvaluatorCache
from plena_server.limits import ServerLimits, SimulationSlots
from plena_server.registry import SearchRegistry

log = logging.getLogger("plena_server")

EVALUATOR_CACHE = 32  # evaluators kept for repeated Estimate requests
# Bytes those evaluators may hold together (deep size, measured): 256 MiB keeps a handful of
# 1,024-device evaluators warm while a 1e6-layer or 65,536-device request cannot pin memory.
EVALUATOR_CACHE_BYTES = 256 * 2**20
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["PlenaOpt"].full_name


class PlenaOptServicer(pb_grpc.PlenaOptServicer):
    """Implements every RPC of the proto; user errors become INVALID_ARGUMENT / NOT_FOUND."""

    def __init__(self, limits: ServerLimits, storage: str | None = None) -> None:
        self.limits = limits
        self.storage = storage
        self.registry = SearchRegistry(limits.max_concurrent_searches)
        self.simulations = SimulationSlots(limits.max_concurrent_simulates)
        self._evaluators = EvaluatorCache(EVALUATOR_CACHE, EVALUATOR_CACHE_BYTES)

    # --- catalogs ---------------------------------------------------------------------------

    @unary_errors
    def ListModels(self, request: pb.ListModelsRequest, context: grpc.ServicerContext) -> Any:
        from plena_opt.api import catalog

        out = pb.ListModelsResponse()
        for name in catalog.list_models():
            describe = catalog.load_model(name=name).describe()
            out.models.add(
                name=name,
                describe_json=jsonio.dumps(describe, default=str),
                description=model_to_proto(describe),
            )
        return out

    @unary_errors
    def ListProfiles(self, request: pb.ListProfilesRequest, context: grpc.ServicerContext) -> Any:
        kinds = {
            pb.PROFILE_KIND_NOC: "noc",
            pb.PROFILE_KIND_MEMORY: "memory",
            pb.PROFILE_KIND_CHIP: "chip",
        }
        if request.kind != pb.PROFILE_KIND_UNSPECIFIED and request.kind not in kinds:
            raise PlenaInputError("kind", f"kind must be one of {', '.join(pb.ProfileKind.keys())}")
        wanted = [request.kind] if request.kind in kinds else list(kinds)
        out = pb.ListProfilesResponse()
        for kind in wanted:
            loader, lister = convert.profile_api(kinds[kind])
            for name in lister():
                profile = loader(name)
                describe = profile.describe()
                out.profiles.add(
                    kind=kind,
                    name=name,
                    describe_json=jsonio.dumps(describe, default=str),
                    num_devices=int(getattr(profile, "num_devices", 0) or 0),
                    **profile_description(kinds[kind], describe),
                )
        return out

    # --- one plan ---------------------------------------------------------------------------

    def _evaluator(self, system_msg: pb.SystemSpec, workload_msg: pb.Workload,
                   load: pb.ServingLoad | None = None) -> Any:  # fmt: skip
        """An ``Evaluator`` for the request, reused across requests with the same system and
        workload (LRU bounded by ``EVALUATOR_CACHE`` entries and ``EVALUATOR_CACHE_BYTES``), so
        its memoised collectives stay warm."""
        key = (
            system_msg.SerializeToString(deterministic=True)
            + b"|"
            + (workload_msg.SerializeToString(deterministic=True))
            + (b"" if load is None else f"|{load.engine}|{load.moe_kernel}".encode())
        )

        def create() -> Any:
            try:
                return convert.load_inputs(
                    system_msg, workload_msg, self.limits, load=load
                ).evaluator()
            except PlenaInputError as exc:
                raise convert.qualify(exc) from exc

        return self._evaluators.get_or_create(key, create)

    @unary_errors
    def Estimate(self, request: pb.EstimateRequest, context: grpc.ServicerContext) -> Any:
        request = with_engine(request)  # the load's engine: its own, else the workload's
        if request.HasField("load") and request.system.HasField("noc"):
            from plena_opt.api.under_load_wire import pools_of

            try:
                pools = pools_of(request.load)
            except PlenaInputError as exc:
                raise convert.qualify_load(exc) from exc
            if pools is not None:
                if request.load.speculative:
                    raise PlenaInputError(
                        "load.speculative", "speculative decoding prices one aggregated plan"
                    )
                return self._disaggregated(request, pools)
        if request.HasField("load") and not request.workload.HasField("batch_size"):
            # an unset batch under C clients is C, as the CLI's (a bad C is refused naming it)
            if 0 < request.load.concurrency <= MAX_CONCURRENCY:
                request = pb.EstimateRequest.FromString(request.SerializeToString())
                request.workload.batch_size = request.load.concurrency
        if not request.system.HasField("noc"):
            if request.HasField("load"):
                raise PlenaInputError("load", "serving under load needs a GPU chip on a system.noc")
            return self._single_chip(request)
        load = request.load if request.HasField("load") else None
        evaluator = self._evaluator(request.system, request.workload, load)
        plan = convert.to_plan(request.plan)
        try:  # one pricing for both views, as `plena-opt estimate` does
            result = api.estimate_plan(evaluator, plan)
        except PlenaInputError as exc:
            raise convert.qualify(exc) from exc
        reply = pb.EstimateResponse(
            metrics=metrics_to_proto(result.metrics, result.cost),
            estimate_json=result.to_json(),
            mode=result.mode,
            estimate=estimate_to_proto(result.mode, result.document),
        )
        if request.HasField("load"):
            self._under_load(request, plan, reply)
        return reply

    def _disaggregated(self, request: pb.EstimateRequest, pools: Any) -> pb.EstimateResponse:
        """Disaggregated pools under the request's ``load`` (no static estimate: not one plan)."""
        from plena_opt.api.under_load_disagg import serve_disaggregated
        from plena_opt.api.under_load_wire import disagg_to_proto, load_kwargs

        inputs = convert.load_inputs(request.system, request.workload, self.limits,
                                     load=request.load)  # fmt: skip
        try:
            d = serve_disaggregated(inputs, pools, **load_kwargs(request.load),
                                    memory_fraction=_fraction(request.load))  # fmt: skip
        except PlenaInputError as exc:
            raise convert.qualify_load(exc) from exc
        return pb.EstimateResponse(
            mode="disaggregated", disaggregated_under_load=disagg_to_proto(d)
        )

    def _under_load(self, request: pb.EstimateRequest, plan: Any, reply: Any) -> None:
        """The plan under the request's ``load`` into ``reply.under_load`` and, with
        ``load.speculative``, ``reply.speculative`` (errors name ``load.<field>``)."""
        from plena_opt.api.speculative import speculate, speculation_of_load, verdict_to_proto
        from plena_opt.api.under_load_wire import load_kwargs, under_load_to_proto

        inputs = convert.load_inputs(request.system, request.workload, self.limits,
                                     load=request.load)  # fmt: skip
        try:
            spec = speculation_of_load(request.load)
            kwargs = load_kwargs(request.load)
            w = request.workload  # unset under a rate: the engine's default cap
            batch = w.batch_size if w.HasField("batch_size") else None
            load = api.serve_under_load(inputs, plan, **kwargs, batch=batch,
                                        memory_fraction=_fraction(request.load))  # fmt: skip
            reply.under_load.CopyFrom(under_load_to_proto(load))
            if spec is not None:
                verdict = speculate(inputs, plan, load, spec, kwargs["engine"])
                reply.speculative.CopyFrom(verdict_to_proto(verdict))
        except PlenaInputError as exc:
            raise convert.qualify_load(exc) from exc

    def _single_chip(self, request: pb.EstimateRequest) -> pb.EstimateResponse:
        """No NoC and a one-device plan: the single-chip decoder estimate (analytic-model §2)."""
        plan = convert.to_plan(request.plan)
        if plan.world_size != 1:
            raise PlenaInputError("system.noc", "a multi-device plan needs a NoC profile")
        inputs = convert.load_inputs(request.system, request.workload, self.limits, noc=False)
        try:
            result = api.estimate_single_chip(inputs)
        except PlenaInputError as exc:
            raise convert.qualify(exc) from exc
        return pb.EstimateResponse(
            estimate_json=result.to_json(),
            mode=result.mode,
            estimate=estimate_to_proto(result.mode, result.document),
        )

    @unary_errors
    def Simulate(self, request: pb.SimulateRequest, context: grpc.ServicerContext) -> Any:
        return simulate_job.simulate(self, request, context)

    # --- search -----------------------------------------------------------------------------

    @unary_errors
    def Search(self, request: pb.SearchRequest, context: grpc.ServicerContext) -> Any:
        job = search_runner.SearchJob(self, request, context)
        return job.run_unary()

    @stream_errors
    def StreamSearch(
        self, request: pb.SearchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.SearchEvent]:
        job = search_runner.SearchJob(self, request, context)
        yield from job.run_stream()

    @unary_errors
    def CancelSearch(self, request: pb.CancelSearchRequest, context: grpc.ServicerContext) -> Any:
        if not request.study_name:
            raise PlenaInputError("study_name", "study_name is required")
        cancelled = self.registry.cancel(request.study_name)
        if not cancelled and not studies.study_exists(self.storage, request.study_name):
            raise PlenaNotFoundError("study_name", f"unknown study {echo(request.study_name)}")
        return pb.CancelSearchResponse(cancelled=cancelled)

    @unary_errors
    def GetStudy(self, request: pb.GetStudyRequest, context: grpc.ServicerContext) -> Any:
        if not request.study_name:
            raise PlenaInputError("study_name", "study_name is required")
        out = studies.get_study(self.storage, request.study_name)
        out.running = self.registry.is_running(request.study_name)
        return out

    @unary_errors
    def ListStudies(self, request: pb.ListStudiesRequest, context: grpc.ServicerContext) -> Any:
        return studies.list_studies(self.storage)


def _fraction(load: pb.ServingLoad) -> float | None:
    """``load.memory_fraction`` (unset: None, the exported default; checked where priced)."""
    return load.memory_fraction if load.HasField("memory_fraction") else None
