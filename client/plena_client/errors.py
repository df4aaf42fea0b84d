"""Client-side error type: a failed RPC with its status code and BadRequest field."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


class PlenaRpcError(Exception):
    """A failed call: ``code`` (grpc.StatusCode), ``message`` and the offending ``field`` (the
    first google.rpc.BadRequest field violation, or None)."""

    def __init__(self, code: grpc.StatusCode, message: str, field: str | None = None) -> None:
        super().__init__(f"{code.name}: {message}" + (f" (field {field})" if field else ""))
        self.code = code
        self.message = message
        self.field = field

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> PlenaRpcError:
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        message = error.details() if hasattr(error, "details") else str(error)
        return cls(code, message or "", bad_request_field(error))


def bad_request_field(error: grpc.RpcError) -> str | None:
    """The first BadRequest field violation attached to a failed call, if any."""
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    except (ValueError, AttributeError):
        return None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            if bad.field_violations:
                return bad.field_violations[0].field
    return None
