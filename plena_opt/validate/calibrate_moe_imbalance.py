"""Fit ``chip.gpu.moe_imbalance``'s tile time shares on the kernel tables' routed MoE rows.

Data: ``{h200,b200}_sxm_moe_vllm-0.19.0.csv.gz``. Every (kernel, dtype, tokens, layer shape, TP)
at EP 1 is timed under three routings: ``balanced``, ``power_law_1.01`` and ``power_law_1.2``
(AIConfigurator's collector; ``deepstack.power_law`` is its load law). A ratio is a power-law row
over its balanced twin, kept above ``PREFILL_MIN_TOKENS`` tokens (where the chip's prefill MoE
curves price the layer) for the kernels with a known M tile (``MOE_BLOCK_M`` by curve key). Its
model: ``1 + s · (R − 1)``, ``R`` = the M tiles of the seed-0 ``power_law_counts`` draw over those
of the even split (``moe_imbalance.tile_ratio``), ``s`` fitted per kernel family (``FAMILIES``:
8/16-bit weights, 4-bit weight-only) by least squares on log ratios.

Run ``python -m plena_opt.validate.calibrate_moe_imbalance [../shared/data/kernels]``: the fits,
leave-one-GPU-out and leave-one-model-out (layer shape) figures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from plena_opt.chip.gpu.moe_imbalance import MOE_BLOCK_M, W4A16_CURVES, tile_ratio

SYSTEMS = ("h200_sxm", "b200_sxm")
PREFILL_MIN_TOKENS = 1024  # == the chips' ``moe_prefill_min_tokens`` (strictly above)
# (kernel_source, moe_dtype) -> the prefill curve key it is fitted as (``calibrate.moe_fits``,
# ``calibrate_w4a16``); the TensorRT-LLM-gen NVFP4 rows have no M tile here (moe_imbalance)
KERNELS = {
    ("vllm_fused_moe", "bfloat16"): "bf16",
    ("vllm_fused_moe", "fp8"): "fp8",
    ("vllm_fused_moe", "fp8_block"): "fp8_block",
    ("vllm_marlin_int4_moe", "int4_wo"): "int4",
    ("vllm_mxfp4_moe", "w4a16_mxfp4"): "mxfp4",
}
# kernel family -> its prefill curves, each family with its own share (``moe_imbalance``)
FAMILIES = {"w8w16": ("bf16", "fp8", "fp8_block"), "w4a16": W4A16_CURVES}
SHARE_NAMES = {"w8w16": "MOE_TILE_TIME_SHARE", "w4a16": "W4A16_TILE_TIME_SHARE"}
SHAPE = ("hidden_size", "inter_size", "topk", "num_experts")
KEY = ("kernel_source", "moe_dtype", "num_tokens", *SHAPE, "moe_tp_size")


@dataclass(frozen=True)
class Ratios:
    """Power-law / balanced layer-time ratios with their tile ratios and labels (arrays)."""

    measured: np.ndarray
    tiles: np.ndarray
    system: np.ndarray
    shape: np.ndarray  # "hidden x inter x top-k x experts"
    curve: np.ndarray


@lru_cache(maxsize=4096)
def draw_tile_ratio(tokens: int, experts: int, top_k: int, alpha: float, block_m: int) -> float:
    """``tile_ratio`` of the seed-0 power-law draw of ``tokens`` tokens (pricing's draw)."""
    from deepstack.power_law import power_law_counts

    return tile_ratio(power_law_counts(tokens, experts, top_k, alpha, 0).tolist(), block_m)


def table_ratios(folder: Path) -> Ratios:
    """Every EP 1 power-law / balanced ratio above ``PREFILL_MIN_TOKENS`` of both tables."""
    from plena_opt.validate.calibrate import read_rows

    out: dict[str, list] = {k: [] for k in ("measured", "tiles", "system", "shape", "curve")}
    for system in SYSTEMS:
        path = Path(folder) / f"{system}_moe_vllm-0.19.0.csv.gz"
        if not path.exists():
            raise FileNotFoundError(f"kernel table {path} is missing")
        twins: dict[tuple, dict[str, float]] = {}
        for r in read_rows(path):
            if r["moe_ep_size"] != "1" or int(r["num_tokens"]) <= PREFILL_MIN_TOKENS:
                continue
            if (r["kernel_source"], r["moe_dtype"]) in KERNELS:
                twins.setdefault(tuple(r[c] for c in KEY), {})[r["distribution"]] = float(
                    r["latency"])  # fmt: skip
        for key, by_dist in sorted(twins.items()):
            curve = KERNELS[key[:2]]
            T, h, f, k, E = (int(v) for v in key[2:7])
            for dist, t in sorted(by_dist.items()):
                if not dist.startswith("power_law_") or "balanced" not in by_dist:
                    continue
                alpha = float(dist.removeprefix("power_law_"))
                out["measured"].append(t / by_dist["balanced"])
                out["tiles"].append(draw_tile_ratio(T, E, k, alpha, MOE_BLOCK_M[curve]))
                out["system"].append(system)
                out["shape"].append(f"{h}x{f}x{k}x{E}")
                out["curve"].append(curve)
    return Ratios(**{k: np.array(v) for k, v in out.items()})


def fit_share(tiles: np.ndarray, measured: np.ndarray) -> float:
    """The least-squares ``s`` of ``log(1 + s (tiles − 1)) ≈ log(measured)``, s in [0, 1.5]."""
    from scipy.optimize import minimize_scalar

    def loss(s: float) -> float:
        pred = np.maximum(1.0 + s * (tiles - 1.0), 1e-3)
        return float(np.sum((np.log(pred) - np.log(measured)) ** 2))

    return float(minimize_scalar(loss, bounds=(0.0, 1.5), method="bounded").x)


def mape(share: float, tiles: np.ndarray, measured: np.ndarray) -> float:
    """Ratio MAPE (%) of ``1 + share (tiles − 1)``; share 0: priced as balanced."""
    return float(100 * np.mean(np.abs((1.0 + share * (tiles - 1.0)) / measured - 1.0)))


def report(folder: Path) -> dict[str, dict]:
    """Per kernel family (``FAMILIES``): the fitted share over its ratios, by curve, held out by
    GPU (``logo``) and by layer shape (``lomo``): (share, ratios, MAPE as balanced, MAPE)."""
    d = table_ratios(folder)
    out = {}
    for family, curves in FAMILIES.items():
        m = np.isin(d.curve, curves)
        t, y, system, shape, curve = d.tiles[m], d.measured[m], d.system[m], d.shape[m], d.curve[m]
        s = fit_share(t, y)
        fam = {"share": s, "ratios": int(m.sum()), "mape_balanced": mape(0, t, y),
               "mape": mape(s, t, y), "by_curve": {}, "logo": {}, "lomo": {}}  # fmt: skip
        for c in sorted(set(curve)):
            k = curve == c
            fam["by_curve"][c] = (int(k.sum()), mape(0, t[k], y[k]), mape(s, t[k], y[k]))
        for label, groups in (("logo", system), ("lomo", shape)):
            for g in sorted(set(groups)):
                held = groups == g
                sh = fit_share(t[~held], y[~held])
                fam[label][str(g)] = (sh, int(held.sum()), mape(0, t[held], y[held]),
                                      mape(sh, t[held], y[held]))  # fmt: skip
        out[family] = fam
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0]) if argv else Path(__file__).resolve().parents[3] / "shared/data/kernels"
    for family, r in report(folder).items():
        print(f"{SHARE_NAMES[family]} = {r['share']:.3f} on {r['ratios']} ratios; ratio MAPE "
              f"{r['mape_balanced']:.2f} % (as balanced) -> {r['mape']:.2f} %")  # fmt: skip
        for c, (n, a, b) in r["by_curve"].items():
            print(f"  curve {c:10s} {n:5d} ratios  {a:6.2f} -> {b:6.2f} %")
        for label in ("logo", "lomo"):
            for g, (sh, n, a, b) in r[label].items():
                print(f"  {label} held out {g:18s} share {sh:.3f}  {n:5d} ratios  "
                      f"{a:6.2f} -> {b:6.2f} %")  # fmt: skip


if __name__ == "__main__":
    main()
