"""plena-opt gRPC client library (typed wrapper with default deadlines and safe retries)."""

from plena_proto import plena_opt_pb2 as pb

from plena_client.client import (
    PlenaClient,
    channel_options,
    model_source,
    profile_source,
    system_spec,
    workload,
)
from plena_client.credentials import TOKEN_ENV, Credentials
from plena_client.errors import PlenaRpcError

__all__ = [
    "TOKEN_ENV",
    "Credentials",
    "PlenaClient",
    "PlenaRpcError",
    "channel_options",
    "model_source",
    "pb",
    "profile_source",
    "system_spec",
    "workload",
]
