"""Search RPCs (placeholder until plena_opt.search lands)."""

from __future__ import annotations
from typing import Any
from plena_server.errors import Unimplemented


class SearchJob:
    def __init__(self, servicer: Any, request: Any, context: Any, streaming: bool) -> None:
        raise Unimplemented("Search is not available in this build (plena_opt.search.run_search)")


def study_exists(storage: Any, name: str) -> bool:
    return False


def get_study(storage: Any, name: str) -> Any:
    raise Unimplemented("GetStudy is not available in this build")
