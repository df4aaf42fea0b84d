"""Credentials for a shared server: a bearer token (``authorization: Bearer …`` on every call)
and TLS, with a client certificate for mutual TLS.

The token comes from ``token=``, else a token file, else the environment variable
``PLENA_OPT_TOKEN``. TLS is used when ``tls=True`` or any PEM file is given: ``root_ca`` (the
server's CA; None: the system's roots), ``client_cert`` + ``client_key`` (mutual TLS)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import grpc

TOKEN_ENV = "PLENA_OPT_TOKEN"


def _read(path: str | Path | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


@dataclass(frozen=True)
class Credentials:
    """What the client sends: ``token`` (None: none), TLS roots and the client key pair."""

    token: str | None = None
    tls: bool = False
    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None

    @classmethod
    def load(
        cls,
        *,
        token: str | None = None,
        token_file: str | Path | None = None,
        root_ca: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        tls: bool = False,
        environ: dict[str, str] | None = None,
    ) -> Credentials:
        """Read the files (``OSError`` for an unreadable one; ``ValueError`` for a client
        certificate without its key or the reverse)."""
        if bool(client_cert) != bool(client_key):
            raise ValueError("a client certificate and its key go together")
        if token is None and token_file is not None:
            token = Path(token_file).read_text().strip()
        if token is None:
            token = (os.environ if environ is None else environ).get(TOKEN_ENV) or None
        return cls(
            token=token.strip() if token else None,
            tls=tls or any((root_ca, client_cert)),
            root_certificates=_read(root_ca),
            certificate_chain=_read(client_cert),
            private_key=_read(client_key),
        )

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Call metadata: the bearer token, if any."""
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def channel(self, target: str, options: list) -> grpc.Channel:
        """A secure channel when TLS is asked for, else a plaintext one."""
        if not self.tls:
            return grpc.insecure_channel(target, options=options)
        creds = grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )
        return grpc.secure_channel(target, creds, options=options)
