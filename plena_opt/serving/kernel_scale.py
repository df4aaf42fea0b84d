"""How much faster an engine's own decode kernels run than the kernel tables the GPU profiles are
fitted on: a named constant per (engine, GPU architecture), fitted on the shipped serving rows.

The GPU profiles' GEMM, attention, MoE and all-reduce curves are fitted on vLLM 0.19's kernels
(``../shared/data/kernels/*_vllm-0.19.0.csv.gz``). TensorRT-LLM runs its own decode kernels
(its GEMMs and XQA attention, the all-reduce fused with the RMSNorm; on Blackwell the
trtllm-gen kernels). At equal deployments on 8×B200 its measured TPOT is below vLLM's (the
shipped file's InferenceX Llama-3.1-70B grid: TP 8 fp8 1k/1k at 16 clients 6.5 vs 7.6 ms, TP 4
9.7 vs 13.6 ms at 64), while the model, which prices both on the same tables, gave them the
same TPOT. The constant scales the device time of a decode step (``StepModel``); prefill, host
time and everything of the other engines stay as the tables price them.

``TRTLLM_DECODE_SCALE`` values are the geometric mean of measured / predicted TPOT over the
shipped rows of TensorRT-LLM with the scale off (``python -m plena_opt.validate.fit_kernel_scale``
prints them; ``tests/validate/test_kernel_scale.py`` checks they are what the file gives):

* Blackwell (B200; applied to B300, GB200, GB300 as the same kernel family): 0.920 on 241 rows
  (Llama-3.1-70B 144, gpt-oss-120b 97). Leave-one-model-out: fitted on gpt-oss alone, 0.903
  takes Llama-3.1-70B's TPOT MAPE 10.4 → 8.1 %; fitted on Llama alone, 0.933 takes gpt-oss's
  14.7 → 11.1 %. Refitted 0.921 → 0.920 when GPU plans' EP combine started carrying bf16 and
  the dispatch's closed form distinct ranks (r18a2a: gpt-oss fp4 EP rows' decode steps got
  dearer; held out unchanged to the digits above). Refitted 0.918 → 0.921 when the GEMM and
  fused-MoE fits and pricing started counting the same bytes (``chip.gpu.kernel_bytes``,
  r16bytes: the tables' input quantisation passes in the fits, TensorRT-LLM's fused
  quantisation in its pricing; held out before: 0.905 /
  0.927, Llama 11.0 → 8.3 %, gpt-oss 14.7 → 11.2 %). Refitted 0.929 → 0.918 when gpt-oss's
  MXFP4 experts on B200 took the fp8 tensor-core rate of their MXFP8 activations
  (``chip.gpu.perf.MXFP8_MOE_NOTE``, branch r16oss8k: the prompt chunks inside its decode
  steps got dearer; held out before: 0.931 / 0.927). Refitted 0.926 → 0.929 when gpt-oss's
  sliding-window layers stopped being
  priced as full causal attention in prefill (``estimate.gpu_layers._gqa_prefill``: the prompt
  chunks inside its decode steps got cheaper) and MoE pricing changed (branch r11moe: EP over
  the TP group exchanges no tokens, the busiest EP rank of a random placement). Refitted
  (0.882 → 0.926, branch r10tpot) when a prompt chunk's eager host dispatch stopped being added
  whole to the decode steps around it (``serving.host_overlap``): the old value had absorbed
  part of that host time, and its two held-out values disagreed (0.856 / 0.900, against
  0.931 / 0.927 at 0.929). (0.877 before the InferenceX recipes' TensorRT-LLM KV admission and step
  budget were priced, branch r9hiconc.)
* Hopper (H100; applied to H200): 0.981 on 353 rows (Llama-3.1-8B 177, Qwen3-32B 176).
  Leave-one-model-out: Qwen3-32B (0.992 fitted on Llama-3.1-8B) 6.1 → 5.8 %, Llama-3.1-8B
  (0.970 fitted on Qwen3-32B) 8.6 → 8.4 %. Refitted 0.978 → 0.981 when the GEMM fits and
  pricing started counting the same bytes (r16bytes: the fp8 Qwen3-32B rows' GEMMs, TensorRT-LLM's
  fused quantisation; held out before: Qwen3-32B 6.4 → 5.9 %, Llama-3.1-8B 8.6 → 8.5 %).
  Refitted 0.975 → 0.978
  when the H100 profile's die constants were fitted jointly with the H200 table (r15h200).

DeepSeek-R1's TensorRT-LLM rows are left out of the fit: at identical deployments they come in
two populations about 2× apart in TPOT (e.g. fp8 TP 8 8k/1k at 4 clients: 5.3 and 10.9 ms), the
mark of speculative decoding (MTP) in some runs, which the file does not record. A leave-one-
GPU-out figure does not exist for these constants: each architecture's value is fitted on its
own GPU's rows, the only ones of that kernel family (the Hopper value is near 1; the Blackwell
one is not, which is the finding).
"""

from __future__ import annotations

# chip profile name -> GPU architecture whose TensorRT-LLM kernels the constant describes
ARCHITECTURE = {"h100-sxm": "hopper", "h200-sxm": "hopper", "b200": "blackwell",
                "b300": "blackwell", "gb200": "blackwell", "gb300": "blackwell"}  # fmt: skip
TRTLLM_DECODE_SCALE = {"hopper": 0.981, "blackwell": 0.920}  # fitted: module docstring
DECODE_SCALE = {"trtllm": TRTLLM_DECODE_SCALE}


def decode_scale(engine: str, chip: str) -> float:
    """Device-time factor of ``engine``'s decode steps on chip profile ``chip`` (1 where no
    constant is known: vLLM and SGLang everywhere, any engine on another chip)."""
    return DECODE_SCALE.get(engine, {}).get(ARCHITECTURE.get(chip, ""), 1.0)


def scale_note(engine: str, chip: str) -> str:
    """What the constant of ``engine`` on ``chip`` is and where it comes from (for outputs)."""
    arch = ARCHITECTURE.get(chip, "")
    return (f"decode kernels x {decode_scale(engine, chip):g} ({engine} on {arch}, fitted on the "
            "shipped serving rows: plena_opt.serving.kernel_scale)")  # fmt: skip
