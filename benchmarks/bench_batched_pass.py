"""What pricing two decode batches in one vectorised evaluator pass could save (issue 26, r15vec).

Run: ``.venv/bin/python benchmarks/bench_batched_pass.py [--samples N]`` (figures in
benchmarks/README_serving.md, "r15vec"). For the 1k/1k rows at C = 64 (``bench_load_cost``'s
cases: Llama-3.1-70B TP 8 and Qwen3-235B-A22B attention DP 8 × EP 8 on 8×H100, fp8, vLLM), in
CPU microseconds (least of ``--samples``):

* the cold static evaluation at C, and a derived decode batch of a step model (the closed loop's
  C/2 and C): its context, its plan base, the decode pass (by component: the layer's kernels and
  their stage sums, the collectives, the extras, the rest) and ``tps_per_sequence``;
* ``GpuPerfModel.attention_decode`` (the pass's one kernel on the 1,024-point decode grid) at C/2
  and at C, called twice, against one call vectorised over both batch sizes (the batch a column,
  the grid a row; checked bit for bit against the two calls), as written and with its scalar
  parts given (the best case);
* numpy element-wise operations on the grid (one row, two rows) and on two values against the
  Python float arithmetic they would replace.

Nothing here changes a figure: it measures, and asserts the vectorised kernel's floats.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

C, ISL, OSL = 64, 1024, 1024
CASES = (("dense", "llama-3.1-70b", {"tp": 8}), ("moe", "qwen3-235b-a22b", {"ep": 8}))


def _least(fn, setup=lambda: None, samples: int = 200) -> float:
    """Least CPU µs of ``fn(setup())`` over ``samples`` calls (setup not timed)."""
    best = float("inf")
    for _ in range(samples):
        arg = setup()
        c = time.process_time_ns()
        fn(arg)
        best = min(best, time.process_time_ns() - c)
    return best / 1e3


def _attention_batched(perf, bs: list[int], H: int, KV: int, hd: int, kv: np.ndarray):
    """``attention_decode`` at each batch of ``bs`` in one call: (seconds, flops, reads,
    writes, compute-bound) rows. The per-batch scalar chains stay Python floats (as in the
    scalar code) and meet the grid in one outer product; ``ts ** p`` stays a Python float; the
    FLOPs' mean is per row (the same pairwise reduction as the 1-d ``sum``). A first version
    with the batch as a (2, 1) column and the chains in numpy cost ~5 µs more."""
    c = perf.chip.attention_decode
    kv_read = np.multiply.outer([2.0 * b * KV * hd * perf.kvb for b in bs], kv)
    io = np.array([2.0 * b * H * hd * perf.ab for b in bs])[:, None]
    tm = (kv_read + io) / (perf.bw * c.bandwidth_efficiency.value)
    sh, skv = c.seconds_per_sequence_head.value, c.seconds_per_sequence_kv_head.value
    ts = [(sh * H + skv * KV) * b for b in bs]
    p = c.blend.value
    tsp = np.array([t**p for t in ts])[:, None]
    t = c.fixed_seconds.value + (tsp + tm**p) ** (1.0 / p)
    flops = [float(r.sum() / r.size) for r in np.multiply.outer([4.0 * b * H * hd for b in bs], kv)]
    return t, flops, kv_read + io / 2, io / 2, np.array(ts)[:, None] >= tm


def _case(env, name: str, fields: dict, samples: int) -> None:
    from plena_opt.chip.gpu import perf as perf_mod
    from plena_opt.estimate import Evaluator, Plan, Workload, plan_passes
    from plena_opt.estimate import gpu as gpu_mod
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.models import load_model
    from plena_opt.serving import ServingWorkload, StepModel, closed_loop

    chip, noc, mem, eng = env
    model, plan = load_model(name), Plan(**fields)
    static_wl = Workload(batch_size=C, input_seq_len=ISL, output_seq_len=OSL, precision="fp8")
    step_wl = Workload(batch_size=1, input_seq_len=ISL, output_seq_len=OSL, precision="fp8")

    def costs():  # a fresh step model whose first context (one prompt) is priced
        s = StepModel.from_problem(model, noc, mem, chip, step_wl, plan, eng, range_ratio=0.8)
        s.costs.prefill_seconds(ISL)
        return s.costs

    def ctx_at(b: int):
        return costs()._evaluator(b, None).ctx

    static = _least(lambda _: Evaluator(model, noc, mem, static_wl, chip).evaluate(plan),
                    samples=samples)  # fmt: skip
    print(f"{name} {fields}: static cold evaluation {static:.0f} µs (alone)")
    closed = ServingWorkload(C, ISL, OSL, 0.8)

    def fresh():
        return StepModel.from_problem(model, noc, mem, chip, step_wl, plan, eng, range_ratio=0.8)

    # a cold closed loop in the order it prices (step model, first context and one prompt,
    # two prompts, decode C/2, decode C, the fixed point and its first-time step figures),
    # taking turns with a whole cold loop and the static evaluation: each the least over the
    # samples (the pieces' least add up to the loop's; measured apart, each piece repeated
    # back to back reads up to ~20 % lower)
    clock = time.process_time_ns
    best: dict[str, float] = {}
    for _ in range(samples):
        t = [clock()]
        s = fresh()
        s.costs.prefill_seconds(ISL)
        t.append(clock())
        s.costs.prefill_seconds(2 * ISL)
        t.append(clock())
        s.costs._mean_step(C // 2)
        t.append(clock())
        s.costs._mean_step(C)
        t.append(clock())
        closed_loop(s, closed)
        t.append(clock())
        closed_loop(fresh(), closed)
        t.append(clock())
        Evaluator(model, noc, mem, static_wl, chip).evaluate(plan)
        t.append(clock())
        for i, k in enumerate(("first", "pre2", "dec_lo", "dec_hi", "fixed", "loop", "static")):
            best[k] = min(best.get(k, float("inf")), (t[i + 1] - t[i]) / 1e3)
    st, pieces = best["static"], ("first", "pre2", "dec_lo", "dec_hi", "fixed")
    print(
        f"  in turn: static {st:.0f}, closed loop cold {best['loop']:.0f} "
        f"({best['loop'] / st:.2f}×) = step model + first context + 1-prompt prefill "
        f"{best['first']:.0f} + 2-prompt prefill {best['pre2']:.0f} + decode {C // 2} "
        f"{best['dec_lo']:.0f} + decode {C} {best['dec_hi']:.0f} + fixed point and first-time "
        f"figures {best['fixed']:.0f} (sum {sum(best[k] for k in pieces):.0f}); of static: "
        + ", ".join(f"{best[k] / st:.2f}" for k in pieces)
    )
    for b in (C // 2, C):  # each piece alone, on a step model with only its first context
        step = _least(lambda c, b=b: c._mean_step(b), costs, samples)
        derive = _least(lambda c, b=b: c._evaluator(b, None), costs, samples)
        base = _least(lambda x: PlanCost(x, plan), lambda b=b: ctx_at(b), samples)
        dec = _least(lambda pc: pc.decode, lambda b=b: PlanCost(ctx_at(b), plan), samples)
        tps = _least(lambda pc: pc.tps_per_sequence,
                     lambda b=b: (lambda pc: (pc.decode, pc)[1])(PlanCost(ctx_at(b), plan)),
                     samples)  # fmt: skip
        print(
            f"  decode batch {b}: whole {step:.0f} ({step / static:.2f} of static) = context "
            f"{derive:.0f} + plan base {base:.0f} + pass {dec:.0f} + tps {tps:.0f} µs"
        )
    # the pass by component (wall time summed per pass, least over the samples: a CPU-time
    # clock read costs ~0.5 µs, a wall-clock read ~0.05)
    acc: dict[str, int] = {}
    wrapped = []

    def wrap(owner, attr: str, label: str) -> None:
        f = getattr(owner, attr)
        wrapped.append((owner, attr, f))

        def w(*a, **k):
            c = time.perf_counter_ns()
            try:
                return f(*a, **k)
            finally:
                acc[label] = acc.get(label, 0) + time.perf_counter_ns() - c

        setattr(owner, attr, w)

    wrap(gpu_mod.GpuPricing, "layer", "layer")
    wrap(perf_mod.GpuPerfModel, "attention_decode", "attention_decode")
    wrap(gpu_mod, "stage_of", "stage_of")
    wrap(plan_passes, "layer_collectives", "collectives")
    wrap(gpu_mod.GpuPricing, "extras", "extras")
    best = {}
    try:
        for _ in range(samples):
            pc = PlanCost(ctx_at(C), plan)
            acc.clear()
            c = time.perf_counter_ns()
            _ = pc.decode
            acc["pass"] = time.perf_counter_ns() - c
            for k, v in acc.items():
                best[k] = min(best.get(k, float("inf")), v / 1e3)
    finally:
        for owner, attr, f in reversed(wrapped):
            setattr(owner, attr, f)
    print("  decode pass at C by component (µs, least; stage_of also inside extras): "
          + ", ".join(f"{k} {v:.0f}" for k, v in best.items()))  # fmt: skip
    # attention_decode: two calls against one vectorised call
    seen = []
    orig = perf_mod.GpuPerfModel.attention_decode

    def grab(self, *a, **k):
        seen.append((self, a, k))
        return orig(self, *a, **k)

    perf_mod.GpuPerfModel.attention_decode = grab
    try:
        for b in (C // 2, C):
            _ = PlanCost(ctx_at(b), plan).decode
    finally:
        perf_mod.GpuPerfModel.attention_decode = orig
    (perf, lo, _), (_, hi, _) = seen[0], seen[-1]
    assert lo[1:] == hi[1:] and lo[0] < hi[0]  # same heads, same grid: only the batch differs
    rows = _attention_batched(perf, [lo[0], hi[0]], *lo[1:])
    for i, a in enumerate((lo, hi)):
        k = orig(perf, *a)
        assert k.seconds.tobytes() == rows[0][i].tobytes() and k.flops == rows[1][i]
        assert np.asarray(k.read_bytes).tobytes() == rows[2][i].tobytes()
        assert float(k.write_bytes) == float(rows[3][i][0])
        assert np.array_equal(k.compute_bound, rows[4][i])
    two = _least(lambda _: (orig(perf, *lo), orig(perf, *hi)), samples=20 * samples)
    one = _least(lambda _: _attention_batched(perf, [lo[0], hi[0]], *lo[1:]), samples=20 * samples)
    print(
        f"  attention_decode (b_dev {lo[0]} and {hi[0]}, grid {lo[4].size}): two calls "
        f"{two:.1f} µs, one vectorised call {one:.1f} µs (bit-identical)"
    )


def _numpy(samples: int) -> None:
    """Element-wise operations, µs per operation (least of ``samples`` loops of 1,000)."""
    import timeit

    g = {
        "x": np.random.rand(1024),
        "y": np.random.rand(1024),
        "x2": np.random.rand(2, 1024),
        "y2": np.random.rand(2, 1024),
        "a": np.random.rand(2),
        "b": np.random.rand(2),
        "u": 1.5,
        "v": 2.5,
    }
    ops = {
        "mul 1,024": "x * y",
        "mul 2×1,024": "x2 * y2",
        "pow 1,024": "x ** 2.3",
        "pow 2×1,024": "x2 ** 2.3",
        "mul 2 values (numpy)": "a * b",
        "mul 2 floats (Python, both)": "u * v; v * u",
    }
    f = {k: min(timeit.repeat(e, globals=g, number=1000, repeat=samples)) * 1e3
         for k, e in ops.items()}  # fmt: skip
    print("numpy (µs per operation, least): " + ", ".join(f"{k} {t:.2f}" for k, t in f.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200, help="calls per figure (least)")
    args = ap.parse_args()
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.serving import engine_model

    chip, noc = load_chip("h100-sxm"), load_noc_profile("hgx-h100x8")
    env = (chip, noc, gpu_memory(chip), engine_model("vllm", float(chip.hbm.capacity_bytes.value)))
    for _, name, fields in CASES:
        _case(env, name, fields, args.samples)
    _numpy(max(5, args.samples // 20))


if __name__ == "__main__":
    main()
