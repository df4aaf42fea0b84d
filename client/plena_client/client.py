"""Typed client of the ``plena_opt.v1.PlenaOpt`` service.

Every call carries a deadline (``timeout`` seconds; defaults below). Only the read-only,
idempotent RPCs (ListModels, ListProfiles, GetStudy, Estimate, Simulate) are retried, and only on
UNAVAILABLE, by gRPC's own retry policy (service config); Search/StreamSearch/CancelSearch are
never retried because a repeated search would add trials to the study. ``credentials`` (a
bearer token, TLS, a client certificate) reach a shared server (:mod:`plena_client.credentials`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from plena_proto import plena_opt_pb2 as pb
from plena_proto import plena_opt_pb2_grpc as pb_grpc

from plena_client.credentials import Credentials
from plena_client.errors import PlenaRpcError

SERVICE = "plena_opt.v1.PlenaOpt"
DEFAULT_TIMEOUT_S = 30.0  # cheap RPCs
DEFAULT_SEARCH_TIMEOUT_S = 600.0  # searches (the server sizes its budget to the deadline)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # matches the server (proto header)
RETRYABLE_METHODS = ("ListModels", "ListProfiles", "GetStudy", "Estimate", "Simulate")


def _service_config() -> str:
    return json.dumps(
        {
            "methodConfig": [
                {
                    "name": [{"service": SERVICE, "method": m} for m in RETRYABLE_METHODS],
                    "retryPolicy": {
                        "maxAttempts": 4,
                        "initialBackoff": "0.1s",
                        "maxBackoff": "1s",
                        "backoffMultiplier": 2,
                        "retryableStatusCodes": ["UNAVAILABLE"],
                    },
                }
            ]
        }
    )


def channel_options() -> list[tuple[str, Any]]:
    """Message-size limits and the retry policy of the client channel."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", _service_config()),
    ]


Source = str | dict | Path | None


def _json_text(value: dict | Path) -> str:
    if isinstance(value, Path):
        return value.read_text()
    return json.dumps(value)


def model_source(model: str | dict | Path, display_name: str = "") -> pb.ModelSource:
    """A built-in model name, an HF config dict, or a path to an HF config.json (sent inline)."""
    if isinstance(model, str):
        return pb.ModelSource(name=model)
    name = display_name or (model.stem if isinstance(model, Path) else "custom")
    return pb.ModelSource(hf_config_json=_json_text(model), display_name=name)


def profile_source(profile: str | dict | Path) -> pb.ProfileSource:
    """A built-in profile name, a profile dict, or a path to a profile JSON (sent inline)."""
    if isinstance(profile, str):
        return pb.ProfileSource(name=profile)
    return pb.ProfileSource(json=_json_text(profile))


def system_spec(
    model: str | dict | Path,
    noc: str | dict | Path,
    memory: Source | pb.ProfileSource = None,
    chip: Source = None,
) -> pb.SystemSpec:
    """Build a ``SystemSpec``; None keeps the server default (memory, chip)."""
    spec = pb.SystemSpec(model=model_source(model), noc=profile_source(noc))
    if isinstance(memory, pb.ProfileSource):
        spec.memory.CopyFrom(memory)
    elif memory is not None:
        spec.memory.CopyFrom(profile_source(memory))
    if chip is not None:
        spec.chip.CopyFrom(profile_source(chip))
    return spec


def workload(*, engine: str = "", moe_kernel: str = "", eplb_redundant: int = 0,
             **fields: Any) -> pb.Workload:  # fmt: skip
    """A ``Workload``: ``fields`` by proto name (``batch_size``, ``input_seq_len``,
    ``output_seq_len``, ``precision``, ``kv_precision``, …; unset: the server's defaults) and the
    serving engine whose kernels price the plan on a GPU (``"vllm"``, ``"sglang"``,
    ``"trtllm"``; ``plena-opt estimate --engine`` with or without a load), the MoE kernel of an
    MXFP4 checkpoint's experts under it (``--moe-kernel``) and EPLB redundant experts
    (``--eplb-redundant``). Bad values are refused by the server naming ``workload.<field>``."""
    return pb.Workload(engine=engine, moe_kernel=moe_kernel, eplb_redundant=eplb_redundant,
                       **fields)  # fmt: skip


