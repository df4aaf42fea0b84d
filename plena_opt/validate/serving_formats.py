"""The weight format a serving row ran, from its quant-mode columns, on its chip (or refused).

A row names its GEMM and MoE formats as AIConfigurator does (``gemm_quant_mode``,
``moe_quant_mode``; ``../shared/data/validation/serving/README.md``). One plan has one format,
except the layout a checkpoint ships: gpt-oss's MXFP4 experts with bf16 attention (its
``quantization_config.modules_to_not_convert``), written ``gemm ""`` / ``moe w4a16_mxfp4``,
is the checkpoint's own format (``ModelSpec.checkpoint_experts_only`` prices the rest at bf16).
A 4-bit format the chip has no tensor cores for is priced as the weight-only (W4A16) format the
engine runs, where the chip runs the checkpoint's format so; else the row is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.validate.serving_rows import ServingRow

# published quant mode -> product format ("fp8_block": fp8 with 128x128 block scales, priced on
# the chip's fitted fp8_block GEMM / fused-MoE curves: Workload.fp8_block_gemm / _moe).
# "float16"/"fp16" (AIConfigurator's name of the unquantised mode): the 16-bit format, priced as
# bf16 — same bytes per weight and the same dense tensor-core rate on every shipped GPU (H100
# SXM datasheet: 989 TFLOPS FP16 and BF16; B200: 2.25 PFLOPS both; MI325X: 1307.4 both).
# "mxfp4": the OCP MX 4-bit format under its own name (gpt-oss's checkpoint format).
QUANT_MODES = {"": "bf16", "bf16": "bf16", "float16": "bf16", "fp16": "bf16", "fp8": "fp8",
               "fp8_block": "fp8", "nvfp4": "fp4", "mxfp4": "mxfp4", "w4a16_mxfp4": "mxfp4",
               "int4_wo": "int4"}  # fmt: skip
FOUR_BIT = frozenset({"fp4", "mxfp4", "int4"})


class FormatRefused(Exception):
    """The row's formats cannot be priced as run; the message names the field and the rule."""


def row_format(row: ServingRow, chip_name: str, model_name: str) -> str:
    """The product format of ``row``'s GEMM / MoE quant modes on ``chip_name``."""
    from plena_opt.chip import load_chip
    from plena_opt.models import load_model

    model, chip = load_model(model_name), load_chip(chip_name)
    gemm = row.get("gemm_quant_mode")
    modes = [gemm] + ([row.get("moe_quant_mode")] if model.num_experts else [])
    fmts = []
    for i, m in enumerate(modes):
        field = "gemm_quant_mode" if i == 0 else "moe_quant_mode"
        if m not in QUANT_MODES:
            known = ", ".join(k for k in QUANT_MODES if k)
            raise FormatRefused(f"{field} {m!r} is not modelled (known: {known}, empty = bf16)")
        kind = "gemm" if i == 0 else "moe"
        if m == "fp8_block" and "fp8_block" not in getattr(chip, kind, {}):
            raise FormatRefused(
                f"{field} fp8_block on {chip.name}: no {kind}.fp8_block curve "
                f"(no {kind} kernel table with fp8_block rows for this chip)"
            )
        fmts.append(QUANT_MODES[m])
    if len(set(fmts)) > 1 and not _checkpoint_layout(fmts, model):
        raise FormatRefused(f"GEMM and MoE formats differ (gemm_quant_mode {modes[0]!r} vs "
                            f"moe_quant_mode {modes[1]!r}): one format per plan, except a "
                            "checkpoint's own experts-only layout")  # fmt: skip
    field = "moe_quant_mode" if model.num_experts else "gemm_quant_mode"
    shipped = _shipped(row.get("model_path"), model)
    return on_chip(fmts[-1], modes[-1], chip, model, shipped, field)


def _shipped(model_path: str, model) -> tuple[str, str]:
    """(format, where it is read) of the checkpoint the row names: its Hugging Face id's
    (``nvidia/…-FP4`` ships fp4), else the catalog entry's."""
    from plena_opt.models.catalog import resolve_model_id

    found = resolve_model_id(model_path)
    if found is not None and found.checkpoint_precision != model.checkpoint_precision:
        return found.checkpoint_precision, f"model_path {model_path}"
    return model.checkpoint_precision, model.checkpoint_source


def _checkpoint_layout(fmts: list[str], model) -> bool:
    """bf16 GEMMs with the experts in the checkpoint's format, which quantises only its experts
    (gpt-oss MXFP4): the checkpoint as shipped."""
    gemm, moe = fmts
    return (gemm == "bf16" and model.checkpoint_experts_only
            and moe == model.checkpoint_precision)  # fmt: skip


def on_chip(fmt: str, mode: str, chip, model, shipped: tuple[str, str],
            field: str = "quant mode") -> str:  # fmt: skip
    """The format ``chip`` runs the row's ``fmt`` at. A 4-bit label on a GPU without FP4 tensor
    cores (AIConfigurator writes ``nvfp4`` for gpt-oss on H100) is the checkpoint's own 4-bit
    format run weight-only (W4A16) where the chip runs that format so; else refused. An NVFP4
    checkpoint on Hopper or AMD is refused: the chips' profiles have no fp4 weight-only path
    (vLLM's FP4 Marlin emulation is not modelled)."""
    from plena_opt.chip.precision import is_weight_only

    ckpt, where = shipped
    if fmt not in chip.formats and fmt in FOUR_BIT and ckpt in FOUR_BIT:
        if ckpt in chip.formats and is_weight_only(ckpt, chip.formats[ckpt]):
            fmt = ckpt  # e.g. openai/gpt-oss-120b: quantization_config mxfp4 -> W4A16 MXFP4
    if fmt not in chip.formats:
        raise FormatRefused(f"{field} {mode!r} ({fmt}) on {chip.name}: the chip has no {fmt} "
                            f"tensor cores and no weight-only {fmt} path is modelled (it runs "
                            f"{', '.join(chip.formats)}); the checkpoint ships {ckpt} "
                            f"({where})")  # fmt: skip
    if mode.startswith("w4a16") and not is_weight_only(fmt, chip.formats[fmt]):
        raise FormatRefused(f"{mode} on {chip.name}, which runs {fmt} on its "
                            f"{chip.formats[fmt]} tensor cores, is not modelled")  # fmt: skip
    return fmt
