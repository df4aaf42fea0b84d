"""Why the undated H100 grids' TTFT at C ≤ 16 grows faster with the prompt than priced.

Usage::

    python benchmarks/ttft_isl_lockstep.py [--candidates]

Reads the shipped serving file only. For the undated (AIConfigurator-generated) aggregated
TensorRT-LLM 1.0.0rc3 and vLLM 0.12.0 rows on H100 (Qwen3-32B fp8, Llama-3.1-8B-Instruct bf16;
fixed lengths, priced by the replay ``serving.benchmark.fixed_length_run``):

1. per (model, engine, TP, C, ISL) at C ≤ 16, the product's own decomposition: the step budget
   the row is priced with (``validate.aic_deploy.generated_engine``), one prompt's static prefill
   ``p1`` (``StepModel.prefill_seconds(isl)``) and a decode step at C, the priced run's TTFT, the
   replay's start burst (first C requests) and steady state (after 4 waves), the measured TTFT
   (mean over the output lengths), measured and priced TTFT over p1, and measured / priced E2E
   (``TTFT + (osl − 1)·TPOT``);
2. the step budget each row's replay would need to meet its measured TTFT (a scan over
   2k…24k tokens, the rest as priced), as prompts per step, median by (model, engine, ISL, C):
   a diagnostic of how many requests the rows behave as if they were prefilled together;
3. with ``--candidates``: ``validate --measurements shipped`` TTFT / TPOT MAPE and bias under each
   candidate mechanism (diagnostic replays below; none is in the product).

Numbers only: nothing here is in the model (benchmarks/README_serving.md, r17isl).
"""

from __future__ import annotations

import random
import statistics
import sys
from collections import defaultdict
from dataclasses import replace

MODELS = ("Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B-Instruct")
BUDGETS = (2048, 2560, 3072, 3584, 4096, 5120, 5632, 6144, 7168, 8192, 10240, 12288, 14336,
           16384, 20480, 24576)  # fmt: skip


def grid_rows() -> list:
    """The undated aggregated TensorRT-LLM / vLLM H100 rows of ``MODELS`` with measurements."""
    from plena_opt.validate.serving_rows import read_rows
    from plena_opt.validate.serving_score import shipped_serving_csv

    return [r for r in read_rows(shipped_serving_csv())
            if r.get("backend") in ("trtllm", "vllm") and r.get("system") == "h100_sxm"
            and not r.get("measured_on") and r.get("mode") == "agg"
            and r.get("model_path") in MODELS
            and r.measured_ms("ttft_ms") and r.measured_ms("tpot_ms")]  # fmt: skip


def _priced(row, steps: dict):
    """(deployment, step model) of ``row`` as ``validate`` prices it."""
    from plena_opt.validate.aic_deploy import generated_batch
    from plena_opt.validate.serving_rows import resolve
    from plena_opt.validate.serving_score import cached_step

    d = replace(resolve(row), generated_batch=generated_batch(row))
    return d, cached_step(d, steps, {})


def _priced_rows(rows: list, cmax: int):  # noqa: ANN202
    """(row, deployment, step model, fixed-length workload) of each row at ≤ ``cmax`` clients."""
    from plena_opt.serving import ServingWorkload

    steps: dict = {}
    for row in rows:
        d, step = _priced(row, steps)
        if d.concurrency <= cmax:
            yield row, d, step, ServingWorkload(d.concurrency, d.input_len, d.output_len, 0.0)


def decomposition(rows: list, cmax: int = 16) -> None:
    """Part 1 (ms): the decomposition per group of the three output lengths."""
    from plena_opt.serving.benchmark import fixed_length_run
    from plena_opt.serving.replay import replay_closed_loop

    groups: dict[tuple, list] = defaultdict(list)
    for row, d, step, wl in _priced_rows(rows, cmax):
        run = fixed_length_run(step, wl)
        burst = replay_closed_loop(step, wl, measured=d.concurrency, warmup_waves=0)
        steady = replay_closed_loop(step, wl, measured=4 * d.concurrency, warmup_waves=4)
        m_ttft, m_tpot = row.measured_ms("ttft_ms"), row.measured_ms("tpot_ms")
        e2e = (m_ttft + (d.output_len - 1) * m_tpot) / (
            1e3 * (run.ttft_seconds + (d.output_len - 1) * run.tpot_seconds)
        )
        key = (row.get("model_path").split("/")[-1], d.engine, d.tp, d.concurrency, d.input_len)
        p1, dec = step.prefill_seconds(d.input_len), step.decode_seconds(d.concurrency)
        ms = [1e3 * x for x in (p1, dec, run.ttft_seconds, burst.ttft_seconds, steady.ttft_seconds)]
        groups[key].append((step.engine.budget_tokens, *ms, m_ttft, e2e))
    print("| model | engine | TP | C | ISL | budget | p1 | decode | run | burst | steady | "
          "measured | measured/p1 | run/p1 | E2E meas/priced |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
          "---: | ---: | ---: |")  # fmt: skip
    for key in sorted(groups):
        v = groups[key]
        mean = [statistics.fmean(x[i] for x in v) for i in range(8)]
        p1 = mean[1]
        print(f"| {' | '.join(map(str, key))} | {v[0][0]} | {p1:.0f} | {mean[2]:.1f} | "
              f"{mean[3]:.0f} | {mean[4]:.0f} | {mean[5]:.0f} | {mean[6]:.0f} | "
              f"{mean[6] / p1:.2f} | {mean[3] / p1:.2f} | {mean[7]:.2f} |")  # fmt: skip


