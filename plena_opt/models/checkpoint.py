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
"""

from __future__ import annotations

from typing import Any

from plena_opt.errors import PlenaInputError

FIELD = "quantization_config"
_DTYPES = {None: "bf16", "bfloat16": "bf16", "float16": "bf16", "float32": "bf16"}
_MODELOPT = {"NVFP4": "fp4", "FP8": "fp8"}


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
