"""Is one request always queued on the Llama-3.1-8B TensorRT-LLM grid? Measured, then priced.

Usage::

    python benchmarks/ttft_queued_request.py

Reads the shipped serving file only (no ``validate`` output needed). For the undated
(AIConfigurator-generated) TensorRT-LLM 1.0.0rc3 grids on H100 (Llama-3.1-8B-Instruct and
Qwen3-32B: same generator, engine version, lengths and concurrencies):

1. per (model, TP, ISL, C), the least-squares fit over the three output lengths of
   ``measured TTFT = a + q · E2E / C`` (``E2E = TTFT + (osl − 1) · TPOT``, measured): a closed loop
   of C clients in which ``q`` requests always wait for a running one to finish waits
   ``q / X = q · E2E / C`` per request (Little's law), so ``q`` is the queue depth the rows imply;
2. TTFT / TPOT MAPE and bias (%) by concurrency band, priced through the product's fixed-length
   replay (``serving.benchmark.fixed_length_run``) as deployed, with the engine running at most
   ``C − 1`` requests, and with ``C + 1`` clients against ``C`` running;
3. the requests the default TensorRT-LLM KV pool holds with whole sequences reserved
   (``serving.kv_admission.kv_cap``, ``GUARANTEED_NO_EVICT``, ``free_gpu_memory_fraction`` 0.9)
   against C, per (model, TP).

Numbers only: nothing here is in the model (benchmarks/README_serving.md, r13l8b).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import replace

import numpy as np

MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B")
BANDS = ((1, 8), (9, 32), (33, 64), (65, 1 << 20))


def grid_rows() -> list:
    """The undated TensorRT-LLM H100 rows of ``MODELS`` with both measurements."""
    from plena_opt.validate.serving_rows import read_rows
    from plena_opt.validate.serving_score import shipped_serving_csv

    return [r for r in read_rows(shipped_serving_csv())
            if r.get("backend") == "trtllm" and r.get("system") == "h100_sxm"
            and not r.get("measured_on") and r.get("model_path") in MODELS
            and r.measured_ms("ttft_ms") and r.measured_ms("tpot_ms")]  # fmt: skip


def queue_depths(rows: list) -> None:
    """Part 1: ``q`` per group, its median and range per (model, C)."""
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        c, osl = int(r.get("concurrency")), int(r.get("osl"))
        ttft, tpot = r.measured_ms("ttft_ms"), r.measured_ms("tpot_ms")
        key = (r.get("model_path"), int(r.get("tp_size")), int(r.get("isl")), c)
        groups[key].append(((ttft + (osl - 1) * tpot) / c, ttft))
    by_c: dict[tuple, list] = defaultdict(list)
    for (model, _, _, c), pts in groups.items():
        if len(pts) == 3:
            by_c[(model, c)].append(np.polyfit(*zip(*pts, strict=True), 1)[0])
    print("| model | C | groups | q median | q range |\n| --- | ---: | ---: | ---: | --- |")
    for (model, c), qs in sorted(by_c.items()):
        print(f"| {model.split('/')[-1]} | {c} | {len(qs)} | {statistics.median(qs):+.2f} "
              f"| {min(qs):+.1f} … {max(qs):+.1f} |")  # fmt: skip


def priced(rows: list) -> None:
    """Part 2: the grid through the fixed-length replay, three ways."""
    from plena_opt.serving import ServingWorkload, StepModel
    from plena_opt.serving.benchmark import fixed_length_run
    from plena_opt.validate.aic_deploy import generated_batch
    from plena_opt.validate.serving_rows import resolve
    from plena_opt.validate.serving_score import step_model

    errs: dict[tuple, list] = defaultdict(list)
    for r in rows:
        d = replace(resolve(r), generated_batch=generated_batch(r))
        step, c = step_model(d), d.concurrency
        band = next(f"{lo}–{hi}" if hi < 1 << 20 else f">{lo - 1}" for lo, hi in BANDS
                    if lo <= c <= hi)  # fmt: skip
        for how, running, clients in (("as deployed", None, c), ("C − 1 running", c - 1, c),
                                      ("C + 1 clients", c, c + 1)):  # fmt: skip
            s = StepModel(step.costs, replace(step.engine, max_running=running), step.gpus,
                          step.attention_dp)  # fmt: skip
            m = fixed_length_run(s, ServingWorkload(clients, d.input_len, d.output_len, 0.0))
            e = (1e3 * m.ttft_seconds / r.measured_ms("ttft_ms") - 1,
                 1e3 * m.tpot_seconds / r.measured_ms("tpot_ms") - 1)  # fmt: skip
            for b in (band, "all"):
                errs[(r.get("model_path").split("/")[-1], b, how)].append(e)
    print("\n| model | C | how | rows | TTFT MAPE / bias | TPOT MAPE / bias |")
    print("| --- | --- | --- | ---: | --- | --- |")
    for (model, band, how), es in sorted(errs.items()):
        cells = []
        for i in (0, 1):
            v = [e[i] for e in es]
            cells.append(f"{100 * statistics.mean(map(abs, v)):.1f} / "
                         f"{100 * statistics.mean(v):+.1f}")  # fmt: skip
        print(f"| {model} | {band} | {how} | {len(es)} | {cells[0]} | {cells[1]} |")


def kv_caps(rows: list) -> None:
    """Part 3: requests the default whole-sequence KV pool holds, over C (smallest per TP)."""
    from plena_opt.estimate import Plan
    from plena_opt.serving.kv_admission import kv_cap
    from plena_opt.validate.aic_deploy import generated_batch
    from plena_opt.validate.serving_rows import resolve
    from plena_opt.validate.serving_score import _parts

    low: dict[tuple, tuple] = {}
    for r in rows:
        d = replace(resolve(r), generated_batch=generated_batch(r))
        model, noc, memory, chip, wl, eng = _parts(d, 0.0)
        plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
        cap = kv_cap(model, noc, memory, chip, wl, plan, "trtllm", eng.budget_tokens)
        key = (r.get("model_path").split("/")[-1], d.tp)
        c = d.concurrency
        here = (cap.requests / c, cap.requests, c, d.input_len, d.output_len)
        low[key] = min(low.get(key, here), here)
    print("\n| model | TP | smallest KV cap / C | at (cap, C, isl, osl) |")
    print("| --- | ---: | ---: | --- |")
    for (model, tp), v in sorted(low.items()):
        print(f"| {model} | {tp} | {v[0]:.2f} | {v[1]}, {v[2]}, {v[3]}, {v[4]} |")


def main() -> int:
    rows = grid_rows()
    queue_depths(rows)
    priced(rows)
    kv_caps(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
