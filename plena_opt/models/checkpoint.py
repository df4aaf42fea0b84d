"""Checkpoint formats and Hugging Face ids: which catalog entry a published checkpoint is, and
the weight format it ships (docs/models.md, "Hugging Face ids and checkpoint formats").

A checkpoint's format comes from its ``config.json`` ``quantization_config`` (as vLLM reads it):
``quant_method`` ``fp8`` / ``fbgemm_fp8`` → ``fp8``; ``mxfp4`` → ``mxfp4``; ``modelopt`` with
``quant_algo`` ``NVFP4`` / ``FP8`` → ``fp4`` / ``fp8``; ``compressed-tensors`` by its weights'
``num_bits`` and ``type`` (4-bit int → ``int4``, 4-bit float → ``fp4``, 8-bit float → ``fp8``);
``gptq`` / ``awq`` with 4 bits → ``int4``. No ``quantization_config``: ``bf16``. Anything else
is recorded as ``unrecognised`` (and said in ``not_modelled``), never guessed.

Hugging Face ids resolve by the catalog's ``hf_id`` and ``hf_aliases`` (catalog.json), then by
the repository name with a quantisation suffix (``-NVFP4``, ``-FP8``, ``-FP4``, …, which sets the
format) and an instruction-tuning suffix (``-Instruct``, …: the same architecture) removed, under
any owner (``nvidia/DeepSeek-R1-NVFP4`` → ``deepseek-r1`` at ``fp4``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

UNRECOGNISED = "unrecognised"
# repository-name suffix → weight format (NVIDIA ModelOpt, Qwen, RedHat, community names)
QUANT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("-nvfp4", "fp4"),
    ("-mxfp4", "mxfp4"),
    ("-fp4", "fp4"),
    ("-fp8-dynamic", "fp8"),
    ("-fp8", "fp8"),
    ("-w4a16", "int4"),
    ("-int4", "int4"),
    ("-gptq-int4", "int4"),
    ("-awq", "int4"),
)
# suffixes of post-trained checkpoints that keep the base model's architecture fields
VARIANT_SUFFIXES = ("-instruct", "-it", "-chat", "-base")


def _compressed_tensors(q: dict[str, Any]) -> str:
    fmt = str(q.get("format") or "")
    if "nvfp4" in fmt:
        return "fp4"
    groups = q.get("config_groups")
    if not isinstance(groups, dict):
        return UNRECOGNISED
    kinds = set()
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict):
            kinds.add((weights.get("num_bits"), weights.get("type")))
    table = {(4, "int"): "int4", (4, "float"): "fp4", (8, "float"): "fp8"}
    found = {table.get(k, UNRECOGNISED) for k in kinds}
    return found.pop() if len(found) == 1 else UNRECOGNISED


def checkpoint_precision(cfg: dict[str, Any]) -> str:
    """The weight format a ``config.json`` declares (``bf16`` without ``quantization_config``)."""
    q = cfg.get("quantization_config")
    if q is None:
        return "bf16"
    if not isinstance(q, dict):
        return UNRECOGNISED
    method = str(q.get("quant_method") or "").lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt" or "quant_algo" in q:
        algo = str(q.get("quant_algo") or "").upper()
        return {"NVFP4": "fp4", "FP8": "fp8", "W4A16_AWQ": "int4"}.get(algo, UNRECOGNISED)
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    if method in ("gptq", "awq") and q.get("bits") == 4:
        return "int4"
    return UNRECOGNISED


@dataclass(frozen=True)
class ResolvedModel:
    """A Hugging Face id resolved: the catalog entry, the id as given, the checkpoint format."""

    name: str
    hf_id: str
    checkpoint_precision: str


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
    for name in names:
        row = catalog.get(name, {})
        for ident in [row.get("hf_id"), *row.get("hf_aliases", [])]:
            if isinstance(ident, str) and "/" in ident:
                by_id.setdefault(ident.lower(), name)
                by_repo.setdefault(ident.split("/", 1)[1].lower(), name)
    exact = by_id.get(hf_id.lower())
    if exact is not None:
        return ResolvedModel(exact, hf_id, catalog[exact].get("checkpoint", "bf16"))
    repo = hf_id.split("/", 1)[1]
    base, quant = _strip(repo, tuple(s for s, _ in QUANT_SUFFIXES))
    for _ in range(2):  # "-Instruct-FP8" and "-FP8" both reduce to the base repository name
        name = by_repo.get(base.lower())
        if name is not None:
            fmt = dict(QUANT_SUFFIXES)[quant] if quant else catalog[name].get("checkpoint", "bf16")
            return ResolvedModel(name, hf_id, fmt)
        base, variant = _strip(base, VARIANT_SUFFIXES)
        if variant is None:
            break
    return None
