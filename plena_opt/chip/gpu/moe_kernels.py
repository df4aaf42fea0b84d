"""The MoE kernel each serving engine runs an MXFP4 checkpoint's experts on (gpt-oss), per GPU
generation, and the ``Workload`` flags that price it (``resolve_moe_kernel``).

The kernels, by the names ``--moe-kernel`` takes:

* ``triton``: OpenAI's Triton ``triton_kernels`` MoE (``matmul_ogs``), weight-only MXFP4 x bf16
  on Hopper: the chip's own weight-only curve (``moe.mxfp4``, fitted on the H200 table's
  ``vllm_mxfp4_moe`` rows, which time that kernel). No flag.
* ``marlin``: vLLM's / SGLang's Marlin MoE (``Workload.marlin_moe``, ``perf.MARLIN_MOE_NOTE``).
* ``mxfp8``: MXFP4 experts x MXFP8 activations on Blackwell's fp4 tensor cores at the fp8 rate
  (``Workload.mxfp8_moe``, ``perf.MXFP8_MOE_NOTE``).
* ``bf16``: MXFP4 experts x bf16 activations on Blackwell (FlashInfer's TRT-LLM-gen MXFP4 x BF16
  MoE): the weights are widened to bf16 in the kernel, the product runs ``kind::f16`` at the
  bf16 rate (``Workload.bf16_moe``, ``perf.BF16_MOE_NOTE``).

The defaults (``DEFAULT_MXFP4_MOE``) are those of the engine versions the product models
(``serving.engines.VERSIONS``), read in their sources:

* vLLM 0.34.0 (wheel: ``model_executor/layers/fused_moe/oracle/mxfp4.py``
  ``select_mxfp4_moe_backend``): with ``--moe-backend auto`` (``config/kernel.py`` default) and
  no activation override, ``_filter_by_activation`` keeps the bf16-activation backends of
  ``_get_priority_backends_for_gpt_oss`` in order: ``FLASHINFER_TRTLLM_MXFP4_BF16`` (supported
  on the SM100 family only, ``experts/trtllm_mxfp4_moe.py``), then ``TRITON`` (SM90 to SM12x,
  ``experts/gpt_oss_triton_kernels_moe.py``), Marlin after it. So Hopper: ``triton``;
  Blackwell: ``bf16``. ``--moe-backend marlin`` selects Marlin; an MXFP8 activation request
  (``--quantization-config '{"moe":{"activation":"mxfp8"}}'``, ``config/quantization.py``
  ``user_activation_override``) puts ``FLASHINFER_TRTLLM_MXFP4_MXFP8`` first on Blackwell. The
  environment variables of older releases (``VLLM_MXFP4_USE_MARLIN``,
  ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8``; the InferenceX recipes export them) are gone from
  0.34.0's ``envs.py``.
* SGLang 0.5.23 (wheel: ``srt/arg_groups/model_overrides/gpt_oss.py``): ``--moe-runner-backend
  auto`` becomes ``flashinfer_mxfp4`` on SM100 for an MXFP4 checkpoint, whose default precision
  (``--flashinfer-mxfp4-moe-precision default``, ``arg_groups/fields/exec_.py``) quantises the
  routed input to MXFP8 (``layers/quantization/mxfp4_flashinfer_trtllm_moe.py``
  ``quantize_routed_input``; ``bf16`` keeps bf16); on Hopper with EP 1 it becomes
  ``triton_kernel``. Hopper with EP > 1 keeps ``auto`` (not resolved here: priced as Triton).
* TensorRT-LLM (commit 00209af1; "Deployment Guide for GPT-OSS on TensorRT-LLM", MoE backend
  support matrix): "For Blackwell, the default MoE backend is TRTLLM [MXFP8 activations x MXFP4
  weights]. For Hopper, the default MoE backend is TRITON [BF16 x MXFP4]". Its older default
  CUTLASS (1.2.0rc2 guides) runs MXFP8 x MXFP4 on Blackwell too.

A chip outside ``GPU_GENERATION`` (AMD, a custom profile) has no default here (the experts keep
the chip's curve for the format) and refuses an explicit kernel. Nothing here is fitted.
"""

from __future__ import annotations

from plena_opt.errors import PlenaInputError

FIELD = "moe_kernel"
MOE_KERNELS = ("default", "triton", "marlin", "mxfp8", "bf16")
ENGINES = ("vllm", "sglang", "trtllm")  # == serving.ENGINES (tests/chip/test_moe_kernels.py)
DEFAULT_ENGINE = "vllm"  # the engine every front end prices when none is named
# chip profile name -> NVIDIA generation (== serving.kernel_scale.ARCHITECTURE)
GPU_GENERATION = {"h100-sxm": "hopper", "h200-sxm": "hopper", "b200": "blackwell",
                  "b300": "blackwell", "gb200": "blackwell", "gb300": "blackwell"}  # fmt: skip
