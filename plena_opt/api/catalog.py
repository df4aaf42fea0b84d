"""What a front end names and loads: the catalogs of models, chips and memories, the loaders, the
defaults and the problem/plan types (``ProblemSpec``, ``Plan``, ``Workload``), a GPU chip's
profile and the price list. Re-exports of ``plena_opt.estimate``, ``chip``, ``memory``, ``models``
so no front end imports them (docs/ARCHITECTURE.md).

Names are imported on first use (``plena_opt.lazy``), so importing this module is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_MEMORY": "plena_opt.estimate.plan",
    "DEFAULT_MODEL": "plena_opt.estimate.plan",
    "DEFAULT_NOC": "plena_opt.estimate.plan",
    "EvaluatorInputs": "plena_opt.estimate.problem",
    "GpuChipProfile": "plena_opt.chip.gpu",
    "HbmStoragePrecision": "plena_opt.memory",
    "InlineDocument": "plena_opt.estimate.problem",
    "MAX_WORKLOAD": "plena_opt.estimate.plan",
    "ModelSpec": "plena_opt.models",
    "PLAN_DIMS": "plena_opt.estimate.plan",
    "Plan": "plena_opt.estimate.plan",
    "ProblemSpec": "plena_opt.estimate.problem",
    "StackedDramModel": "plena_opt.memory",
    "Workload": "plena_opt.estimate.plan",
    "architecture": "plena_opt.models.summary",
    "check_format": "plena_opt.chip.precision",
    "chip_carries_memory": "plena_opt.estimate.problem",
    "chip_memory": "plena_opt.estimate.pricer",
    "chip_source_kind": "plena_opt.estimate.problem",
    "count_parameters": "plena_opt.models.params",
    "fixed_bandwidth": "plena_opt.memory",
    "gpu_memory": "plena_opt.estimate.gpu",
    "is_gpu": "plena_opt.estimate.gpu",
    "list_chip_profiles": "plena_opt.chip",
    "list_memory_profiles": "plena_opt.memory",
    "list_models": "plena_opt.models",
    "list_noc_profiles": "deepstack",
    "load_chip": "plena_opt.chip",
    "load_memory": "plena_opt.memory",
    "load_model": "plena_opt.models",
    "load_prices": "plena_opt.estimate.cost",
    "model_info": "plena_opt.models",
    "names_gpu_chip": "plena_opt.estimate.problem",
    "show_fields": "plena_opt.models.summary",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
