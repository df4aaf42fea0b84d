"""Deprecated: the simulator is ``plena_opt.simulator`` now; this shim keeps the old names."""

from __future__ import annotations

import warnings

import plena_opt.simulator as _simulator

warnings.warn(
    "plena_opt.pipeline is deprecated; import from plena_opt.simulator",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = list(_simulator.__all__)
globals().update({name: getattr(_simulator, name) for name in __all__})
