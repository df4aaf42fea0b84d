"""A planner point's figures under the registry's names (``plena_opt.metrics``), in SI.

The page's front table reads its columns, headings, units and tooltips from the declarations
(``GET /api/metrics``) and each cell from a point's ``figures``: every declared metric by its
SI name (seconds, tokens/s, J/token, USD per million tokens, W) with its ``<name>_low`` /
``<name>_high`` where the metric carries an interval (None where the plan has no figure). A new
declared metric reaches the page without an edit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from plena_opt.metrics import METRICS

if TYPE_CHECKING:
    from plena_opt.search.result import FrontEntry

# a serving comparison's deployment names one figure otherwise (``search.serving.serving_points``)
_SERVING_ALIAS = {"tps_per_sequence": "tps_per_user"}


def entry_figures(e: FrontEntry, tps_per_device: float | None = None) -> dict[str, Any]:
    """A search front entry's figures (``tps_per_device``: the value to use when the entry has
    none, e.g. tokens/s over the plan's devices)."""
    out: dict[str, Any] = {}
    for m in METRICS:
        out[m.name] = m.to_si(getattr(e, m.field, None))
        for end in m.interval_names:
            out[end] = getattr(e, end, None)
    if out.get("tps_per_device") is None:
        out["tps_per_device"] = tps_per_device
    return out


def serving_figures(e: Mapping[str, Any]) -> dict[str, Any]:
    """A serving comparison deployment's figures (SI already; no interval: a comparison's
    deployments are not bounded)."""
    out: dict[str, Any] = {}
    for m in METRICS:
        v = e.get(m.name, e.get(_SERVING_ALIAS.get(m.name, "")))
        out[m.name] = m.to_si(e.get(m.field)) if v is None and m.field != m.name else v
        out.update(dict.fromkeys(m.interval_names))
    return out
