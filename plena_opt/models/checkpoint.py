"""The weight format a checkpoint ships in, read from its Hugging Face ``quantization_config``.

A plan on a GPU runs the checkpoint's format unless the user asks to quantise
(``--allow-quantize``): the format is the product's name (``plena_opt.chip.precision.FORMATS``)
of what the engine loads. Rules, by ``quantization_config.quant_method``:

* absent: the checkpoint's ``torch_dtype`` (``bfloat16``/``float16``/absent: ``bf16``);
* ``mxfp4`` (gpt-oss): ``mxfp4`` (OCP MX e2m1 weights, e8m0 scale per 32);
* ``fp8`` (DeepSeek-V3, Qwen3-FP8): ``fp8`` (e4m3, per-tensor or 128x128 block scales);
* ``modelopt`` (NVIDIA ``…-NVFP4`` / ``…-FP8``): ``quant_algo`` ``NVFP4`` → ``fp4``,
  ``FP8`` → ``fp8``;
* ``compressed-tensors`` (Kimi-K2-Thinking INT4, RedHat ``…-FP8``): the weights' ``num_bits`` and
  ``type`` of its first config group: 4-bit ``int`` → ``int4``, 8-bit ``float`` → ``fp8``;
* ``awq``/``gptq``: 4-bit → ``int4``.

Anything else is refused naming ``quantization_config`` (never priced as a neighbour format).
``experts_only``: the config keeps everything but the routed experts unquantised (its
``modules_to_not_convert``, or compressed-tensors' ``ignore``, lists ``self_attn``: gpt-oss's
MXFP4 and Kimi-K2-Thinking's INT4 checkpoints).

Hugging Face ids resolve by the catalog's ``hf_id`` and ``hf_aliases`` (catalog.json), then by
the repository name with a quantisation suffix (``-NVFP4``, ``-FP8``, ``-FP4``, …, which sets the
format) and an instruction-tuning suffix (``-Instruct``, …: the same architecture) removed, under
any owner (``nvidia/DeepSeek-R1-NVFP4`` → ``deepseek-r1`` at ``fp4``; a quantiser's revision
after the suffix, ``-FP4-v2``, is dropped too). An alias may ship another format than its
entry's checkpoint (catalog ``hf_alias_checkpoints``: Kimi-K2-Thinking's INT4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from plena_opt.errors import PlenaInputError

FIELD = "quantization_config"
_DTYPES = {None: "bf16", "bfloat16": "bf16", "float16": "bf16", "float32": "bf16"}
_MODELOPT = {"NVFP4": "fp4", "FP8": "fp8"}
# repository-name suffix → weight format (NVIDIA ModelOpt, Qwen, RedHat, community names)
QUANT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("-nvfp4", "fp4"),
    ("-mxfp4", "mxfp4"),
    ("-fp4", "fp4"),
    ("-fp8-dynamic", "fp8"),
    ("-fp8-kv", "fp8"),  # AMD Quark (amd/Llama-3.1-70B-Instruct-FP8-KV): fp8 weights and KV
    ("-fp8", "fp8"),
    ("-w4a16", "int4"),
    ("-int4", "int4"),
    ("-gptq-int4", "int4"),
    ("-awq", "int4"),
)
# MLA attention projections NVIDIA's ModelOpt NVFP4 DeepSeek-R1 checkpoints keep in bf16
# (``Workload.bf16_attention``). Model cards: nvidia/DeepSeek-R1-FP4 (renamed
# nvidia/DeepSeek-R1-NVFP4: the same "add model card" commit 4daeb23) and -0528-FP4 quantise "the
# linear operators within transformer blocks" but leave the attention layers unquantised; the
# -FP4-v2 / -0528-FP4-v2 cards: "compared to nvidia/DeepSeek-R1(-0528)-FP4, this checkpoint
# additionally quantizes the wo module in attention layers" (o_proj). The dense MLPs, shared and
# routed experts are NVFP4 in both.
BF16_ATTENTION = ("", "all", "all_but_o")


def nvfp4_attention(hf_id: str) -> str:
    """``BF16_ATTENTION`` value of an NVIDIA NVFP4 DeepSeek checkpoint named ``hf_id`` (a ``-v2``
    revision quantises o_proj too); "" for any other id."""
    name = hf_id.rsplit("/", 1)[-1].lower()
    if not hf_id.lower().startswith("nvidia/deepseek-") or not ("-fp4" in name or "-nvfp4" in name):
        return ""
    return "all_but_o" if name.endswith("-v2") else "all"


# suffixes of post-trained checkpoints that keep the base model's architecture fields
VARIANT_SUFFIXES = ("-instruct", "-it", "-chat", "-base")
# a re-upload of a quantised checkpoint (``nvidia/DeepSeek-R1-0528-FP4-v2``, AMD's
# ``amd/DeepSeek-R1-0528-MXFP4-Preview``): the suffix is dropped only after a quantisation
# suffix, where it names the quantiser's revision of the same weights
REVISION = re.compile(r"-(?:v\d+|preview)$", re.IGNORECASE)


# NVIDIA's ModelOpt FP8 checkpoints (``nvidia/<model>-FP8``: hf_quant_config.json / config.json
# ``quant_algo: FP8``, e.g. nvidia/Llama-3.3-70B-Instruct-FP8, nvidia/Llama-3.1-8B-Instruct-FP8)
# store a calibrated per-tensor ``input_scale`` next to each linear layer's weights: static
# activation scales, which vLLM's ``ModelOptFp8LinearMethod`` ("static weight scale and
# activation scale") quantises with in one pass (``chip.gpu.kernel_bytes.STATIC_QUANT_PASSES``).
# Every other fp8 id keeps the dynamic default (two passes): compressed-tensors "FP8-dynamic"
# checkpoints (RedHatAI ``…-FP8-dynamic``: input_activations ``dynamic: true``) are dynamic, and
# an id alone does not say which scheme other quantisers used (Neural Magic's older AutoFP8
# ``…-FP8`` ones were ``activation_scheme: static``, later compressed-tensors ones not always).
FP8_STATIC_OWNERS = ("nvidia/",)


def fp8_static_input(hf_id: str | None) -> bool:
    """True where ``hf_id`` names a checkpoint with static per-tensor fp8 activation scales: an
    NVIDIA ModelOpt ``-FP8`` id (``FP8_STATIC_OWNERS``; a ``-v2`` revision too); False for any
    other id (the dynamic default)."""
    if not hf_id or not hf_id.lower().startswith(FP8_STATIC_OWNERS):
        return False
    name = REVISION.sub("", hf_id.rsplit("/", 1)[-1]).lower()
    return name.endswith("-fp8")


def checkpoint_precision(cfg: dict[str, Any]) -> tuple[str, str]:
    """(format, where it was read) of the checkpoint whose ``config.json`` is ``cfg``."""
    q = cfg.get(FIELD)
    if q is None:
        dtype = cfg.get("torch_dtype", cfg.get("dtype"))
        if dtype not in _DTYPES:
            raise PlenaInputError("torch_dtype", f"torch_dtype {dtype!r} is not modelled")
        return "bf16", f"no {FIELD}; torch_dtype {dtype or 'unset'}"
    if not isinstance(q, dict):
        raise PlenaInputError(FIELD, f"{FIELD} must be an object")
    method = q.get("quant_method")
    where = f"{FIELD}.quant_method {method}"
    if method == "mxfp4":
        return "mxfp4", where
    if method == "fp8":
        return "fp8", where + (" (block scales)" if q.get("weight_block_size") else "")
    if method == "modelopt":
        algo = str(q.get("quant_algo", ""))
        if algo in _MODELOPT:
            return _MODELOPT[algo], f"{where}, quant_algo {algo}"
        raise PlenaInputError(FIELD, f"{FIELD}.quant_algo {algo!r} is not modelled "
                              f"(known: {', '.join(_MODELOPT)})")  # fmt: skip
    if method in ("awq", "gptq") and q.get("bits") == 4:
        return "int4", f"{where}, bits 4"
    if method == "compressed-tensors":
        return _compressed(q, where)
    raise PlenaInputError(FIELD, f"{where} is not modelled (known: mxfp4, fp8, modelopt, "
                          "compressed-tensors, awq/gptq 4-bit)")  # fmt: skip


def experts_only(cfg: dict[str, Any]) -> bool:
    """True when only the experts carry the checkpoint's format (attention stays bf16)."""
    q = cfg.get(FIELD)
    if not isinstance(q, dict):
        return False
    keep = [*(q.get("modules_to_not_convert") or []), *(q.get("ignore") or [])]
    return any("self_attn" in str(k) for k in keep)


