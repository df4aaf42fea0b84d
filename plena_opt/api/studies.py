"""The study store a front end reads and repairs: open, list, the front of a stored study, journal
scan/salvage, stale-trial and stale-lock care, the dashboard, the gRPC storage proxy of workers.
Re-exports of ``plena_opt.search`` storage modules so no front end imports them
(docs/ARCHITECTURE.md).

Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_STORAGE": "plena_opt.search.storage",
    "METRICS_ATTR": "plena_opt.search.record",
    "PLAN_ATTR": "plena_opt.search.record",
    "VALUES_ATTR": "plena_opt.search.trials",
    "check_owner": "plena_opt.search.serving_store",
    "clear_stale_journal_lock": "plena_opt.search.storage",
    "committed_view": "plena_opt.search.storage",
    "fail_stale_trials": "plena_opt.search.storage",
    "front_trials": "plena_opt.search.trials",
    "list_studies": "plena_opt.search.storage",
    "load_existing_study": "plena_opt.search.storage",
    "open_storage": "plena_opt.search.storage",
    "pareto_mask": "plena_opt.search.pareto",
    "run_dashboard": "plena_opt.search.dashboard",
    "salvage_journal": "plena_opt.search.journal",
    "scan_journal": "plena_opt.search.journal",
    "scored_trials": "plena_opt.search.trials",
    "serve_proxy": "plena_opt.search.grpc_proxy",
    "storage_exists": "plena_opt.search.storage",
    "torn_tail_note": "plena_opt.search.storage",
    "trials_completed": "plena_opt.search.trials",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