# (engine, generation) -> the kernel an MXFP4 checkpoint's experts run by default (module doc)
DEFAULT_MXFP4_MOE = {
    ("vllm", "hopper"): "triton",
    ("vllm", "blackwell"): "bf16",
    ("sglang", "hopper"): "triton",
    ("sglang", "blackwell"): "mxfp8",
    ("trtllm", "hopper"): "triton",
    ("trtllm", "blackwell"): "mxfp8",
}
# (engine, generation) -> the kernels priced for it (the default first); another is refused.
# vLLM and SGLang run Triton and Marlin on Blackwell too, but no curve here times them there.
ENGINE_MOE_KERNELS = {
    ("vllm", "hopper"): ("triton", "marlin"),
    ("vllm", "blackwell"): ("bf16", "mxfp8"),
    ("sglang", "hopper"): ("triton", "marlin"),
    ("sglang", "blackwell"): ("mxfp8", "bf16"),
    ("trtllm", "hopper"): ("triton",),
    ("trtllm", "blackwell"): ("mxfp8",),
}
# kernel -> the Workload flags that price it
KERNEL_FLAGS = {
    "triton": {},
    "marlin": {"marlin_moe": True},
    "mxfp8": {"mxfp8_moe": True},
    "bf16": {"bf16_moe": True},
}


def check_moe_kernel(kernel: object) -> str:
    """``kernel`` if it is one of ``MOE_KERNELS``; else refused naming ``moe_kernel``."""
    if not isinstance(kernel, str) or kernel not in MOE_KERNELS:
        raise PlenaInputError(
            FIELD, f"moe_kernel must be one of {', '.join(MOE_KERNELS)} (got {kernel!r})"
        )
    return kernel


def mxfp4_experts(chip_name: str, checkpoint_precision: str, compute_format: str,
                  weight_only: bool) -> str | None:  # fmt: skip
    """The generation whose MXFP4 MoE kernels run these experts: an MXFP4 checkpoint served at a
    4-bit format, weight-only on Hopper or on fp4 tensor cores on Blackwell; else None."""
    gen = GPU_GENERATION.get(chip_name)
    if checkpoint_precision != "mxfp4" or gen is None:
        return None
    if (gen == "hopper" and weight_only) or (gen == "blackwell" and compute_format == "fp4"):
        return gen
    return None


def default_moe_kernel(engine: str, chip_name: str, checkpoint_precision: str,
                       compute_format: str, weight_only: bool) -> str | None:  # fmt: skip
    """The kernel ``engine`` runs the experts on by default (``DEFAULT_MXFP4_MOE``); None where
    the experts are not an MXFP4 checkpoint's on a generation listed."""
    gen = mxfp4_experts(chip_name, checkpoint_precision, compute_format, weight_only)
    return None if gen is None else DEFAULT_MXFP4_MOE[(engine, gen)]


def resolve_moe_kernel(engine: str, kernel: str, chip_name: str, checkpoint_precision: str,
                       compute_format: str, weight_only: bool) -> str | None:  # fmt: skip
    """The kernel the experts are priced on: ``kernel`` ("default": the engine's,
    ``default_moe_kernel``); None where no MXFP4 MoE kernel applies. An explicit kernel the
    engine does not run on this chip, or experts it does not apply to, is refused naming
    ``moe_kernel``."""
    check_moe_kernel(kernel)
    if engine not in ENGINES:
        raise PlenaInputError("engine", f"engine must be one of {', '.join(ENGINES)}")
    gen = mxfp4_experts(chip_name, checkpoint_precision, compute_format, weight_only)
    if kernel == "default":
        return None if gen is None else DEFAULT_MXFP4_MOE[(engine, gen)]
    if gen is None:
        raise PlenaInputError(
            FIELD,
            f"moe_kernel {kernel!r} picks a kernel for an MXFP4 checkpoint's experts served at "
            f"a 4-bit format on an NVIDIA Hopper or Blackwell GPU (known: "
            f"{', '.join(GPU_GENERATION)}); here the checkpoint is {checkpoint_precision}, "
            f"run as {compute_format} on {chip_name}",
        )
    known = ENGINE_MOE_KERNELS[(engine, gen)]
    if kernel not in known:
        raise PlenaInputError(
            FIELD,
            f"moe_kernel {kernel!r}: {engine} on {chip_name} ({gen}) runs MXFP4 experts as "
            f"{' or '.join(known)} here (default {DEFAULT_MXFP4_MOE[(engine, gen)]})",
        )
    return kernel


def moe_kernel_flags(kernel: str | None) -> dict[str, bool]:
    """The ``Workload`` flags (``marlin_moe``, ``mxfp8_moe``, ``bf16_moe``) of ``kernel``."""
    flags = {"marlin_moe": False, "mxfp8_moe": False, "bf16_moe": False}
    flags.update(KERNEL_FLAGS.get(kernel or "triton", {}))
    return flags
