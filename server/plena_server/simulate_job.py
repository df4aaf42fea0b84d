"""Simulate RPC (placeholder until plena_opt.pipeline lands)."""

from __future__ import annotations

from typing import Any

from plena_server.errors import Unimplemented


def simulate(servicer: Any, request: Any, context: Any) -> Any:
    raise Unimplemented("Simulate is not available in this build (plena_opt.pipeline)")
