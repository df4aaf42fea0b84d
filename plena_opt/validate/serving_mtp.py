"""InferenceX rows that ran speculative decoding (MTP) without the file saying so: refused by
``validate --measurements`` (``serving_rows.resolve``), since the draft length and acceptance a
run had are not recorded (``estimate --speculative`` needs both)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.validate.serving_recipes import DEEPSEEK_R1, INFERENCEX_ID

if TYPE_CHECKING:
    from plena_opt.validate.serving_rows import Deployment, ServingRow

# TensorRT-LLM images InferenceX ran only with speculative decoding: in
# .github/configs/nvidia-master.yaml, from 2026-02-05 (PR #632, #642) to 2026-05-18 (PR #1489),
# ``release:1.2.0rc6.post3`` is the image of dsr1-fp8-b200-trt-mtp and dsr1-fp4-b200-trt-mtp
# only (``spec-decoding: mtp``: MTP 3, or 1 with attention DP), every other config, the non-MTP
# DeepSeek-R1 ones included, on ``1.2.0rc6.post2``. The file records neither the draft length
# nor the acceptance such a run had (``estimate --speculative`` needs both).
SPECULATIVE_IMAGES = {("trtllm", "1.2.0rc6.post3"): "dsr1-fp4/fp8-b200-trt-mtp"}


def speculative_run(row: ServingRow, system: str, d: Deployment) -> str | None:
    """Why ``row`` is refused as an InferenceX speculative-decoding (MTP) run the file does not
    mark: its engine image only the MTP configs used (``SPECULATIVE_IMAGES``), or a point only
    the MTP config ran (``speculative_point``); None otherwise."""
    if not INFERENCEX_ID.match(row.id):
        return None
    unknown = "; the draft length and acceptance are not recorded"
    version = row.get("backend_version")
    evidence = d.model in DEEPSEEK_R1 and system == "b200_sxm"  # the configs named are these
    if evidence and (configs := SPECULATIVE_IMAGES.get((d.engine, version))):
        return (f"deployment not fully specified: InferenceX ran {d.engine} {version} only for "
                f"its speculative-decoding configs ({configs}){unknown}")  # fmt: skip
    if configs := speculative_point(row, system, d):
        return (f"deployment not fully specified: only InferenceX's speculative-decoding config "
                f"({configs}) ran {d.input_len}/{d.output_len} on {d.gpus} GPUs at "
                f"{d.concurrency} clients{unknown}")  # fmt: skip
    return None


# The points the non-MTP InferenceX DeepSeek-R1 fp8 B200 SGLang config ran: (isl, osl) ->
# {TP (GPUs): (first, last concurrency)} of nvidia-master.yaml ``dsr1-fp8-b200-sglang``,
# unchanged from 2026-01-13 (PR #411) through its v0.5.9 image (2026-03-25, PR #943). Its twin
# ``dsr1-fp8-b200-sglang-mtp`` (the same v0.5.9 image, ``spec-decoding: mtp``) ran TP 8 at 4-512
# clients at every length, so a v0.5.9 row outside these points is the MTP config's run; inside
# them both ran and the row does not say which.
SGLANG_DSR1_FP8_VERSION = "0.5.9"
SGLANG_DSR1_FP8_POINTS = {
    (1024, 1024): {8: (4, 64)},
    (1024, 8192): {8: (4, 64)},
    (8192, 1024): {8: (4, 4), 4: (4, 32)},
}


def speculative_point(row: ServingRow, system: str, d: Deployment) -> str | None:
    """The InferenceX MTP config an InferenceX SGLang DeepSeek-R1 fp8 B200 row of the v0.5.9
    image ran, where its (lengths, TP, clients) lie outside the non-MTP config's points
    (``SGLANG_DSR1_FP8_POINTS``); else None."""
    if (d.engine != "sglang" or system != "b200_sxm" or d.model not in DEEPSEEK_R1
            or row.get("precision") != "fp8" or not INFERENCEX_ID.match(row.id)
            or row.get("backend_version") != SGLANG_DSR1_FP8_VERSION
            or d.pools is not None):  # fmt: skip
        return None
    span = SGLANG_DSR1_FP8_POINTS.get((d.input_len, d.output_len), {}).get(d.gpus)
    if span is not None and span[0] <= d.concurrency <= span[1]:
        return None
    return "dsr1-fp8-b200-sglang-mtp"