def _compressed(q: dict[str, Any], where: str) -> tuple[str, str]:
    groups = q.get("config_groups") or {}
    first = next(iter(groups.values()), None) if isinstance(groups, dict) else None
    weights = first.get("weights") if isinstance(first, dict) else None
    if not isinstance(weights, dict):
        raise PlenaInputError(FIELD, f"{where} without config_groups.*.weights")
    bits, kind = weights.get("num_bits"), weights.get("type")
    if bits == 4 and kind == "int":
        return "int4", f"{where}, weights int 4-bit"
    if bits == 8 and kind == "float":
        return "fp8", f"{where}, weights float 8-bit"
    raise PlenaInputError(FIELD, f"{where}: {kind} {bits}-bit weights are not modelled")


@dataclass(frozen=True)
class ResolvedModel:
    """A Hugging Face id resolved: the catalog entry, the id as given, the checkpoint format."""

    name: str
    hf_id: str
    checkpoint_precision: str


def _estimated(row: dict[str, Any]) -> bool:
    return str(row.get("note", "")).startswith("estimated")


def _strip(text: str, suffixes: tuple[str, ...]) -> tuple[str, str | None]:
    low = text.lower()
    for suffix in suffixes:
        if low.endswith(suffix) and len(text) > len(suffix):
            return text[: -len(suffix)], suffix
    return text, None


