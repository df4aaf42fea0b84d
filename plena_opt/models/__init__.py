"""Model catalog (shipped Hugging Face configs) and ``ModelSpec`` (analytic-model §2.3, §4.1)."""

from plena_opt.models.catalog import (
    builtin_config,
    list_models,
    load_model,
    model_info,
    read_config_file,
)
from plena_opt.models.model_spec import ModelSpec

__all__ = [
    "ModelSpec",
    "builtin_config",
    "list_models",
    "load_model",
    "model_info",
    "read_config_file",
]
