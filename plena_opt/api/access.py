"""Who may use a shared server (the gRPC server and the web app): the bearer token read from a
file, compared in constant time. The client side (``plena_client``) reads its token itself."""

from __future__ import annotations

import hmac
from pathlib import Path

from plena_opt.errors import PlenaInputError

#: Longest token file (bytes); a token is one line of printable ASCII without spaces.
MAX_TOKEN_BYTES = 4096
#: Shortest token: 16 characters (about 96 bits from a base64 or hex generator).
MIN_TOKEN_CHARS = 16


def read_token_file(path: str | Path, flag: str = "--auth-token-file") -> str:
    """The token in ``path`` (surrounding whitespace stripped); ``PlenaInputError`` naming
    ``flag`` for an unreadable, empty, short, over-long or non-printable token."""
    field = flag.lstrip("-").replace("-", "_")
    try:
        data = Path(path).read_bytes()[: MAX_TOKEN_BYTES + 1]
    except OSError as exc:
        raise PlenaInputError(field, f"{flag}: cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_TOKEN_BYTES:
        raise PlenaInputError(field, f"{flag}: the token file is above {MAX_TOKEN_BYTES} bytes")
    token = data.strip()
    if not all(0x21 <= b <= 0x7E for b in token):
        raise PlenaInputError(field, f"{flag}: the token must be one word of printable ASCII")
    if len(token) < MIN_TOKEN_CHARS:
        raise PlenaInputError(
            field, f"{flag}: the token must have at least {MIN_TOKEN_CHARS} characters"
        )
    return token.decode("ascii")


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an ``authorization`` value is ``Bearer <token>`` (constant-time comparison)."""
    expected = f"Bearer {token}".encode()
    given = (header or "").encode("utf-8", "surrogateescape")
    return hmac.compare_digest(given, expected)


def secret_matches(given: str | None, token: str) -> bool:
    """Whether ``given`` is the token itself (constant-time; a Basic-auth password)."""
    return hmac.compare_digest((given or "").encode("utf-8", "surrogateescape"), token.encode())
