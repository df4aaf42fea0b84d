"""Bearer-token access to a shared server (``plena-opt serve --auth-token-file``).

Every RPC must carry the metadata ``authorization: Bearer <token>``; a missing or wrong one ends
the call with UNAUTHENTICATED and an empty message (the same for both, no detail). The health
service (``grpc.health.v1.Health``) stays open so that load balancers and orchestrators can probe
the server without the token; it tells nothing but SERVING / NOT_SERVING. Reflection needs the
token like the API. The comparison is constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from plena_opt.api.access import bearer_matches

#: Methods callable without the token (prefix of the full method name).
OPEN_PREFIXES = ("/grpc.health.v1.Health/",)


def _deny(request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "")


def _deny_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that refuses without reading the request."""
    kinds: dict[tuple[bool, bool], Callable[..., grpc.RpcMethodHandler]] = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    make = kinds[(handler.request_streaming, handler.response_streaming)]
    return make(_deny)


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuse every RPC but the open ones unless it carries the bearer token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method or ""
        handler = continuation(handler_call_details)
        if handler is None or method.startswith(OPEN_PREFIXES):
            return handler
        header = None
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                header = value if isinstance(value, str) else None
                break
        if bearer_matches(header, self.token):
            return handler
        return _deny_handler(handler)
