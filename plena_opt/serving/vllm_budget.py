"""vLLM's default step token budget (``max_num_batched_tokens``), by release and GPU memory.

``EngineArgs.get_batch_defaults`` (``vllm/engine/arg_utils.py``) picks the OpenAI API server's
defaults from the device's total memory. Read from each release's wheel (PyPI):

* 0.15.1 (lines 1837-1855), 0.27.0 and 0.27.1 (2544-2562): ``device_memory >= 70 GiB`` and not an
  A100 → ``max_num_batched_tokens`` 8192, ``max_num_seqs`` 1024; else 2048 / 256.
* 0.28.0 (lines 2582-2610; its wheel's files are dated 2026-08-25 00:03 UTC, the v0.28.0 tag
  2026-08-24; 0.27.1's are dated 2026-08-11) adds a tier above it ("for GPUs like B200/B300
  with >= 160GB memory, use the largest defaults"): ``device_memory >= 160 GiB`` → 16384 / 1024.
  0.34.0 (lines 3010-3043) keeps it (and also keeps GB10, cc 12.1, on the small tier).

So a B200 (179 GiB), GB200, B300 or MI325X runs 16384 from 0.28.0 and 8192 before it; an H100 /
H200 (80 / 141 GiB) runs 8192 in every release here. The A100 and GB10 exclusions are not
modelled (no built-in chip is either). Pre-releases are refused (``serving.vllm_async``).
"""

from __future__ import annotations

from plena_opt.serving.vllm_async import vllm_version

GIB = 1 << 30
LARGE_TIER_FROM = (0, 28, 0)  # first release with the >= 160 GiB tier
# the 0.28.0 tag commit's date: a run measured before it ran an older release
LARGE_TIER_RELEASED = "2026-08-24"
LARGE_TIER_GIB = 160  # >= this: 16384 tokens from 0.28.0
BIG_GIB = 70  # >= this (not an A100): 8192 tokens; below: 2048


def vllm_large_tier(version: str, field: str = "backend_version") -> bool:
    """Whether vLLM ``version`` has the >= 160 GiB tier (from 0.28.0); raises naming ``field``."""
    return vllm_version(version, field) >= LARGE_TIER_FROM


def vllm_batch_defaults(gpu_memory_bytes: float, large_tier: bool) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of vLLM's OpenAI server on a GPU of
    ``gpu_memory_bytes`` (bytes), ``large_tier``: the release has the >= 160 GiB tier."""
    if large_tier and gpu_memory_bytes >= LARGE_TIER_GIB * GIB:
        return 16384, 1024
    if gpu_memory_bytes >= BIG_GIB * GIB:
        return 8192, 1024
    return 2048, 256


def vllm_default_budget(
    gpu_memory_bytes: float, version: str, field: str = "backend_version"
) -> int:
    """The default step budget (tokens) of vLLM ``version`` on a GPU of ``gpu_memory_bytes``."""
    return vllm_batch_defaults(gpu_memory_bytes, vllm_large_tier(version, field))[0]
