"""Which serving engines run on which vendor's GPUs (one rule for estimate, search, export and
validate): TensorRT-LLM is built on CUDA, NVIDIA GPUs only (no ROCm build); vLLM and SGLang ship
ROCm builds for AMD Instinct (their ROCm docker images)."""

from __future__ import annotations

NVIDIA_ONLY_ENGINES = frozenset({"trtllm"})
# the built-in GPU profiles of AMD parts (profiles/mi300x.json, mi325x.json: AMD Instinct)
AMD_CHIPS = frozenset({"mi325x", "mi300x"})


def engine_refusal(engine: str, chip: str | None) -> str | None:
    """Why ``engine`` does not run on GPU ``chip`` (a profile name), or None where it does."""
    if engine in NVIDIA_ONLY_ENGINES and chip in AMD_CHIPS:
        return (
            f"engine {engine} runs on NVIDIA GPUs only (TensorRT-LLM has no ROCm build): {chip} "
            "is an AMD GPU; use vllm or sglang"
        )
    return None
