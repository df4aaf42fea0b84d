"""Fit the GPU profiles' efficiency constants on kernel-level measurements (never end to end).

Data: ``../shared/data/kernels/<sys>_<op>_vllm-0.19.0.csv.gz`` (NVIDIA AIConfigurator's measured
vLLM 0.19.0 kernel database, see that folder's README). For each system and GEMM format the fit
finds four global constants of ``t = t0 + (c^p + m^p)^(1/p)`` (``plena_opt.chip.gpu.perf``) by
least squares on log(predicted / measured) over every row; attention decode (bf16 KV) and
prefill the same. Run ``python -m plena_opt.validate.calibrate_run DIR`` to print the fits, or with
``--write`` to store them in the built-in profiles (each value's ``source`` names its data, row
count and the fit's MAPE). Reading uses only ``csv`` + ``gzip``; fitting needs scipy.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plena_opt.chip.gpu.kernel_bytes import fused_moe_bytes, gemm_bytes, gemm_operand_bytes

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}
# A data set whose rows imply more than the datasheet peak FLOP/s on more than this share of its
# rows is rejected (the H200 context-attention table implies up to ~10x the H200 peak); its fit is
# then taken from the same-silicon system named here (H200 and H100 share the GH100 compute die).
MAX_IMPOSSIBLE_SHARE = 0.05
SAME_COMPUTE = {"h200_sxm": "h100_sxm", "h100_sxm": "h200_sxm"}  # H100 has no MoE table
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4"}
# a block-scaled format runs at its base format's tensor-core peak (fp8_block: the FP8 peak)
BLOCK_BASE = {"fp8_block": "fp8"}
NAMES = ("compute_efficiency", "bandwidth_efficiency", "fixed_seconds", "blend")


@dataclass(frozen=True)
class Fit:
    """Fitted curve constants, the data they come from, and the fit's residuals."""

    values: dict[str, float]
    data: str
    rows: int
    mape: float
    median_ape: float

    def source(self) -> str:
        return (
            f"fitted on {self.data} ({self.rows} rows; per-kernel MAPE {100 * self.mape:.1f} %, "
            f"median {100 * self.median_ape:.1f} %) by plena_opt.validate.calibrate"
        )


