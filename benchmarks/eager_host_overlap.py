"""Eager steps: host launches summed with the device kernels, or overlapped (r18hostov, issue 23).

The evaluator adds an eager layer's host launch time (``eager_host`` constants x launches,
``estimate.gpu_host``) to its kernels (``stage_of(..., fixed=host)``). Launches are asynchronous,
so physically a layer lasts ``max(host, kernels)``. This script prices that what-if by
monkeypatching (no product change):

* ``estimate.gpu.stage_of``: a layer stage (more than one kernel; the first extras stage has one,
  the embedding, and keeps its step overhead additive) lasts ``max(fixed, kernels)``;
* ``EvaluatorStepCosts.prefill_seconds`` below one prompt: ``max(host, n x one-prompt pass)``
  instead of ``host + n x kernels``;
* with ``--window``, ``serving.host_overlap.chunk_in_decode_window``: a chunk whose figure exceeds
  its host time is device bound (adds its whole figure); otherwise its kernels are unknown (≤ the
  host time) and it adds ``max(0, host − decode x hidden steps)``. Without it the function is kept.

Usage (from the repository root, PYTHONPATH as in the preamble): ``python
benchmarks/eager_host_overlap.py [--overlap] [--window] CMD``, CMD one of ``table``,
``validate OUT.json``, ``fig09``, ``disagg``, ``breakdown`` (the last two run
``disagg_recipe_counts`` / ``dsr1_prefill_breakdown`` under the chosen combination).
``table``: fig09's BS-1 eager decode step (every decode step forced eager: ``cuda_graph_max_tokens``
0) against the Eager_Mode=True rows ``calibrate_host`` fits on, with ``seconds_per_triton_op``
refitted the calibrate_host way (relative least squares, ``seconds_per_op`` fixed from the kernel
data) on the product's priced eager step under the chosen combination; and the BS-1 TTFT.
"""

from __future__ import annotations

import csv
import sys


def patch(window: bool) -> None:
    """Apply the overlapped combination (module docstring)."""
    import numpy as np

    from plena_opt.estimate import gpu, gpu_queue
    from plena_opt.estimate.gpu_stage import GpuStageArrays, stage_of

    def overlapped(kernels, steps, memory, fixed: float = 0.0):  # noqa: ANN001, ANN202
        if fixed <= 0.0 or len(kernels) < 2:
            return stage_of(kernels, steps, memory, fixed=fixed)
        st = stage_of(kernels, steps, memory)
        t_c = np.maximum(st._t_c, fixed - st._t_m)
        return GpuStageArrays(t_c, st._t_m, st._r, st._w, steps, memory)

    gpu.stage_of = overlapped
    orig = gpu_queue.EvaluatorStepCosts.prefill_seconds

    def prefill_seconds(self, tokens: int) -> float:  # noqa: ANN001
        n = tokens / self.workload.input_seq_len
        if n >= 1:
            return orig(self, tokens)
        return max(self.host_seconds, self._prefill_at(1) * n)

    gpu_queue.EvaluatorStepCosts.prefill_seconds = prefill_seconds
    if window:
        from plena_opt.serving import host_overlap, open_loop, steady, steps

        def in_window(prefill_s: float, host_s: float, decode_s: float, engine) -> float:  # noqa: ANN001
            s = host_overlap.hidden_steps(engine)
            if s == 0 or prefill_s > host_s:
                return prefill_s
            return max(0.0, host_s - decode_s * s)

        for mod in (host_overlap, open_loop, steady, steps):
            mod.chunk_in_decode_window = in_window


def table() -> None:
    from plena_opt.chip import load_chip
    from plena_opt.validate.calibrate_host import _counts, eager_step_seconds
    from plena_opt.validate.scorecard import (
        FIG09_FILES,
        data_dir,
        fig09_predict,
        fig09_prefill_predict,
    )

    base = load_chip("b200")
    eh = base.eager_host
    a, b0 = eh.seconds_per_op.value, eh.seconds_per_triton_op.value
    graph0 = eh.cuda_graph_max_tokens.model_copy(update={"value": 0})
    eager = base.model_copy(update={"eager_host": eh.model_copy(update={
        "cuda_graph_max_tokens": graph0})})  # fmt: skip
    measured = eager_step_seconds()
    print("model | host ms | graph step | eager step priced | measured eager | err % | "
          "TTFT BS1 priced | graph row | eager row")  # fmt: skip
    fit = {}
    for model, name in FIG09_FILES.items():
        o, k = _counts(model)
        host = o * a + k * b0
        step = 1.0 / fig09_predict(model, 1, eager)
        t = measured[model]
        fit[model] = (k, step - k * b0, t)  # priced step = k·b + rest (host bound: linear)
        ttft = 1024 / fig09_prefill_predict(model, [1])[1].user_prefill_speed
        with open(data_dir() / "fig09" / name, newline="") as fh:
            rows = {r["Eager_Mode"].strip(): 1024 / float(r["User Prefill Speed"])
                    for r in csv.DictReader(fh) if r["BS"] == "1"}  # fmt: skip
        print(
            f"{model} | {1e3 * host:.1f} | {1e3 / fig09_predict(model, 1):.1f} | "
            f"{1e3 * step:.1f} | {1e3 * t:.1f} | {100 * (step / t - 1):+.1f} | "
            f"{1e3 * ttft:.1f} | {1e3 * rows['False']:.1f} | {1e3 * rows['True']:.1f}"
        )

    def solve(rows: dict) -> float:  # b minimising Σ ((k·b + rest) / t − 1)²
        num = sum(k / t * (1 - r / t) for k, r, t in rows.values())
        return num / sum((k / t) ** 2 for k, _, t in rows.values())

    def err(b: float, m: str) -> float:
        k, r, t = fit[m]
        return 100 * ((k * b + r) / t - 1)

    b = solve(fit)
    ins = " / ".join(f"{err(b, m):+.1f}" for m in fit)
    held = " / ".join(
        f"{err(solve({x: v for x, v in fit.items() if x != m}), m):+.1f}" for m in fit
    )
    print(
        f"refit on the priced eager step: seconds_per_triton_op {1e6 * b:.1f} us "
        f"(shipped {1e6 * b0:.1f}); in-sample {ins} %; leave-one-model-out {held} %"
    )


def main(argv: list[str]) -> None:
    if "--overlap" in argv:
        patch("--window" in argv)
    args = [x for x in argv if not x.startswith("--")] or ["table"]
    if args[0] == "table":
        table()
    elif args[0] == "validate":
        from plena_opt.cli.main import main as cli

        with open(args[1], "w") as fh:
            stdout, sys.stdout = sys.stdout, fh
            try:
                cli(["validate", "--measurements", "shipped", "--json"])
            finally:
                sys.stdout = stdout
    elif args[0] == "fig09":
        from plena_opt.cli.main import main as cli

        cli(["validate"])
    elif args[0] in ("disagg", "breakdown"):
        sys.path.insert(0, "benchmarks")
        import disagg_recipe_counts
        import dsr1_prefill_breakdown

        (disagg_recipe_counts if args[0] == "disagg" else dsr1_prefill_breakdown).main([])
    else:
        raise SystemExit(f"unknown command {args[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