class PlenaClient:
    """Typed wrapper around the generated stub; raises :class:`PlenaRpcError` on failure."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        search_timeout: float = DEFAULT_SEARCH_TIMEOUT_S,
        channel: grpc.Channel | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.search_timeout = search_timeout
        # None: no TLS, the token of $PLENA_OPT_TOKEN if set
        self.credentials = credentials if credentials is not None else Credentials.load()
        self._metadata = self.credentials.metadata()
        self._channel = channel or self.credentials.channel(target, channel_options())
        self._stub = pb_grpc.PlenaOptStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PlenaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, request: Any, timeout: float | None) -> Any:
        try:
            return getattr(self._stub, method)(
                request, timeout=timeout or self.timeout, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise PlenaRpcError.from_rpc_error(exc) from None

    # --- health -----------------------------------------------------------------------------

    def health(self, service: str = "", timeout: float | None = None) -> str:
        """Health status name of ``service`` ("" = the whole server), e.g. "SERVING"."""
        try:
            reply = self._health.Check(
                health_pb2.HealthCheckRequest(service=service),
                timeout=timeout or self.timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as exc:
            raise PlenaRpcError.from_rpc_error(exc) from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the channel connects (raises ``grpc.FutureTimeoutError``)."""
        grpc.channel_ready_future(self._channel).result(timeout=timeout)

    # --- catalogs ---------------------------------------------------------------------------

    def list_models(self, timeout: float | None = None) -> list[pb.ModelInfo]:
        return list(self._call("ListModels", pb.ListModelsRequest(), timeout).models)

    def list_profiles(
        self, kind: int = pb.PROFILE_KIND_UNSPECIFIED, timeout: float | None = None
    ) -> list[pb.ProfileInfo]:
        return list(self._call("ListProfiles", pb.ListProfilesRequest(kind=kind), timeout).profiles)

    def get_study(self, study_name: str, timeout: float | None = None) -> pb.GetStudyResponse:
        return self._call("GetStudy", pb.GetStudyRequest(study_name=study_name), timeout)

    def list_studies(self, timeout: float | None = None) -> pb.ListStudiesResponse:
        return self._call("ListStudies", pb.ListStudiesRequest(), timeout)

    # --- evaluation -------------------------------------------------------------------------

    def estimate(
        self,
        system: pb.SystemSpec,
        plan: pb.Plan | None = None,
        workload: pb.Workload | None = None,
        timeout: float | None = None,
        load: pb.ServingLoad | None = None,
        *,
        engine: str | None = None,
        moe_kernel: str | None = None,
    ) -> pb.EstimateResponse:
        """One plan's estimate; with ``load`` (a concurrency or request rate and an engine) also
        the plan under that serving workload (``EstimateResponse.under_load``). ``engine`` /
        ``moe_kernel`` (None: the workload's) set ``Workload.engine`` / ``moe_kernel``: the
        engine's kernels price the static estimate without a load, as ``plena-opt estimate
        --engine E`` does, and the load takes that engine where it names none."""
        request = pb.EstimateRequest(
            system=system, plan=plan or pb.Plan(), workload=workload, load=load
        )
        if engine is not None:
            request.workload.engine = engine
        if moe_kernel is not None:
            request.workload.moe_kernel = moe_kernel
        return self._call("Estimate", request, timeout)

    def simulate(self, request: pb.SimulateRequest, timeout: float | None = None) -> Any:
        return self._call("Simulate", request, timeout or self.search_timeout)

    # --- search -----------------------------------------------------------------------------

    def search(self, request: pb.SearchRequest, timeout: float | None = None) -> pb.SearchResult:
        """Unary search; the server returns a partial front if the deadline comes first."""
        return self._call("Search", request, timeout or self.search_timeout)

    def stream_search(
        self, request: pb.SearchRequest, timeout: float | None = None
    ) -> Iterator[pb.SearchEvent]:
        """Progress events, trace chunks, then the result (one ``SearchEvent`` each). To stop
        early, use :meth:`cancel_search` (the stream then ends with the partial result) or
        cancel the call returned by :meth:`stream_search_call`."""
        call = self.stream_search_call(request, timeout)
        try:
            yield from call
        except grpc.RpcError as exc:
            raise PlenaRpcError.from_rpc_error(exc) from None

    def stream_search_call(self, request: pb.SearchRequest, timeout: float | None = None) -> Any:
        """The raw streaming call (iterable of events with ``cancel()``)."""
        return self._stub.StreamSearch(
            request, timeout=timeout or self.search_timeout, metadata=self._metadata
        )

    def cancel_search(self, study_name: str, timeout: float | None = None) -> bool:
        reply = self._call("CancelSearch", pb.CancelSearchRequest(study_name=study_name), timeout)
        return reply.cancelled