def read_rows(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", newline="") as fh:
        return list(csv.DictReader(fh))


def _col(rows: list[dict[str, str]], key: str) -> np.ndarray:
    return np.array([float(r[key]) for r in rows])


def gemm_nbytes(fmt: str, m, n, k):
    """Bytes read + written by GEMM rows in format ``fmt`` (``kernel_bytes.gemm_bytes`` at the
    format's operand widths: the count the product prices, ``GpuPerfModel.gemm``). The tables
    ran dynamic fp8 activation scales: no ``static_input`` here (README_serving r16static)."""
    fb = gemm_operand_bytes(fmt)
    reads, writes = gemm_bytes(m, n, k, fb.weight, fb.activation)
    return reads + writes


def moe_nbytes(fmt: str, tokens, pairs, active, h, f, compute_format: str | None = None):
    """Bytes read + written by fused-MoE rows in format ``fmt`` (``kernel_bytes.fused_moe_bytes``
    at ``gemm_operand_bytes(fmt, compute_format)``: the count ``GpuPerfModel.fused_moe`` prices)."""
    fb = gemm_operand_bytes(fmt, compute_format)
    return sum(fused_moe_bytes(tokens, pairs, active, h, f, fb.weight, fb.activation))


def curve(x: np.ndarray, flops: np.ndarray, nbytes: np.ndarray, peak: float, bw: float):
    """The kernel curve of ``plena_opt.chip.gpu.perf`` (seconds) for constants ``x``."""
    ce, be, t0_us, p = x
    tc = flops / (peak * ce)
    tm = nbytes / (bw * be)
    return t0_us * 1e-6 + (tc**p + tm**p) ** (1.0 / p)


def fit_curve(flops, nbytes, measured, peak: float, bw: float, data: str) -> Fit:
    from scipy.optimize import least_squares

    def resid(x):
        return np.log(curve(x, flops, nbytes, peak, bw) / measured)

    res = least_squares(
        resid, [0.7, 0.8, 5.0, 2.0], bounds=([0.01, 0.01, 0.0, 1.0], [1, 1, 100, 20])
    )
    ape = np.abs(curve(res.x, flops, nbytes, peak, bw) / measured - 1)
    ce, be, t0, p = (float(v) for v in res.x)
    values = {
        "compute_efficiency": round(ce, 4),
        "bandwidth_efficiency": round(be, 4),
        "fixed_seconds": round(t0 * 1e-6, 9),
        "blend": round(p, 3),
    }
    return Fit(values, data, len(measured), float(ape.mean()), float(np.median(ape)))


def decode_values(e: float, die: list[float]) -> dict[str, float]:
    """A decode-attention profile's values, rounded as written, from the bandwidth efficiency
    ``e`` and the die constants ``die`` = (s ns, t0 µs, p, u ns) of ``decode_curve``."""
    s_ns, t0, p, u_ns = die
    return {
        "bandwidth_efficiency": round(e, 4),
        "seconds_per_sequence_head": round(s_ns * 1e-9, 13),
        "seconds_per_sequence_kv_head": round(u_ns * 1e-9, 13),
        "fixed_seconds": round(t0 * 1e-6, 9),
        "blend": round(p, 3),
    }


def decode_curve(x, seq_heads, nbytes, bw):
    """Decode attention: ``t0 + ((s·b·H + u·b·KV)^p + (bytes/(bw·e))^p)^(1/p)``
    (``chip.gpu.perf``); ``seq_heads`` = (b·H, b·KV)."""
    be, s_ns, t0_us, p, u_ns = x
    ts = (seq_heads[0] * s_ns + seq_heads[1] * u_ns) * 1e-9
    tm = nbytes / (bw * be)
    return t0_us * 1e-6 + (ts**p + tm**p) ** (1.0 / p)


def fit_decode(seq_heads, nbytes, measured, bw: float, data: str) -> Fit:
    from scipy.optimize import least_squares

    def resid(x):
        return np.log(decode_curve(x, seq_heads, nbytes, bw) / measured)

    res = least_squares(
        resid, [0.7, 2.0, 8.0, 2.0, 1.0], bounds=([0.01, 0, 0, 1, 0], [1, 1e4, 100, 20, 1e4])
    )
    ape = np.abs(decode_curve(res.x, seq_heads, nbytes, bw) / measured - 1)
    be, *die = (float(v) for v in res.x)
    return Fit(
        decode_values(be, die), data, len(measured), float(ape.mean()), float(np.median(ape))
    )


def block_peaks(peaks: dict[str, float]) -> dict[str, float]:
    """``peaks`` (FLOP/s per format) with each block-scaled format at its base format's peak."""
    return {**peaks, **{b: peaks[f] for b, f in BLOCK_BASE.items() if f in peaks}}


def gemm_fits(folder: Path, system: str, peaks: dict[str, float], bw: float) -> dict[str, Fit]:
    """Full-range GEMM curve per format of ``system``'s GEMM table (fp8_block at the FP8 peak)."""
    path = folder / f"{system}_gemm_vllm-0.19.0.csv.gz"
    peaks = block_peaks(peaks)
    rows = read_rows(path)
    out = {}
    for dtype, fmt in GEMM_DTYPES.items():
        sel = [r for r in rows if r["gemm_dtype"] == dtype]
        if not sel or fmt not in peaks:
            continue
        m, n, k = _col(sel, "m"), _col(sel, "n"), _col(sel, "k")
        t = _col(sel, "latency") * 1e-3
        flops = 2 * m * n * k
        nbytes = gemm_nbytes(fmt, m, n, k)
        out[fmt] = fit_curve(flops, nbytes, t, peaks[fmt], bw, f"{path.name} gemm_dtype={dtype}")
    return out


def attention_fits(folder: Path, system: str, specs: dict[str, tuple[float, float]]):
    """Decode and prefill attention fits; ``specs`` maps system → (bf16 peak, HBM bandwidth)."""
    out: dict[str, Fit] = {}
    for phase in ("decode", "prefill"):
        fit = _attention_fit(folder, system, phase, *specs[system])
        if fit is None:
            other = SAME_COMPUTE[system]
            fit = _attention_fit(folder, other, phase, *specs[other])
            fit = Fit(fit.values, fit.data + f" (the {system} table fails the peak check)",
                      fit.rows, fit.mape, fit.median_ape)  # fmt: skip
        out[phase] = fit
    return out


def _attention_fit(folder: Path, system: str, phase: str, peak: float, bw: float) -> Fit | None:
    """One attention fit, or None if the table implies impossible FLOP rates."""
    if phase == "decode":
        arrays = decode_attention_arrays(folder, system, bw)
        return None if arrays is None else fit_decode(*arrays[:3], bw, arrays[3])
    path = folder / f"{system}_context_attention_vllm-0.19.0.csv.gz"
    rows = _bf16_kv_rows(path)
    b, H = _col(rows, "batch_size"), _col(rows, "num_heads")
    KV, hd = _col(rows, "num_key_value_heads"), _col(rows, "head_dim")
    t = _col(rows, "latency") * 1e-3
    s = _col(rows, "isl")
    flops = 4 * b * H * hd * s * (s + 1) / 2  # causal
    nbytes = 2 * b * s * (H + 2 * KV) * hd * 2
    if np.mean(flops / t > peak) > MAX_IMPOSSIBLE_SHARE:
        return None
    data = f"{path.name} kv_cache_dtype=bfloat16 window_size=0"
    return fit_curve(flops, nbytes, t, peak, bw, data)


def _bf16_kv_rows(path: Path) -> list[dict[str, str]]:
    return [r for r in read_rows(path) if r["kv_cache_dtype"] == "bfloat16"
            and r["window_size"] == "0"]  # fmt: skip


def decode_attention_arrays(folder: Path, system: str, bw: float):
    """((b·H, b·KV), bytes, measured seconds, data name) of ``system``'s generation-attention
    table (bf16 KV, no window), or None if its rows imply more than 1.5× the HBM bandwidth on
    more than ``MAX_IMPOSSIBLE_SHARE`` of them."""
    path = folder / f"{system}_generation_attention_vllm-0.19.0.csv.gz"
    rows = _bf16_kv_rows(path)
    b, H = _col(rows, "batch_size"), _col(rows, "num_heads")
    KV, hd = _col(rows, "num_key_value_heads"), _col(rows, "head_dim")
    t = _col(rows, "latency") * 1e-3
    kv = _col(rows, "isl") + _col(rows, "step")  # attended KV length
    nbytes = 2 * b * kv * KV * hd * 2 + 4 * b * H * hd
    if np.mean(nbytes / t > 1.5 * bw) > MAX_IMPOSSIBLE_SHARE:
        return None
    return (b * H, b * KV), nbytes, t, f"{path.name} kv_cache_dtype=bfloat16 window_size=0"


# Fused-MoE curves per ``moe_dtype``: bf16, per-tensor fp8 and block-scaled fp8 (128x128 weight
# blocks, the format DeepSeek-V3 ships; computed at the fp8 rate).
MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4"}
# The kernel each MoE dtype's rows time (default ``vllm_fused_moe``): NVFP4 experts on Blackwell
# run FlashInfer's TensorRT-LLM fused-MoE kernel (vLLM's FlashInfer backend, TensorRT-LLM's own;
# the table's only nvfp4 source). MXFP4 experts (gpt-oss) take this fp4 curve on B200 too.
MOE_SOURCES = {"nvfp4": "vllm_flashinfer_trtllm_moe_fp4"}
MOE_MAX_TOKENS = 1024  # the decode operating range: tokens per step ≤ the largest batch
MOE_SHAPE = ("hidden_size", "inter_size", "topk", "num_experts")  # a model's MoE layer shape


def moe_fits(folder: Path, system: str, peaks: dict[str, float], bw: float,
             prefill: bool = False, exclude: frozenset = frozenset()
             ) -> dict[str, Fit]:  # fmt: skip
    """Fused-MoE layer curves (vLLM ``fused_moe``), balanced routing, no expert parallelism, on
    the decode range (tokens ≤ ``MOE_MAX_TOKENS``) or, with ``prefill``, on the prefill range
    (tokens ≥ ``MOE_MAX_TOKENS``; the kernel changes regime there and the decode fit is 1.6-3x
    too fast at 8k tokens), where a per token-expert pair time (routing sort, gather/scatter,
    top-k sum: ``seconds_per_pair``) is fitted too.

    Bytes = the experts hit (``min(local experts, tokens·top-k)``, balanced) × their gate/up/down
    weights + token activations; FLOPs = 2 · tokens·top-k · 3 · hidden · inter / tp.
    ``exclude``: (hidden, inter, top-k, experts) layer shapes left out (leave-one-model-out)."""
    path = folder / f"{system}_moe_vllm-0.19.0.csv.gz"
    if not path.exists():
        return {}
    rows = [
        r
        for r in read_rows(path)
        if r["kernel_source"] == MOE_SOURCES.get(r["moe_dtype"], "vllm_fused_moe")
        and r["distribution"] == "balanced"
        and r["moe_ep_size"] == "1"
        and tuple(int(r[c]) for c in MOE_SHAPE) not in exclude
        and (
            int(r["num_tokens"]) >= MOE_MAX_TOKENS
            if prefill
            else int(r["num_tokens"]) <= MOE_MAX_TOKENS
        )
    ]
    out = {}
    for dtype, fmt in MOE_DTYPES.items():
        sel = [r for r in rows if r["moe_dtype"] == dtype]
        if not sel or fmt.removesuffix("_block") not in peaks:
            continue
        T, h, f = _col(sel, "num_tokens"), _col(sel, "hidden_size"), _col(sel, "inter_size")
        k, E, tp = _col(sel, "topk"), _col(sel, "num_experts"), _col(sel, "moe_tp_size")
        pairs = T * k
        active = np.minimum(E, pairs)
        f_dev = f / tp
        flops = 2 * pairs * 3 * h * f_dev
        nbytes = moe_nbytes(fmt, T, pairs, active, h, f_dev)
        t = _col(sel, "latency") * 1e-3
        span = f"tokens >= {MOE_MAX_TOKENS}" if prefill else f"tokens <= {MOE_MAX_TOKENS}"
        source = MOE_SOURCES.get(dtype, "vllm_fused_moe")
        data = f"{path.name} {source} {dtype} balanced ep=1 {span}"
        peak = peaks[fmt.removesuffix("_block")]
        out[fmt] = fit_moe(flops, nbytes, active, t, peak, bw, data, pairs if prefill else None)
    return out


def fit_moe(flops, nbytes, active, measured, peak: float, bw: float, data: str,
            pairs=None) -> Fit:  # fmt: skip
    """``curve`` + ``seconds_per_active_expert · active experts`` (``chip.gpu.perf.fused_moe``);
    with ``pairs`` (the prefill range) also ``seconds_per_pair · token-expert pairs``."""
    from scipy.optimize import least_squares

    n = 5 if pairs is None else 6

    def pred(x):
        t = curve(x[:4], flops, nbytes, peak, bw) + x[4] * 1e-9 * active
        return t if pairs is None else t + x[5] * 1e-9 * pairs

    res = least_squares(
        lambda x: np.log(pred(x) / measured),
        [0.5, 0.7, 20.0, 1.0, 100.0, 1.0][:n],
        bounds=([0.01, 0.01, 0, 1, 0, 0][:n], [1, 1, 200, 20, 1e5, 1e4][:n]),
    )
    ape = np.abs(pred(res.x) / measured - 1)
    ce, be, t0, p, u = (float(v) for v in res.x[:5])
    values = {
        "compute_efficiency": round(ce, 4),
        "bandwidth_efficiency": round(be, 4),
        "fixed_seconds": round(t0 * 1e-6, 9),
        "blend": round(p, 3),
        "seconds_per_active_expert": round(u * 1e-9, 12),
    }
    if pairs is not None:
        values["seconds_per_pair"] = round(float(res.x[5]) * 1e-9, 13)
    return Fit(values, data, len(measured), float(ape.mean()), float(np.median(ape)))


def _peaks(prof: dict) -> dict[str, float]:
    """FLOP/s peak per format of a profile document, block-scaled formats at their base's."""
    return block_peaks({k: v["value"] for k, v in prof["peak_flops"].items()})


def _sourced_curve(fit: Fit) -> dict:
    src = fit.source()
    return {k: {"value": v, "source": src} for k, v in fit.values.items()}


# Chips without a kernel table: their curves are the named chip's fit, marked as transferred.
TRANSFER = {"mi325x": "h200-sxm", "mi300x": "h200-sxm", "b300": "b200", "gb200": "b200",
            "gb300": "b300"}  # fmt: skip
TRANSFERRED = ("gemm", "gemm_decode", "moe", "moe_prefill", "attention_decode",
               "attention_prefill", "overheads")  # fmt: skip


def _mark(node, note: str):
    if isinstance(node, dict):
        if "source" in node and "value" in node:
            return {**node, "source": note + node["source"]}
        return {k: _mark(v, note) for k, v in node.items()}
    return node