def resolve_hf_id(
    hf_id: str, catalog: dict[str, dict[str, Any]], names: list[str]
) -> ResolvedModel | None:
    """The catalog entry of ``hf_id`` (``owner/name``) or None; ``catalog`` is catalog.json."""
    if "/" not in hf_id:
        return None
    by_id: dict[str, str] = {}
    by_repo: dict[str, str] = {}
    formats: dict[str, str] = {}  # repository name -> an alias's own checkpoint format
    # an entry of estimated fields (its note says so) yields a shared id to the published config
    for name in sorted(names, key=lambda n: _estimated(catalog.get(n, {}))):
        row = catalog.get(name, {})
        for ident in [row.get("hf_id"), *row.get("hf_aliases", [])]:
            if isinstance(ident, str) and "/" in ident:
                by_id.setdefault(ident.lower(), name)
                by_repo.setdefault(ident.split("/", 1)[1].lower(), name)
        for ident, fmt in (row.get("hf_alias_checkpoints") or {}).items():
            formats[ident.split("/", 1)[-1].lower()] = fmt
    exact = by_id.get(hf_id.lower())
    if exact is not None:
        own = formats.get(hf_id.split("/", 1)[1].lower())
        return ResolvedModel(exact, hf_id, own or catalog[exact].get("checkpoint", "bf16"))
    repo = hf_id.split("/", 1)[1]
    base, quant = _strip(REVISION.sub("", repo), tuple(s for s, _ in QUANT_SUFFIXES))
    if quant is None:
        base = repo
    for _ in range(2):  # "-Instruct-FP8" and "-FP8" both reduce to the base repository name
        name = by_repo.get(base.lower())
        if name is not None:
            default = formats.get(base.lower()) or catalog[name].get("checkpoint", "bf16")
            fmt = dict(QUANT_SUFFIXES)[quant] if quant else default
            return ResolvedModel(name, hf_id, fmt)
        base, variant = _strip(base, VARIANT_SUFFIXES)
        if variant is None:
            break
    return None


