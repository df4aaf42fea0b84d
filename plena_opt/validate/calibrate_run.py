"""Run every kernel-level fit and store it: ``python -m plena_opt.validate.calibrate_run DIR
[--write]`` prints the fits of the GPU profiles' efficiency constants (``calibrate``, with the
GEMM decode and W4A16 fits of ``calibrate_gemm`` and ``calibrate_w4a16``, the GH100 same-die
attention fit of ``calibrate_die``), or stores them in the
built-in profiles and copies them to the chips without a kernel table (``TRANSFER``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from plena_opt.chip.gpu.profile import profiles_dir
from plena_opt.validate.calibrate import (
    BLOCK_BASE,
    SAME_COMPUTE,
    SYSTEMS,
    TRANSFER,
    TRANSFERRED,
    Fit,
    _mark,
    _peaks,
    _sourced_curve,
    attention_fits,
    gemm_fits,
    moe_fits,
)
from plena_opt.validate.calibrate_die import pooled_attention_fits
from plena_opt.validate.calibrate_gemm import (
    DECODE_MAX_M,
    gemm_decode_fits,
    pooled_decode_fits,
    pooled_gemm_fits,
    tensor_rate_fits,
)
from plena_opt.validate.calibrate_w4a16 import hopper_w4a16_fits


def calibrate(folder: Path, write: bool = False) -> dict[str, dict[str, Fit]]:
    """Fit every system in ``folder``; with ``write`` update the built-in profile JSON files."""
    fits: dict[str, dict[str, Fit]] = {}
    profs = {s: json.loads((profiles_dir() / f"{c}.json").read_text()) for s, c in SYSTEMS.items()}
    specs = {
        s: (p["peak_flops"]["bf16"]["value"], p["hbm"]["bandwidth_bytes_per_s"]["value"])
        for s, p in profs.items()
    }
    all_peaks = {s: _peaks(p) for s, p in profs.items()}
    gpu = {s: (all_peaks[s], specs[s][1]) for s in SYSTEMS}
    pooled = pooled_gemm_fits(folder, gpu, {s: gemm_fits(folder, s, *gpu[s]) for s in SYSTEMS})
    full = {s: tensor_rate_fits(all_peaks[s], pooled[s]) for s in SYSTEMS}
    decode = pooled_decode_fits(
        folder,
        gpu,
        {s: gemm_decode_fits(folder, s, all_peaks[s], specs[s][1], full[s]) for s in SYSTEMS},
    )
    attention = pooled_attention_fits(folder, specs, {s: attention_fits(folder, s, specs)
                                                      for s in SYSTEMS})  # fmt: skip
    for system, chip in SYSTEMS.items():
        path = profiles_dir() / f"{chip}.json"
        prof = profs[system]
        peaks = _peaks(prof)
        bw = specs[system][1]
        g, gd, a = full[system], decode[system], attention[system]
        mo = moe_fits(folder, system, peaks, bw)
        mp = moe_fits(folder, system, peaks, bw, prefill=True)
        if not mo:  # no table: the same-silicon system's fit, against its own peaks/bandwidth
            other = SAME_COMPUTE[system]
            op = {k: v["value"] for k, v in profs[other]["peak_flops"].items()}
            mo = moe_fits(folder, other, op, specs[other][1])
            mp = moe_fits(folder, other, op, specs[other][1], prefill=True)
        wo, wp = hopper_w4a16_fits(folder, system, specs)  # W4A16 experts (mxfp4, int4)
        mo, mp = {**mo, **wo}, {**mp, **wp}
        fits[chip] = {
            **{f"gemm.{k}": v for k, v in g.items()},
            **{f"gemm_decode.{k}": v for k, v in gd.items()},
            **{f"attention_{k}": v for k, v in a.items()},
            **{f"moe.{k}": v for k, v in mo.items()},
            **{f"moe_prefill.{k}": v for k, v in mp.items()},
        }
        if write:
            prof["moe"] = {k: _sourced_curve(v) for k, v in mo.items()}
            prof["moe_prefill"] = {k: _sourced_curve(v) for k, v in mp.items()}
            for fmt, fit in g.items():
                prof["gemm"][fmt] = _sourced_curve(fit)
            prof["gemm_decode"] = {k: _sourced_curve(v) for k, v in gd.items()}
            prof["gemm_decode_max_tokens"] = DECODE_MAX_M
            window = prof.get("attention_decode", {}).get("window_seconds")
            prof["attention_decode"] = _sourced_curve(a["decode"])
            if window is not None:  # read off the windowed rows: re-run calibrate_window
                prof["attention_decode"]["window_seconds"] = window
            prof["attention_prefill"] = _sourced_curve(a["prefill"])
            bf = g["bf16"]
            ov = prof["overheads"]
            ov["kernel_seconds"] = {
                "value": bf.values["fixed_seconds"],
                "source": "= gemm.bf16.fixed_seconds (per-kernel fixed time; " + bf.source() + ")",
            }
            ov["elementwise_bandwidth_efficiency"] = {
                "value": bf.values["bandwidth_efficiency"],
                "source": "= gemm.bf16.bandwidth_efficiency (" + bf.source() + ")",
            }
            path.write_text(json.dumps(prof, indent=2) + "\n")
    return fits


def transfer_profiles() -> None:
    """Copy the curves of ``TRANSFER`` sources into the chips that have no kernel data."""
    for chip, src in TRANSFER.items():
        path = profiles_dir() / f"{chip}.json"
        prof = json.loads(path.read_text())
        donor = json.loads((profiles_dir() / f"{src}.json").read_text())
        note = f"no public kernel table for {chip} ships with the project; {src} value: "
        for key in TRANSFERRED:
            prof[key] = _mark(donor.get(key, {}), note)
        prof["overheads"]["step_seconds"] = donor["overheads"]["step_seconds"]
        for key in ("gemm", "gemm_decode"):
            prof[key] = {k: v for k, v in prof[key].items()
                         if BLOCK_BASE.get(k, k) in prof["peak_flops"]}  # fmt: skip
        if "gemm_decode_max_tokens" in donor:
            prof["gemm_decode_max_tokens"] = donor["gemm_decode_max_tokens"]
        path.write_text(json.dumps(prof, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", type=Path, help="folder of the kernel CSVs (../shared/data/kernels)")
    ap.add_argument("--write", action="store_true", help="store the fits in the built-in profiles")
    args = ap.parse_args(argv)
    fits = calibrate(args.kernels, args.write)
    if args.write:
        transfer_profiles()
    for chip, fs in fits.items():
        for name, fit in fs.items():
            print(f"{chip:9} {name:18} {fit.values}  MAPE {100 * fit.mape:.1f} % ({fit.rows} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
