"""Map user-input errors to gRPC status codes (service-conventions §2.5).

``PlenaNotFoundError`` → NOT_FOUND; ``PlenaStoreError`` (a damaged study store) →
FAILED_PRECONDITION; ``PlenaInputError``, ``deepstack.errors.ProfileError`` and
pydantic ``ValidationError`` → INVALID_ARGUMENT with a ``google.rpc.BadRequest`` field violation;
``ServerLimitError`` and ``MemoryError`` → RESOURCE_EXHAUSTED. Anything else is a server bug:
INTERNAL, logged. Every message is capped (``plena_opt.errors.clip``): it travels in a header.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from plena_opt.api.limits import LimitError
from plena_opt.errors import (
    MAX_MESSAGE,
    PlenaInputError,
    PlenaNotFoundError,
    PlenaStoreError,
    clip,
)

log = logging.getLogger("plena_server")

try:  # deepstack is a sibling package; keep the server importable while it is being written
    from plena_opt.api.network import ProfileError
except ImportError:  # pragma: no cover - only while deepstack lacks errors.py

    class ProfileError(ValueError):  # type: ignore[no-redef]
        field = ""


# A request exceeds a limit or the server is at capacity (RESOURCE_EXHAUSTED): the one error of
# the shared request bounds (``plena_opt.api.limits``), which the web app also raises.
ServerLimitError = LimitError


class Unimplemented(Exception):
    """An RPC whose backing library is not available in this build (UNIMPLEMENTED)."""


class RpcAbort(Exception):
    """Raised inside a handler to end the RPC with ``code`` (used by FAILED_PRECONDITION)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _status(code: int, message: str, field: str | None = None) -> grpc.Status:
    # every path is bounded here: the message travels in a response header (8 KiB by default)
    message = clip(message)
    detail = []
    if field is not None:
        field = clip(field, MAX_MESSAGE // 4)
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=field, description=message)
            ]
        )
        packed = any_pb2.Any()
        packed.Pack(bad)
        detail.append(packed)
    return rpc_status.to_status(status_pb2.Status(code=code, message=message, details=detail))


def _pydantic_field(exc: Exception) -> tuple[str, str]:
    errors = exc.errors()  # type: ignore[attr-defined]
    first = errors[0] if errors else {"loc": (), "msg": str(exc)}
    field = ".".join(str(p) for p in first.get("loc", ())) or "request"
    return field, f"{field}: {first.get('msg', 'invalid value')}"


def status_for(exc: BaseException) -> grpc.Status | None:
    """The gRPC status for a known user/limit error, or None for an unexpected one."""
    from pydantic import ValidationError

    if isinstance(exc, PlenaNotFoundError):
        return _status(code_pb2.NOT_FOUND, str(exc), exc.field)
    if isinstance(exc, PlenaStoreError):  # the request is fine; the server's store is not
        return _status(code_pb2.FAILED_PRECONDITION, str(exc), exc.field)
    if isinstance(exc, PlenaInputError | ProfileError):
        return _status(code_pb2.INVALID_ARGUMENT, str(exc), getattr(exc, "field", "") or "request")
    if isinstance(exc, ValidationError):
        field, message = _pydantic_field(exc)
        return _status(code_pb2.INVALID_ARGUMENT, message, field)
    if isinstance(exc, ServerLimitError):
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(exc), exc.field)
    if isinstance(exc, Unimplemented):
        return _status(code_pb2.UNIMPLEMENTED, str(exc))
    if isinstance(exc, ImportError):  # a library of this build is missing or incomplete
        log.error("library unavailable: %s", exc)
        return _status(code_pb2.UNIMPLEMENTED, f"not available in this build: {exc}")
    if isinstance(exc, RpcAbort):
        return _status(exc.code.value[0], str(exc))
    if isinstance(exc, MemoryError):  # a request that needs more memory than the server has
        log.error("request ran out of memory")
        return _status(
            code_pb2.RESOURCE_EXHAUSTED, "the request needs more memory than the server allows"
        )
    return None


def _abort(context: grpc.ServicerContext, exc: BaseException) -> None:
    status = status_for(exc)
    if status is None:
        log.exception("internal error", exc_info=exc)
        status = _status(code_pb2.INTERNAL, f"internal error: {type(exc).__name__}")
    context.abort_with_status(status)


def _is_abort(exc: BaseException) -> bool:
    # context.abort raises a plain Exception subclass; let it propagate untouched.
    return type(exc).__name__ == "_AbortException" or isinstance(exc, grpc.RpcError)


class MalformedRequest:
    """Stands in for a request whose bytes did not parse (answered INVALID_ARGUMENT, not the
    framework's INTERNAL)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def safe_deserializer(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """Wrap a protobuf ``FromString`` so that malformed bytes become :class:`MalformedRequest`."""

    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError and friends
            return MalformedRequest(exc)

    return deserialize


def _malformed(context: grpc.ServicerContext, request: MalformedRequest) -> None:
    context.abort_with_status(
        _status(code_pb2.INVALID_ARGUMENT, f"malformed request: {request.error}", "request")
    )


def unary_errors(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a unary servicer method so that library errors become proper statuses."""

    @functools.wraps(handler)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, MalformedRequest):
            _malformed(context, request)
        try:
            return handler(self, request, context)
        except Exception as exc:  # noqa: BLE001 - classified by status_for
            if _is_abort(exc):
                raise
            _abort(context, exc)

    return wrapper


def stream_errors(handler: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """Decorate a server-streaming servicer method like :func:`unary_errors`."""

    @functools.wraps(handler)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        if isinstance(request, MalformedRequest):
            _malformed(context, request)
        try:
            yield from handler(self, request, context)
        except Exception as exc:  # noqa: BLE001
            if _is_abort(exc):
                raise
            _abort(context, exc)

    return wrapper
