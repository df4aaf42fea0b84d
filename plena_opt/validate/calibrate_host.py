"""The GPU chips' ``eager_host`` constants: the host time per op from the kernel data, the host
time per Triton call fitted on fig09's eager-mode decode rows.

``seconds_per_op`` comes from kernel-level data: the kernel table's ``vllm_eager`` custom
all-reduce rows time, with CUDA events and no synchronisation inside, a Python loop of
``tensor_model_parallel_all_reduce(x.clone())`` (AIConfigurator ``collector/collect_all_reduce.py``,
eager branch), and at messages of ≤ 64 KiB an iteration takes 20.8 µs on the B200 server
(21.1 µs H200, 23.8 µs H100; 8 GPUs), flat in message size and the same on GPUs whose kernel
takes 4.6 µs (H100) or 7.5 µs (B200) in the ``vllm_graph`` rows: the loop is host bound and the
iteration time is host time (``kernel_seconds_per_op``). Taking one iteration as the host time
of one eager op of a model forward is the assumption: the iteration is one vLLM custom op
through its Python wrapper plus a light ATen ``clone``, as a model op is an ATen / custom op
plus its module's Python.
fig09's CSVs carry, next to the CUDA-graph runs the scorecard compares with, the same runs with
``--enforce-eager`` (``Eager_Mode = True``; not scored). At batch 1 an eager decode step is host
bound: 1 / ``User Decode Speed`` is 19.9 ms (Llama-3.1-70B) … 113.5 ms (DeepSeek-V3) against
7–24 ms of kernels with graphs, so it measures the host time of one eager forward. With the
launches of that forward counted per layer kind (``estimate.gpu_host.model_ops``) and ``a`` =
``seconds_per_op`` fixed by the kernel data, ``seconds_per_triton_op`` ``b`` is the one-parameter
least-squares fit (relative error) of ``ops · a + triton · b`` = measured step over the four
models (the dense Llamas launch no Triton kernel, so their eager steps are predicted from kernel
data alone); leave-one-model-out refits ``b`` on three and predicts the fourth.
Run ``python -m plena_opt.validate.calibrate_host [../shared/data/kernels]``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIT_BATCH = 1  # the eager decode rows fitted on (host bound, kernels smallest)
HOST_BOUND_MAX_BYTES = 65536  # eager custom all-reduce rows whose graph kernel is ≤ 9 µs
HOST_SYSTEM = {"b200": "b200_sxm", "b300": "b200_sxm", "h100-sxm": "h100_sxm",
               "h200-sxm": "h200_sxm", "mi300x": "b200_sxm", "mi325x": "b200_sxm"}  # fmt: skip


@dataclass(frozen=True)
class HostFit:
    seconds_per_op: float
    seconds_per_triton_op: float
    errors: dict[str, float]  # model → fitted / measured − 1 (in-sample)
    held_out: dict[str, float]  # model → error when fitted on the other models


def kernel_seconds_per_op(kernels: Path, system: str = "b200_sxm", gpus: int = 8) -> float:
    """Host dispatch seconds of one eager vLLM op on ``system``'s server: the median per-call
    time of the ``vllm_eager`` custom all-reduce rows of ≤ ``HOST_BOUND_MAX_BYTES`` bytes on
    ``gpus`` GPUs (``<system>_custom_allreduce_vllm-0.19.0.csv.gz``, latency in ms). Raises
    ``ValueError`` if those rows are not host bound (eager < 2x the graph kernel)."""
    from plena_opt.validate.calibrate import read_rows

    rows = read_rows(Path(kernels) / f"{system}_custom_allreduce_vllm-0.19.0.csv.gz")
    by: dict[str, list[float]] = {"vllm_eager": [], "vllm_graph": []}
    for r in rows:
        small = int(r["message_size"]) * 2 <= HOST_BOUND_MAX_BYTES  # bf16 elements
        if r["num_gpus"] == str(gpus) and small and r["backend"] in by:
            by[r["backend"]].append(float(r["latency"]) * 1e-3)
    eager, graph = float(np.median(by["vllm_eager"])), float(np.median(by["vllm_graph"]))
    if not eager > 2 * graph:
        raise ValueError(f"{system}: eager calls {eager:.3g} s are not host bound ({graph:.3g})")
    return eager


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


def _solve(rows: dict[str, tuple[int, int, float]], a: float) -> float:
    """``b`` minimising Σ ((o·a + k·b) / t − 1)² (closed form)."""
    num = sum(k / t * (1.0 - o * a / t) for o, k, t in rows.values())
    den = sum((k / t) ** 2 for _, k, t in rows.values())
    return num / den


def fit_eager_host(
    seconds_per_op: float, folder: Path | None = None, leave_out: str | None = None
) -> HostFit:
    """``seconds_per_triton_op`` fitted with ``seconds_per_op`` given (the kernel-data value),
    without ``leave_out``'s row when given, and the leave-one-model-out errors."""
    steps = eager_step_seconds(folder)
    rows = {m: (*_counts(m), t) for m, t in steps.items()}
    a = seconds_per_op

    def err(b: float, m: str) -> float:
        o, k, t = rows[m]
        return (o * a + k * b) / t - 1.0

    b = _solve({k: v for k, v in rows.items() if k != leave_out}, a)
    held = {m: err(_solve({k: v for k, v in rows.items() if k != m}, a), m) for m in rows}
    return HostFit(a, b, {m: err(b, m) for m in rows}, held)


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
        # seconds_per_op comes from kernel data (no model in it): only the Triton one is refitted
        fit = fit_eager_host(base.eager_host.seconds_per_op.value, leave_out=model)
        eh = base.eager_host.model_copy(update={
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


def main(kernels: str = "../shared/data/kernels") -> None:  # pragma: no cover - for people
    for chip, system in HOST_SYSTEM.items():
        print(f"{chip}: seconds_per_op {kernel_seconds_per_op(Path(kernels), system):.4g}")
    fit = fit_eager_host(kernel_seconds_per_op(Path(kernels)))
    print(f"seconds_per_op {fit.seconds_per_op:.4g}  seconds_per_triton_op "
          f"{fit.seconds_per_triton_op:.4g}")  # fmt: skip
    for m in fit.errors:
        print(f"  {m}: fit {100 * fit.errors[m]:+.1f} %  held out {100 * fit.held_out[m]:+.1f} %")
    for ds, per_model in held_out_scores().items():
        vals = " ".join(f"{m} {v:.2f}" for m, v in per_model.items())
        print(f"held-out {ds}: {vals}; mean {sum(per_model.values()) / len(per_model):.2f} %")


if __name__ == "__main__":  # pragma: no cover
    import sys

    main(*sys.argv[1:])
