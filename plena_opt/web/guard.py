"""Who may reach the web app: the ``Host`` names it answers (DNS rebinding) and the bearer token
of a shared server.

Hosts: only the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``), the address the app is
bound to (unless a wildcard such as ``0.0.0.0``) and the names given with ``--allowed-host``;
any other ``Host`` is HTTP 400 ``Invalid host header`` (Starlette's ``TrustedHostMiddleware``).
A page on a name that rebinds to 127.0.0.1 sends its own name as ``Host`` and so is refused.

Token: with ``--auth-token-file`` every request needs ``Authorization: Bearer <token>``, or
HTTP Basic with the token as password (what a browser sends after its login prompt); otherwise
HTTP 401 with an empty body (the same for a missing and a wrong token) and
``WWW-Authenticate: Basic`` so that a browser asks.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from plena_opt.api.access import bearer_matches, secret_matches
from plena_opt.errors import PlenaInputError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
#: Bind addresses that name no host (every interface): never an allowed Host by themselves.
WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]")
_NAME = re.compile(r"(\*\.)?[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})*\.?")


def host_name(address: str) -> str:
    """How a bind address appears in a ``Host`` header (an IPv6 address in brackets)."""
    bare = address.strip("[]")
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]"
    except ValueError:
        pass
    return address


def check_allowed_host(name: str) -> str:
    """A ``--allowed-host`` value: a host name (``*.example.com`` for its subdomains) or an IP
    address, without a port; ``PlenaInputError`` otherwise (``*`` alone would allow any)."""
    flag = "--allowed-host"
    try:
        return host_name(str(ipaddress.ip_address(name.strip("[]"))))
    except ValueError:
        pass
    if len(name) > 253 or not _NAME.fullmatch(name):
        raise PlenaInputError(
            "allowed_host",
            f"{flag} must be a host name or IP address without a port (got {name[:64]!r}); "
            "'*.example.com' allows its subdomains",
        )
    return name.lower()


def allowed_hosts(bound: str | None, extra: Iterable[str] = ()) -> list[str]:
    """The ``Host`` names the app answers: loopback, ``bound`` (not a wildcard) and ``extra``."""
    out = list(LOOPBACK_HOSTS)
    if bound is not None and bound not in WILDCARD_BINDS:
        out.append(host_name(bound).lower())
    out += [check_allowed_host(n) for n in extra]
    return list(dict.fromkeys(out))


def _authorised(header: str | None, token: str) -> bool:
    if bearer_matches(header, token):
        return True
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return secret_matches(decoded.partition(":")[2], token)


class TokenAuth:
    """ASGI middleware: HTTP 401 (empty body) unless the request carries the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = None
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                header = value.decode("latin-1")
                break
        if _authorised(header, self.token):
            await self.app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"www-authenticate", b'Basic realm="plena-opt ui"'),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})
