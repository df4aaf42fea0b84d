"""Fit the GPU chips' ``eager_host`` constants on fig09's eager-mode decode rows.

fig09's CSVs carry, next to the CUDA-graph runs the scorecard compares with, the same runs with
``--enforce-eager`` (``Eager_Mode = True``; not scored). At batch 1 an eager decode step is host
bound: 1 / ``User Decode Speed`` is 19.9 ms (Llama-3.1-70B) … 113.5 ms (DeepSeek-V3) against
7–24 ms of kernels with graphs, so it measures the host time of one eager forward. With the
launches of that forward counted per layer kind (``estimate.gpu_host.model_ops``), the two
constants ``seconds_per_op`` and ``seconds_per_triton_op`` are the least-squares fit (relative
error) of ``ops · a + triton · b`` = measured step over the four models; leave-one-model-out
refits on three and predicts the fourth. Run ``python -m plena_opt.validate.calibrate_host``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIT_BATCH = 1  # the eager decode rows fitted on (host bound, kernels smallest)


@dataclass(frozen=True)
class HostFit:
    seconds_per_op: float
    seconds_per_triton_op: float
    errors: dict[str, float]  # model → fitted / measured − 1 (in-sample)
    held_out: dict[str, float]  # model → error when fitted on the other models


def eager_step_seconds(folder: Path | None = None) -> dict[str, float]:
    """model → measured eager decode step at ``FIT_BATCH`` (1 / ``User Decode Speed``), s."""
    from plena_opt.validate.scorecard import FIG09_FILES, data_dir

    folder = folder or data_dir() / "fig09"
    out = {}
    for model, name in FIG09_FILES.items():
        with open(folder / name, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["Eager_Mode"].strip() == "True" and int(r["BS"]) == FIT_BATCH:
                    out[model] = 1.0 / float(r["User Decode Speed"])
    return out


def _counts(model_name: str) -> tuple[int, int]:
    from plena_opt.estimate.gpu import BLOCK_FP8_MODEL_TYPES
    from plena_opt.estimate.gpu_host import model_ops
    from plena_opt.models import load_model
    from plena_opt.validate.scorecard import CHECKPOINT_PRECISION

    m = load_model(model_name)
    block = CHECKPOINT_PRECISION.get(model_name) == "fp8" and m.model_type in BLOCK_FP8_MODEL_TYPES
    ops = model_ops(m, 8, block)  # fig09: TP 8
    return ops.ops, ops.triton


def _solve(rows: dict[str, tuple[int, int, float]]) -> np.ndarray:
    a = np.array([[o / t, k / t] for o, k, t in rows.values()])
    x, *_ = np.linalg.lstsq(a, np.ones(len(rows)), rcond=None)
    return x


def fit_eager_host(folder: Path | None = None, leave_out: str | None = None) -> HostFit:
    """The fit (without ``leave_out``'s row when given) and its leave-one-model-out errors."""
    steps = eager_step_seconds(folder)
    rows = {m: (*_counts(m), t) for m, t in steps.items()}

    def err(x: np.ndarray, m: str) -> float:
        o, k, t = rows[m]
        return (o * x[0] + k * x[1]) / t - 1.0

    x = _solve({k: v for k, v in rows.items() if k != leave_out})
    held = {m: err(_solve({k: v for k, v in rows.items() if k != m}), m) for m in rows}
    return HostFit(float(x[0]), float(x[1]), {m: err(x, m) for m in rows}, held)


def held_out_scores(chip_name: str = "b200") -> dict[str, dict[str, float]]:
    """dataset → model → MAPE % of the fig09 prefill / TTFT / TPOT replay when the chip's
    ``eager_host`` constants are refitted without that model (leave-one-model-out)."""
    from plena_opt.chip import load_chip
    from plena_opt.validate.scorecard import fig09_measurements, fig09_prefill_predict

    base = load_chip(chip_name)
    cols = {"fig09_prefill": "System Prefill TPS", "fig09_ttft": "User Prefill Speed",
            "fig09_tpot": "User Decode Speed"}  # fmt: skip
    meas = {ds: fig09_measurements(column=c) for ds, c in cols.items()}
    out: dict[str, dict[str, float]] = {ds: {} for ds in cols}
    for model in eager_step_seconds():
        fit = fit_eager_host(leave_out=model)
        eh = base.eager_host.model_copy(update={
            "seconds_per_op": base.eager_host.seconds_per_op.model_copy(
                update={"value": fit.seconds_per_op}),
            "seconds_per_triton_op": base.eager_host.seconds_per_triton_op.model_copy(
                update={"value": fit.seconds_per_triton_op}),
        })  # fmt: skip
        chip = base.model_copy(update={"eager_host": eh})
        pred = fig09_prefill_predict(model, [b for b, _ in meas["fig09_ttft"][model]], chip)
        for ds, points in meas.items():
            errs = []
            for b, v in points[model]:
                q = pred[b]
                got = {"fig09_prefill": q.system_prefill_tps, "fig09_ttft": q.user_prefill_speed,
                       "fig09_tpot": 1 / q.user_decode_speed}[ds]  # fmt: skip
                errs.append(abs(got / (1 / v if ds == "fig09_tpot" else v) - 1))
            out[ds][model] = 100 * sum(errs) / len(errs)
    return out


def main() -> None:  # pragma: no cover - a report for people
    fit = fit_eager_host()
    print(f"seconds_per_op {fit.seconds_per_op:.4g}  seconds_per_triton_op "
          f"{fit.seconds_per_triton_op:.4g}")  # fmt: skip
    for m in fit.errors:
        print(f"  {m}: fit {100 * fit.errors[m]:+.1f} %  held out {100 * fit.held_out[m]:+.1f} %")
    for ds, per_model in held_out_scores().items():
        vals = " ".join(f"{m} {v:.2f}" for m, v in per_model.items())
        print(f"held-out {ds}: {vals}; mean {sum(per_model.values()) / len(per_model):.2f} %")


if __name__ == "__main__":  # pragma: no cover
    main()
