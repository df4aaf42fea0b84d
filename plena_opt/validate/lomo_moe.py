"""Leave-one-model-out over every fitted constant that has seen a fig09 model's data.

Two fits do: the fused-MoE curves (kernel data holding the MoE models' layer shapes) and
``eager_host.seconds_per_triton_op`` (fitted on fig09's unscored eager rows,
``calibrate_host``). The chip's ``moe`` and ``moe_prefill`` curves are fitted on every
balanced fused-MoE row of the kernel table (``calibrate.moe_fits``), and the table holds the
layer shapes of Qwen3-235B-A22B and DeepSeek-V3 among others. Holding a model out refits both
curves without the rows of that model's layer shape (hidden, expert inter size, top-k, experts;
every TP size), refits the Triton constant without the model's eager row, and scores the
model's fig09 points with the refitted chip. The GEMM and attention curves are fitted on
generic shape grids, not on model shapes, and ``eager_host.seconds_per_op`` is the kernel
table's eager all-reduce loop (no model in it); the dense models launch no Triton kernel, so
holding them out changes nothing they are scored on.
Run ``python -m plena_opt.validate.lomo_moe [../shared/data/kernels]``.
"""

from __future__ import annotations

import json
from pathlib import Path

from plena_opt.chip.gpu import GpuChipProfile

# the fig09 MoE models' layer shape in the kernel table: (hidden, inter, top-k, experts)
MOE_MODEL_SHAPES = {
    "qwen3-235b-a22b": (4096, 1536, 8, 128),
    "deepseek-v3": (7168, 2048, 8, 256),
}
COLUMNS = {
    "fig09": "System Decode TPS",
    "fig09_prefill": "System Prefill TPS",
    "fig09_ttft": "User Prefill Speed",
    "fig09_tpot": "User Decode Speed",
}


def held_out_chip(kernels: Path, model: str, chip_name: str = "b200") -> GpuChipProfile:
    """``chip_name`` with its fused-MoE curves refitted without ``model``'s layer shape (MoE
    models) and its Triton host constant refitted without ``model``'s eager row."""
    from plena_opt.chip import load_chip
    from plena_opt.chip.gpu.profile import profiles_dir
    from plena_opt.validate.calibrate import SYSTEMS, _sourced_curve, moe_fits
    from plena_opt.validate.calibrate_host import fit_eager_host

    system = {chip: s for s, chip in SYSTEMS.items()}[chip_name]
    prof = json.loads((profiles_dir() / f"{chip_name}.json").read_text())
    peaks = {k: v["value"] for k, v in prof["peak_flops"].items()}
    bw = prof["hbm"]["bandwidth_bytes_per_s"]["value"]
    if model in MOE_MODEL_SHAPES:
        out = frozenset({MOE_MODEL_SHAPES[model]})
        for key, prefill in (("moe", False), ("moe_prefill", True)):
            fits = moe_fits(Path(kernels), system, peaks, bw, prefill=prefill, exclude=out)
            prof[key] = {fmt: _sourced_curve(fit) for fmt, fit in fits.items()}
    host = prof["eager_host"]
    fit = fit_eager_host(host["seconds_per_op"]["value"], leave_out=model)
    host["seconds_per_triton_op"]["value"] = fit.seconds_per_triton_op
    return load_chip(prof)


def model_mapes(model: str, chip: GpuChipProfile) -> dict[str, float]:
    """dataset → MAPE % of ``model``'s fig09 points priced on ``chip``."""
    from plena_opt.validate.scorecard import (
        fig09_measurements,
        fig09_predict,
        fig09_prefill_predict,
    )

    meas = {ds: fig09_measurements(column=c)[model] for ds, c in COLUMNS.items()}
    burst = fig09_prefill_predict(model, [b for b, _ in meas["fig09_tpot"]], chip)
    errs: dict[str, list[float]] = {ds: [] for ds in COLUMNS}
    for b, v in meas["fig09"]:
        errs["fig09"].append(fig09_predict(model, b, chip) / v - 1)
    for b, v in meas["fig09_prefill"]:
        errs["fig09_prefill"].append(burst[b].system_prefill_tps / v - 1)
    for b, v in meas["fig09_ttft"]:
        errs["fig09_ttft"].append(burst[b].user_prefill_speed / v - 1)
    for b, v in meas["fig09_tpot"]:
        errs["fig09_tpot"].append(v / burst[b].user_decode_speed - 1)  # TPOT = 1 / speed
    return {ds: 100 * sum(abs(e) for e in es) / len(es) for ds, es in errs.items()}


def held_out_scores(kernels: Path) -> dict[str, dict[str, float]]:
    """fig09 model → dataset → MAPE % with every constant that saw the model fitted without it."""
    from plena_opt.validate.scorecard import FIG09_FILES

    return {m: model_mapes(m, held_out_chip(kernels, m)) for m in FIG09_FILES}


def main(kernels: str = "../shared/data/kernels") -> None:  # pragma: no cover - for people
    from plena_opt.chip import load_chip
    from plena_opt.validate.scorecard import FIG09_FILES

    for model in FIG09_FILES:
        full = model_mapes(model, load_chip("b200"))
        held = model_mapes(model, held_out_chip(Path(kernels), model))
        for ds in COLUMNS:
            print(f"{model} {ds}: in-sample {full[ds]:.2f} %  held out {held[ds]:.2f} %")


if __name__ == "__main__":  # pragma: no cover
    import sys

    main(*sys.argv[1:])
