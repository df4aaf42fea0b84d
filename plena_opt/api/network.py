"""The network model a front end shows (``describe-noc``, ``collective``): ``deepstack``'s
profiles, ``Network`` and its errors, re-exported so no front end imports ``deepstack``
(docs/ARCHITECTURE.md).

Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "DIMS": "deepstack",
    "Network": "deepstack",
    "NocProfile": "deepstack",
    "ParallelScheme": "deepstack",
    "ProfileError": "deepstack",
    "ProfileTypeError": "deepstack",
    "list_noc_profiles": "deepstack",
    "load_noc_profile": "deepstack",
    "first_devices": "deepstack.gpu_nodes",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