def best_budget(rows: list, cmax: int = 32) -> None:
    """Part 2: the step budget whose replay meets each row's measured TTFT, as prompts per step
    (median by model, engine, ISL, C), beside the generator's budget."""
    from plena_opt.serving import StepModel
    from plena_opt.serving.benchmark import fixed_length_run

    groups: dict[tuple, list] = defaultdict(list)
    for row, d, step, wl in _priced_rows(rows, cmax):
        m_ttft = row.measured_ms("ttft_ms")
        best = None
        for b in BUDGETS:
            if b <= d.concurrency or b < d.input_len:
                continue
            s = StepModel(step.costs, replace(step.engine, budget_tokens=b), step.gpus,
                          step.attention_dp)  # fmt: skip
            err = abs(1e3 * fixed_length_run(s, wl).ttft_seconds - m_ttft) / m_ttft
            if best is None or err < best[0]:
                best = (err, b)
        key = (row.get("model_path").split("/")[-1], d.engine, d.input_len, d.concurrency)
        groups[key].append((best[1] / d.input_len, step.engine.budget_tokens / d.input_len,
                            100 * best[0]))  # fmt: skip
    print(
        "| model | engine | ISL | C | rows | prompts/step, best (median, range) | "
        "generator's | TTFT error at best (median %) |\n"
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"
    )
    for key in sorted(groups):
        v = groups[key]
        best = [x[0] for x in v]
        print(
            f"| {' | '.join(map(str, key))} | {len(v)} | {statistics.median(best):.2f} "
            f"({min(best):.2f}…{max(best):.2f}) | {v[0][1]:.2f} | "
            f"{statistics.median(x[2] for x in v):.1f} |"
        )


def return_path_replay(delay: float, jitter: float, whole: str = ""):
    """A diagnostic ``replay_closed_loop`` for fixed lengths whose clients' next requests reach
    the scheduler ``delay + U(0, jitter)`` s after their last token (the return path), seen at
    the start of the first step scheduled after that (an overlap engine schedules one step
    ahead); ``whole``: an engine name whose prompts are never chunked (a prompt waits for a step
    with room for all of it). Delay and jitter 0 give the product's replay exactly."""
    import plena_opt.serving.replay as rp
    from plena_opt.serving.engines import OVERLAP_ADMISSION_STEPS

    product = rp.replay_closed_loop

    def take_whole(prefilling: list, left: list, room: int) -> tuple[int, list]:
        tokens, firsts = 0, []
        for r in prefilling:
            if left[r] > room:
                break
            room, tokens = room - left[r], tokens + left[r]
            left[r] = 0
            firsts.append(r)
        return tokens, firsts

    def replay(step, wl, measured=None, seed=0, warmup_waves=rp.WARMUP_WAVES):
        if wl.range_ratio:
            return product(step, wl, measured, seed, warmup_waves)
        c, eng, draw, rng = wl.concurrency, step.engine, rp._Lengths(wl, seed), random.Random(1)
        take = take_whole if eng.name == whole else rp._take_prompts
        total = warmup_waves * c + (measured if measured is not None else max(4 * c, 64))
        cap = eng.max_running or total
        arrival, first, finish = [0.0] * c, [0.0] * c, [0.0] * c
        left, waiting, prefilling = [draw(i)[0] for i in range(c)], list(range(c)), []
        decoding, start, gaps = rp._Decoding(warmup_waves * c, total), {}, []
        t, prev, done, ended = 0.0, 0.0, 0, 0

        def finished(r: int, t: float) -> int:
            finish[r] = t
            i = len(arrival)
            left.append(draw(i)[0])
            waiting.append(i)
            arrival.append(t + delay + (rng.uniform(0, jitter) if jitter else 0.0))
            first.append(0.0)
            finish.append(0.0)
            return 1 if r < total else 0

        for _ in range(rp.MAX_REPLAY_STEPS):
            if done >= total:
                break
            if not prefilling and not decoding.count and ended and eng.overlap_schedule:
                # the step scheduled before the last finish still decodes those requests
                prev, ended = step.step_seconds(0, ended), 0
                t += prev
                continue
            if not prefilling and not decoding.count:  # idle: the engine waits for an arrival
                t = seen = max(t, min(arrival[r] for r in waiting))
            else:  # the step starting at t was scheduled at t − prev under overlap
                seen = t - (prev * OVERLAP_ADMISSION_STEPS if eng.overlap_schedule else 0.0)
            ready = (r for r in waiting if arrival[r] <= seen + 1e-9)  # 1 ns: float sums
            for r in sorted(ready, key=arrival.__getitem__):
                if len(prefilling) >= cap - decoding.count:
                    break
                prefilling.append(r)
                waiting.remove(r)
            n = 0 if prefilling and not eng.mixed_prefill else decoding.count
            tokens, firsts = take(prefilling, left, eng.budget_tokens - n)
            if not tokens and not n:
                t, prev = min(arrival[r] for r in waiting), 0.0
                continue
            prev = step.step_seconds(tokens, n)
            t += prev
            ended = 0
            if n:
                by_gap, ends = decoding.advance(t)
                gaps.extend(by_gap.items())
                done += sum(finished(r, t) for r in ends)
                ended = len(ends)
            for r in firsts:
                prefilling.remove(r)
                first[r] = start[r] = t
                if draw(r)[1] > 1:
                    decoding.join(r, draw(r)[1] - 1, t)
                else:
                    done += finished(r, t)
        ids = range(warmup_waves * c, total)
        return rp._metrics(arrival, first, finish, ids, [draw(i)[1] for i in ids], wl,
                           step.gpus, gaps, start)  # fmt: skip

    return replay


