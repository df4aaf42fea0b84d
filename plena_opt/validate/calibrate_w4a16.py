"""Fused-MoE curves of weight-only 4-bit experts (W4A16) on Hopper, fitted on measured kernels.

Data: the H200 MoE table (``h200_sxm_moe_vllm-0.19.0.csv.gz``) holds vLLM's W4A16 expert kernels
on two production layer shapes: ``vllm_mxfp4_moe`` (``w4a16_mxfp4``, gpt-oss-120b's layer:
hidden 2880, inter 2880, top-4 of 128 and 32 experts) and ``vllm_marlin_int4_moe`` (``int4_wo``:
Marlin INT4, Kimi-K2's layer 7168 x 2048 top-8 of 384 and Mixtral's). The curve is
``chip.gpu.perf.fused_moe``'s at the weight-only rate the evaluator prices (bf16 peak /
``W4A16_DEQUANT_SLOWDOWN``) with the format's weight bytes (MXFP4 4.25 bits, INT4 4.125 bits);
balanced routing, no expert parallelism, as ``calibrate.moe_fits`` fits the bf16/fp8 layers. The
fits are stored under the format's own name (``moe.mxfp4``, ``moe.int4``), which
``GpuPerfModel.fused_moe`` prefers for a weight-only plan.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plena_opt.validate.calibrate import MOE_MAX_TOKENS, Fit, _col, fit_moe, moe_nbytes, read_rows

# kernel source -> (moe_dtype, product format); bytes: the format's weights (incl. scales) and
# bf16 activations (``calibrate.moe_nbytes`` at the weight-only compute format)
W4A16_KERNELS = {
    "vllm_mxfp4_moe": ("w4a16_mxfp4", "mxfp4"),
    "vllm_marlin_int4_moe": ("int4_wo", "int4"),
}


def w4a16_moe_fits(folder: Path, system: str, bf16_peak: float, bw: float,
                   prefill: bool = False) -> dict[str, Fit]:  # fmt: skip
    """The W4A16 fused-MoE curves of ``system`` (decode range, or ``prefill``), by format."""
    from plena_opt.chip.precision import W4A16_DEQUANT_SLOWDOWN, WEIGHT_ONLY_COMPUTE

    path = folder / f"{system}_moe_vllm-0.19.0.csv.gz"
    if not path.exists():
        return {}
    rows = [r for r in read_rows(path) if r["distribution"] == "balanced"
            and r["moe_ep_size"] == "1" and r["kernel_source"] in W4A16_KERNELS]  # fmt: skip
    out = {}
    for source, (dtype, fmt) in W4A16_KERNELS.items():
        sel = [r for r in rows if r["kernel_source"] == source and r["moe_dtype"] == dtype]
        sel = [r for r in sel if (int(r["num_tokens"]) >= MOE_MAX_TOKENS) == prefill
               or int(r["num_tokens"]) == MOE_MAX_TOKENS]  # fmt: skip
        if not sel:
            continue
        T, h, f = _col(sel, "num_tokens"), _col(sel, "hidden_size"), _col(sel, "inter_size")
        k, E, tp = _col(sel, "topk"), _col(sel, "num_experts"), _col(sel, "moe_tp_size")
        pairs = T * k
        active = np.minimum(E, pairs)
        f_dev = f / tp
        flops = 2 * pairs * 3 * h * f_dev
        nbytes = moe_nbytes(fmt, T, pairs, active, h, f_dev, WEIGHT_ONLY_COMPUTE)
        t = _col(sel, "latency") * 1e-3
        span = f"tokens >= {MOE_MAX_TOKENS}" if prefill else f"tokens <= {MOE_MAX_TOKENS}"
        data = f"{path.name} {source} {dtype} balanced ep=1 {span} (calibrate_w4a16)"
        peak = bf16_peak / W4A16_DEQUANT_SLOWDOWN
        out[fmt] = fit_moe(flops, nbytes, active, t, peak, bw, data, pairs if prefill else None)
    return out


def hopper_w4a16_fits(folder: Path, system: str, specs: dict[str, tuple[float, float]]
                      ) -> tuple[dict[str, Fit], dict[str, Fit]]:  # fmt: skip
    """(decode, prefill) W4A16 fits of ``system``, else of its same-silicon system (H100 has no
    MoE table: the H200 fit, against the H200's bf16 peak and bandwidth, as ``calibrate``
    does for the bf16/fp8 layers). ``specs``: system -> (bf16 peak FLOP/s, HBM B/s)."""
    from plena_opt.validate.calibrate import SAME_COMPUTE

    for s in (system, SAME_COMPUTE.get(system)):
        if s in specs:
            mo = w4a16_moe_fits(folder, s, *specs[s])
            if mo:
                return mo, w4a16_moe_fits(folder, s, *specs[s], prefill=True)
    return {}, {}


def write_profiles(folder: Path) -> dict[str, dict[str, Fit]]:
    """Store the W4A16 curves in the Hopper profiles (and the chips that borrow H200's curves,
    ``calibrate.TRANSFER``), leaving every other constant as it is."""
    import json

    from plena_opt.chip.gpu.profile import profiles_dir
    from plena_opt.validate.calibrate import SYSTEMS, TRANSFER, _mark, _sourced_curve

    profs = {s: json.loads((profiles_dir() / f"{c}.json").read_text()) for s, c in SYSTEMS.items()}
    specs = {s: (p["peak_flops"]["bf16"]["value"], p["hbm"]["bandwidth_bytes_per_s"]["value"])
             for s, p in profs.items()}  # fmt: skip
    out = {}
    for system in ("h200_sxm", "h100_sxm"):
        mo, mp = hopper_w4a16_fits(folder, system, specs)
        out[SYSTEMS[system]] = {**{f"moe.{k}": v for k, v in mo.items()},
                                **{f"moe_prefill.{k}": v for k, v in mp.items()}}  # fmt: skip
    for chip, fits in out.items():
        targets = [(chip, "")] + [
            (c, f"no public kernel table for {c} ships with the project; {chip} value: ")
            for c, s in TRANSFER.items()
            if s == chip
        ]
        for name, note in targets:  # fmt: skip
            path = profiles_dir() / f"{name}.json"
            prof = json.loads(path.read_text())
            for key, fit in fits.items():
                table, fmt = key.split(".")
                prof.setdefault(table, {})[fmt] = _mark(_sourced_curve(fit), note)
            path.write_text(json.dumps(prof, indent=2) + "\n")
    return out


if __name__ == "__main__":
    import sys

    for chip, fs in write_profiles(Path(sys.argv[1])).items():
        for name, fit in fs.items():
            print(f"{chip:9} {name:18} {fit.values}  MAPE {100 * fit.mape:.1f} % ({fit.rows} rows)")
