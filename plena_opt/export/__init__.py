"""Launch bundles for serving engines (vLLM, SGLang, TensorRT-LLM) from a plan (issues 16, 25)."""

from plena_opt.export.bundle import bundle, deployment_bundle, plan_bundle
from plena_opt.export.launch import (
    ENGINE_NAMES,
    ENGINES,
    ExportSpec,
    LaunchConfig,
    parse_deployment_key,
    parse_plan_key,
    parse_point_key,
)

__all__ = [
    "ENGINES",
    "ENGINE_NAMES",
    "ExportSpec",
    "LaunchConfig",
    "bundle",
    "deployment_bundle",
    "parse_deployment_key",
    "parse_plan_key",
    "parse_point_key",
    "plan_bundle",
]
