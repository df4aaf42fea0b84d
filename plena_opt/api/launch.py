"""Launch bundles of a plan for a front end (``export``, ``search --export``): re-exports of
``plena_opt.export`` so no front end imports it (docs/ARCHITECTURE.md).

Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "ENGINE_NAMES": "plena_opt.export",
    "ExportSpec": "plena_opt.export",
    "bundle": "plena_opt.export",
    "write_bundle": "plena_opt.export.files",
    "write_deployment": "plena_opt.export.files",
    "write_exports": "plena_opt.export.files",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
