"""What a front end needs around ``search_plans``: the request and result types, progress, the
objectives, the study's default name and the renderers of a front (text, JSON, CSV, plot, goodput,
serving comparison). Re-exports of ``plena_opt.search`` so no front end imports it
(docs/ARCHITECTURE.md).

Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "BASIS_MONTE_CARLO": "plena_opt.search.serving.serving",
    "DEFAULT_OBJECTIVES": "plena_opt.search.space.objectives",
    "MEMORY_STORAGE": "plena_opt.search.request",
    "OBJECTIVES": "plena_opt.search.space.objectives",
    "PLOT_FORMATS": "plena_opt.search.run.output",
    "Progress": "plena_opt.search.run.runner",
    "SearchRequest": "plena_opt.search.request",
    "SearchResult": "plena_opt.search.result",
    "default_study_name": "plena_opt.search.run.runner",
    "no_front_message": "plena_opt.search.run.output",
    "plot_front": "plena_opt.search.run.output",
    "render_comparison": "plena_opt.search.serving.serving_compare",
    "render_goodput": "plena_opt.search.serving.serving",
    "render_json": "plena_opt.search.run.output",
    "render_text": "plena_opt.search.run.output",
    "write_csv": "plena_opt.search.run.output",
    "write_csv_all": "plena_opt.search.run.output",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