def candidates() -> None:
    """Part 3: ``validate --measurements shipped`` under each candidate (patched in turn)."""
    import plena_opt.serving.benchmark as bench
    import plena_opt.serving.replay as rp
    import plena_opt.validate.serving_score as score

    product_replay, product_gen, product_run = (rp.replay_closed_loop, score.generated_engine,
                                                bench.fixed_length_run)  # fmt: skip

    def vllm_default(eng, batch, isl):  # the vLLM 0.12.0 template writes no budget
        return eng if eng.name == "vllm" else product_gen(eng, batch, isl)

    def long_run(step, wl, prompts_per_client=50):  # the generator's aiperf template: 50·C
        return product_run(step, wl, prompts_per_client)

    runs = {"priced": {}, "step in flight (1 ms)": {"replay": return_path_replay(1e-3, 0)},
            "return 20 ms": {"replay": return_path_replay(20e-3, 0)},
            "return U(0, 20 ms)": {"replay": return_path_replay(0, 20e-3)},
            "TRT whole prompts": {"replay": return_path_replay(0, 0, "trtllm")},
            "TRT whole + in flight": {"replay": return_path_replay(1e-3, 0, "trtllm")},
            "vLLM default budget": {"gen": vllm_default},
            "50 prompts / client": {"run": long_run}}  # fmt: skip
    results = {}
    for name, patch in runs.items():
        rp.replay_closed_loop = patch.get("replay", product_replay)
        score.generated_engine = patch.get("gen", product_gen)
        bench.fixed_length_run = patch.get("run", product_run)
        try:
            report = score.score_serving(score.shipped_serving_csv())
        finally:
            rp.replay_closed_loop, score.generated_engine = product_replay, product_gen
            bench.fixed_length_run = product_run
        results[name] = [r for r in report.rows if r.status == "priced"]
    groups = {
        "all": lambda r: True,
        "h100_sxm": lambda r: r.system == "h100_sxm",
        "trtllm": lambda r: r.backend == "trtllm",
        "vllm": lambda r: r.backend == "vllm",
        "Qwen3-32B": lambda r: r.model == "Qwen/Qwen3-32B",
        "Llama-3.1-8B-Instruct": lambda r: r.model == "meta-llama/Llama-3.1-8B-Instruct",
    }
    for eng, isls in (("trtllm", (1024, 2048, 4096)), ("vllm", (1024, 4096))):
        for isl in isls:
            groups[f"Qwen3-32B {eng} {isl} C ≤ 16"] = lambda r, e=eng, i=isl: (
                r.model == "Qwen/Qwen3-32B"
                and r.backend == e
                and r.system == "h100_sxm"
                and r.isl == str(i)
                and int(r.concurrency) <= 16
            )
    print("| group | rows | " + " | ".join(results) + " |\n| --- | ---: |"
          + " ---: |" * len(results))  # fmt: skip
    for metric in ("ttft", "tpot"):
        for g, keep in groups.items():
            if metric == "tpot" and g not in ("all", "trtllm", "vllm"):
                continue
            cells = [_mape([r for r in rows if keep(r)], metric) for rows in results.values()]
            n = sum(1 for r in results["priced"] if keep(r))
            print(f"| {metric.upper()} {g} | {n} | " + " | ".join(cells) + " |")


def _mape(rows: list, metric: str) -> str:
    errs = [100 * (getattr(r, f"{metric}_ms") / getattr(r, f"measured_{metric}_ms") - 1)
            for r in rows]  # fmt: skip
    return f"{statistics.fmean(map(abs, errs)):.1f} / {statistics.fmean(errs):+.1f}"


def main() -> None:
    rows = grid_rows()
    print("## 1. Decomposition, Qwen3-32B, C ≤ 16 (ms)\n")
    decomposition([r for r in rows if r.get("model_path") == "Qwen/Qwen3-32B"])
    print("\n## 2. The step budget each row's replay needs, C ≤ 32\n")
    best_budget(rows)
    if "--candidates" in sys.argv:
        print("\n## 3. Candidates, validate --measurements shipped (MAPE / bias %)\n")
        candidates()


if __name__ == "__main__":
    main()
