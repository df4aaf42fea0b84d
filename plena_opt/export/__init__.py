"""Launch configurations for serving engines (vLLM, SGLang) from a plan (issue 16)."""

from plena_opt.export.launch import ENGINES, LaunchConfig, export_plan, parse_plan_key

__all__ = ["ENGINES", "LaunchConfig", "export_plan", "parse_plan_key"]