# The KV-cache format an NVIDIA ModelOpt checkpoint declares: ``hf_quant_config.json``
# ``quantization.kv_cache_quant_algo`` (vLLM and Transformers merge it into config.json's
# ``quantization_config``). "FP8" means calibrated k/v scales are stored next to the weights and an
# engine whose ``auto`` KV dtype inherits it (``KV_INHERITS``) stores an e4m3 KV cache; null means
# the model's bf16. Not every ModelOpt id carries it (nvidia/Llama-3.1-405B-Instruct-FP8,
# modelopt 0.17.0: ``"kv_cache_quant_algo": null``), so ids are listed one by one, each with where
# its value was read; an id not listed keeps bf16. Not confirmed either way (no hf_quant_config.json
# of theirs, or a quote of it, in the public material searched; README_serving r17kvckpt, r17kvids):
# nvidia/DeepSeek-R1-NVFP4 / -FP4 / -FP4-v2 / -0528-FP4(-v2), nvidia/DeepSeek-V3-0324-FP4,
# nvidia/DeepSeek-V3.1-NVFP4, nvidia/Llama-3.1-8B-Instruct-FP4, nvidia/Llama-3.3-70B-Instruct-FP8,
# nvidia/Llama-3.1-405B-Instruct-FP4, nvidia/Qwen3-30B-A3B-FP8 / Qwen3-32B-FP8 / Qwen3-235B-A22B-FP8
# / -FP4, NVIDIA's Kimi-K2-Thinking / K2.5, GLM, MiniMax and Qwen3-Next NVFP4 / FP8 ids.
KV_FP8_CHECKPOINTS: dict[str, str] = {
    "nvidia/qwen3-32b-nvfp4": (
        "gdubicki/Qwen3-32B-NVFP4 (a byte-identical public mirror of nvidia/Qwen3-32B-NVFP4): "
        "'KV cache: FP8 (per model's quantization config)'"
    ),
    "nvidia/llama-3.3-70b-instruct-nvfp4": (
        "hf_quant_config.json at revision ec8feebb970c: quant_algo NVFP4, kv_cache_quant_algo FP8, "
        "group_size 16 (asserted by a public DGX Spark launch script that verifies the snapshot)"
    ),
    "nvidia/qwen3-30b-a3b-nvfp4": (
        "hf_quant_config.json line 8: kv_cache_quant_algo FP8 (vllm-project/vllm issue #34752, "
        "the checkpoint its report names)"
    ),
    "nvidia/qwen3-235b-a22b-nvfp4": (
        "hf_quant_config.json at revision 21cfa2c9e152 (modelopt 0.33.0): quant_algo NVFP4, "
        "group_size 16, kv_cache_quant_algo FP8, 95 excluded modules, 188 k/v scale tensors "
        "(ytworks/kairyu verification/l1/correctness/g4_ma1_qwen3_235b_nvfp4_bench.py "
        "EXPECTED_QUANTIZATION, matched against the downloaded snapshot; an OME Go test quotes "
        "the file verbatim)"
    ),
    "nvidia/llama-3.3-70b-instruct-fp4": (
        "hf_quant_config.json (modelopt 0.23.0): quant_algo NVFP4, kv_cache_quant_algo FP8, "
        "group_size 16, exclude lm_head (quoted verbatim by an OME Go test, "
        "TestParseHFQuantConfig_RealisticModelOptInput); NVIDIA/TensorRT-LLM "
        "tests/integration/defs/accuracy/test_llm_api_pytorch.py TestLlama3_3_70BInstruct."
        "test_nvfp4_tp4 asserts kv_cache_quant_algo == FP8 on its modelopt-hf-model-hub copy"
    ),
}
# ModelOpt ids confirmed to declare no KV quantisation (bf16 KV), with where it was read
KV_BF16_CHECKPOINTS: dict[str, str] = {
    "nvidia/llama-3.1-405b-instruct-fp8": (
        "hf_quant_config.json (huggingface.co, modelopt 0.17.0): kv_cache_quant_algo null"
    ),
    # NVIDIA/TensorRT-LLM docs/source/performance/perf-benchmarking.md ("Quantization in the
    # PyTorch Flow"): nvidia/Llama-3.1-{8B,70B,405B}-Instruct-FP8 "are quantized to run with a
    # compute precision of FP8 and default to no KV cache quantization (full FP16 cache)", their
    # hf_quant_config.json e.g. modelopt 0.23.0rc1, quant_algo FP8, kv_cache_quant_algo null
    "nvidia/llama-3.1-8b-instruct-fp8": (
        "TensorRT-LLM docs performance/perf-benchmarking.md: kv_cache_quant_algo null (no KV "
        "cache quantization)"
    ),
    "nvidia/llama-3.1-70b-instruct-fp8": (
        "TensorRT-LLM docs performance/perf-benchmarking.md: kv_cache_quant_algo null (no KV "
        "cache quantization)"
    ),
}
_MODELOPT_KV = {"FP8": "fp8"}


