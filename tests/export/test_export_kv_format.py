"""The exported KV-cache dtype is the one the plan was priced with (issue 23, r18qa).

An NVIDIA ModelOpt checkpoint may declare an FP8 KV cache, and vLLM and SGLang left at their
default dtype store it so (``models.checkpoint.KV_INHERITS``). ``estimate --kv-precision bf16``
prices a bf16 cache: the launch files must then say bf16, not leave the engine to inherit fp8."""

from __future__ import annotations

from plena_opt.export import ExportSpec, plan_bundle

KEY = "tp1-ep1-dp1-pp1-cp1-replace-none-b16"
MODEL = "nvidia/Qwen3-32B-NVFP4"  # hf_quant_config.json: kv_cache_quant_algo FP8


def _serve(engine: str, kv: str | None) -> list[str]:
    spec = ExportSpec(model=MODEL, input_len=1024, output_len=256, kv_precision=kv)
    (c,) = [c for c in plan_bundle(engine, KEY, spec) if c.role == "serve"]
    assert not c.refused, c.refused
    return c.argv


def _kv_flag(argv: list[str]) -> str | None:
    return argv[argv.index("--kv-cache-dtype") + 1] if "--kv-cache-dtype" in argv else None


def test_an_explicit_bf16_kv_cache_is_written():
    # vllm/config/cache.py CacheDType "bfloat16"; sglang arg_groups/fields/model.py "bf16"
    assert _kv_flag(_serve("vllm", "bf16")) == "bfloat16"
    assert _kv_flag(_serve("sglang", "bf16")) == "bf16"


def test_no_kv_format_leaves_the_engine_default_and_fp8_is_written():
    """None: the format estimate priced is the checkpoint's, which the default inherits."""
    assert _kv_flag(_serve("vllm", None)) is None and _kv_flag(_serve("sglang", None)) is None
    assert _kv_flag(_serve("vllm", "fp8")) == "fp8"
    assert _kv_flag(_serve("sglang", "fp8")) == "fp8_e4m3"


def test_tensorrt_llm_says_what_its_default_does_with_a_bf16_cache():
    spec = ExportSpec(model=MODEL, input_len=1024, output_len=256, kv_precision="bf16")
    (c,) = [c for c in plan_bundle("trtllm", KEY, spec) if c.role == "serve"]
    assert not c.refused and "dtype:" not in c.files["trtllm-extra-llm-api-options.yaml"]
    assert any("bf16 KV cache" in n and "checkpoint" in n for n in c.notes)
