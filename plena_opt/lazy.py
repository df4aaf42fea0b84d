"""Lazy re-exports: a package names what it offers without importing it until first use, so
``import plena_opt`` (and the CLI's ``--help``) stay cheap. A leaf module, like ``errors``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` resolving ``name`` from ``exports[name]`` (the
    module that defines it) on first use."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