def checkpoint_kv_format(hf_id: str | None) -> str | None:
    """The KV-cache format the checkpoint ``hf_id`` declares (``KV_FP8_CHECKPOINTS``: "fp8"), or
    None (bf16: not declared, or not confirmed). A ``-v2`` style revision is not the listed id."""
    if not hf_id:
        return None
    return "fp8" if hf_id.lower() in KV_FP8_CHECKPOINTS else None


def config_kv_format(cfg: dict[str, Any]) -> str | None:
    """The KV-cache format a ``config.json`` declares: a ModelOpt ``quantization_config`` with
    ``kv_cache_quant_algo`` "FP8" (its merged hf_quant_config.json) → "fp8"; else None (bf16)."""
    q = cfg.get(FIELD)
    if not isinstance(q, dict) or q.get("quant_method") != "modelopt":
        return None
    return _MODELOPT_KV.get(str(q.get("kv_cache_quant_algo") or "").upper())


# Whether an engine whose KV dtype is left at its default ("auto") stores the KV cache in the
# format the checkpoint declares, and from which version (None: every version modelled):
# * TensorRT-LLM: yes. tensorrt_llm/llmapi/llm_utils.py ``ModelLoader._update_from_hf_quant_config``
#   sets ``quant_config.kv_cache_quant_algo`` from hf_quant_config.json when the user gave none
#   ("Setting kv_cache_quant_algo=… from HF quant config"); ``KvCacheConfig.dtype`` defaults to
#   "auto" (tensorrt_llm/llmapi/llm_args.py), and the docs (features/quantization.html) say the KV
#   format is "inherited from the checkpoint with dtype="auto"".
# * vLLM: from 0.14.0. PR #30785 ("Load kv-cache dtype from hf_quant_config.json automatically",
#   merged 2025-12, after #29980 was reverted) resolves the default in ``EngineArgs`` →
#   ``CacheConfig`` via ``vllm/utils/torch_utils.py::resolve_kv_cache_dtype_string`` (ModelOpt
#   ``kv_cache_quant_algo`` → "fp8_e4m3"); 0.14.0 is the first release cut after it (0.13.0 is not
#   confirmed). An explicit ``--kv-cache-dtype auto`` still kept bf16 (issue #34752, 2026-02:
#   "auto | Falls back to model_config.dtype"; only the unset flag inherits).
# * SGLang: from 0.5.9. ``ModelRunner.configure_kv_cache_dtype``
#   (python/sglang/srt/model_executor/model_runner.py): ``kv_cache_dtype == "auto"`` and the
#   model's ``quant_config.kv_cache_quant_algo`` "FP8" → ``torch.float8_e4m3fn`` (as quoted by PR
#   #18394, 2026-02-07); releases before 0.5.9 were not checked and keep bf16.
KV_INHERITS: dict[str, str | None] = {"trtllm": None, "vllm": "0.14.0", "sglang": "0.5.9"}
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def _version(text: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(text.strip())
    return None if m is None else (int(m[1]), int(m[2]), int(m[3] or 0))


def engine_inherits_kv(engine: str, version: str | None) -> bool:
    """True where ``engine`` at ``version`` stores the checkpoint's declared KV format when its KV
    dtype is left at the default (``KV_INHERITS``). ``version`` None: the engine's modelled
    version (``serving.engines.VERSIONS``: vLLM 0.34.0, SGLang 0.5.23, a 2026 TensorRT-LLM
    commit; every one past its minimum). An unknown engine, or a version that cannot be read
    where a minimum applies (an empty ``backend_version``), does not (bf16 kept)."""
    if engine not in KV_INHERITS:
        return False
    first = KV_INHERITS[engine]
    if first is None or version is None:
        return True
    have = _version(version or "")
    return have is not None and have >= _version(first)  # type: ignore[operator]
