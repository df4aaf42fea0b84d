"""Where a DeepSeek-R1 prefill step of many prompts goes, by kernel group (issue 23, r18pfcap).

Run ``python benchmarks/dsr1_prefill_breakdown.py [--rows SUBSTR ...]``. For the saturated
disaggregated InferenceX rows r17pfbatch names (B200 TensorRT-LLM FP8 1k1k ``1P(dep8)+5D``
c1920, ``2P(dep8)+5D`` c5152, 8k1k ``1P(dep8)+1D`` c256; more with ``--rows``) it matches the
row to its InferenceX recipe (``disagg_recipe_counts``: relaxed match, attention DP where the
recipe sets ``dp-attn``), builds the prefill worker's step model as ``validate`` would
(``serving_pools.moe_pool_steps``) and prices one static prefill pass of ``n`` prompts for
``n`` = 1, the DP ranks and the step's batch ``B`` (``serving.prefill_batch``), with taps on
the GPU pricer: ms by group (MLA attention core, MLA / dense GEMMs and small kernels, router +
top-k, fused-MoE grouped GEMMs, shared experts, EP dispatch + combine, other collectives, the
eager host time, LM head / embedding) and the whole pass (``EvaluatorStepCosts``' figure), and
the per-device token count and the MoE load the fused-MoE kernel was priced at. Numbers only.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from plena_opt.chip.gpu import perf as P
from plena_opt.estimate import gpu as G
from plena_opt.estimate import gpu_layers as L

GROUPS = ("attn core", "attn GEMMs+elt", "norms", "router+topk", "fused MoE", "shared/dense FFN",
          "EP a2a", "other comm", "host", "extras")  # fmt: skip
MOE_SHAPE = ("7168", "2048", "8", "256")  # DeepSeek-V3/R1: hidden, expert inter, top-k, experts
KERNELS = Path("/work/shared/data/kernels")
# (system, row precision) → the kernel table's MoE rows of that weight format
MOE_TABLES = {("b200_sxm", "fp8"): ("vllm_fused_moe", "fp8_block"),
              ("b200_sxm", "fp4"): ("vllm_flashinfer_trtllm_moe_fp4", "nvfp4")}  # fmt: skip
DEFAULT_ROWS = (
    "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_disagg_1024x1024_c1920_",
    "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_disagg_1024x1024_c5152_",
    "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_disagg_8192x1024_c256_tp8_0_ep1_",
    "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_disagg_1024x1024_c4096_",
    "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_disagg_8192x1024_c837_",
    "2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_1024x1024_c4916_",
)


def _ms(ks) -> float:
    return 1e3 * float(sum(np.mean(np.asarray(k.seconds)) for k in ks))


def pass_groups(step, n: int) -> tuple[dict[str, float], float, dict]:
    """(ms by group, whole prefill pass ms, what the MoE kernel saw) of ``n`` prompts on the
    prefill worker ``step`` (a ``StepModel``); a fresh evaluator so that every layer is priced."""
    from plena_opt.estimate.gpu_queue import _names

    costs = step.costs
    model, net, memory, chip = costs._args
    est = _names()
    wl = costs.workload.with_lengths(n, 1)
    got: dict[str, float] = defaultdict(float)
    seen: dict = {}
    cur = {"kind": None}
    mla, layer, moe, ffn, norms = L.mla_attention, G.GpuPricing.layer, G.GpuPricing._moe, \
        L.dense_ffn, L.norms  # fmt: skip
    attn, host = P.GpuPerfModel.attention_prefill, G.gpu_host.ops_seconds
    rec: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def t_attn(self, *a):
        k = attn(self, *a)
        rec[cur["kind"]]["attn core"] += _ms([k])
        return k

    def t_mla(*a, **kw):
        ks = mla(*a, **kw)
        rec[cur["kind"]]["attn GEMMs+elt"] += _ms(ks)
        return ks

    def t_norms(*a):
        ks = norms(*a)
        rec[cur["kind"]]["norms"] += _ms(ks)
        return ks

    def t_ffn(*a):
        ks = ffn(*a)
        rec[cur["kind"]]["shared/dense FFN"] += _ms(ks)
        return ks

    def t_moe(self, s, T, load):
        ks = moe(self, s, T, load)
        rec[cur["kind"]]["router+topk"] += _ms(ks[:2])
        rec[cur["kind"]]["fused MoE"] += _ms(ks[2:])
        seen.update(T=T, tokens_local=load.tokens_local, pairs=load.pairs,
                    imbalance=load.imbalance)  # fmt: skip
        return ks

    def t_layer(self, s, kind, mode, *a, **kw):
        cur["kind"] = (kind, mode)
        try:
            return layer(self, s, kind, mode, *a, **kw)
        finally:
            cur["kind"] = None

    def t_host(eh, ops):
        t = host(eh, ops)
        if cur["kind"] is not None:
            rec[cur["kind"]]["host"] += 1e3 * t
        return t

    L.mla_attention, G.GpuPricing.layer, G.GpuPricing._moe = t_mla, t_layer, t_moe
    L.dense_ffn, L.norms, P.GpuPerfModel.attention_prefill = t_ffn, t_norms, t_attn
    G.gpu_host.ops_seconds = t_host
    try:
        ev = est.Evaluator(model, net, memory, wl, chip)
        cost = est.PlanCost(ev.ctx, costs.plan)
        pre = cost.prefill
        total = 1e3 * pre.latency_at(0)
    finally:
        L.mla_attention, G.GpuPricing.layer, G.GpuPricing._moe = mla, layer, moe
        L.dense_ffn, L.norms, P.GpuPerfModel.attention_prefill = ffn, norms, attn
        G.gpu_host.ops_seconds = host
    counts: dict = defaultdict(int)
    for c in pre.counts:
        for kind, k in c.items():
            counts[kind] += k
    for kind, k in counts.items():
        r = rec[(kind, "prefill")]
        r["attn GEMMs+elt"] -= r["attn core"]
        for g, v in r.items():
            got[g] += k * v
        for name, c in pre.comm[kind].items():
            got["EP a2a" if name.startswith("ep_") else "other comm"] += k * 1e3 * c.seconds
    got["extras"] = total - sum(got.values())
    seen["layers"] = {("moe" if k.moe else "dense"): v for k, v in counts.items()}
    return dict(got), total, seen


def moe_vs_table(step, routing: str, table: Path, source: str, dtype: str) -> list[str]:
    """The priced fused-MoE layer (ms, the busiest EP rank) against the kernel table's row at the
    same EP group tokens (``num_tokens``: every DP rank's tokens), DeepSeek's layer shape,
    ``moe_tp_size`` 1, ``moe_ep_size`` = the plan's EP ranks, ``routing`` balanced or power_law
    (the table's ``power_law_1.01``), for 1k–16k tokens (the table's prefill range)."""
    from dataclasses import replace

    from plena_opt.estimate.gpu_queue import _names
    from plena_opt.validate.calibrate import read_rows

    costs, est = step.costs, _names()
    model, net, memory, chip = costs._args
    ep = costs.plan.ep
    dist = "balanced" if routing == "balanced" else "power_law_1.01"
    rows = {int(r["num_tokens"]): float(r["latency"]) for r in read_rows(table)
            if (r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"]) == MOE_SHAPE
            and (r["kernel_source"], r["moe_dtype"], r["distribution"]) == (source, dtype, dist)
            and (r["moe_tp_size"], r["moe_ep_size"]) == ("1", str(ep))}  # fmt: skip
    out, moe, seen = [], G.GpuPricing._moe, {}

    def tap(self, s, T, load):
        ks = moe(self, s, T, load)
        seen["t"] = 1e3 * float(np.mean(np.asarray(ks[-1].seconds)))
        return ks

    G.GpuPricing._moe = tap
    try:
        for tokens in (1024, 2048, 4096, 8192, 16384):
            wl = replace(costs.workload, routing=routing, input_seq_len=tokens // ep)
            ev = est.Evaluator(model, net, memory, wl.with_lengths(ep, 1), chip)
            est.PlanCost(ev.ctx, costs.plan).prefill.latency_at(0)
            t, ref = seen["t"], rows[tokens]
            out.append(f"{tokens}: {t:.2f} / {ref:.2f} ({t / ref:.2f})")
    finally:
        G.GpuPricing._moe = moe
    return out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, "benchmarks")
    from disagg_recipe_counts import DEFAULT_CSV, DEFAULT_REPO, Recipes, match_row, priced_row

    from plena_opt.serving.prefill_batch import PrefillBatches
    from plena_opt.validate.serving_pools import moe_pool_steps
    from plena_opt.validate.serving_rows import read_rows, resolve
    from plena_opt.validate.serving_score import _parts

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="*", default=list(DEFAULT_ROWS))
    ap.add_argument("--kernels", type=Path, default=KERNELS)
    args = ap.parse_args(argv)
    recipes = Recipes(DEFAULT_REPO)
    rows = [r for r in read_rows(DEFAULT_CSV) if r.get("mode") == "disagg"
            and not r.get("prefill_num_workers")]  # fmt: skip
    print("| row | n | tokens/dev | " + " | ".join(GROUPS) + " | pass ms | MoE T / pairs |")
    print("|---" * (len(GROUPS) + 5) + "|")
    what_ifs = []
    for sub in args.rows:
        row = next(r for r in rows if sub in r.id)
        m = match_row(row, recipes, relaxed=True)
        if m.status != "matched":
            print(f"| {sub} | {m.status}: not priced |")
            continue
        pr = priced_row(row, m.entries[0], True)
        d = resolve(pr)
        step = moe_pool_steps(d, _parts(d, 0.0))[0]
        batches = PrefillBatches(step, step.costs.workload.input_seq_len)
        full: tuple = ()
        for n in sorted({1, batches.ranks, batches.size}):
            parts, total, seen = pass_groups(step, n)
            cells = " | ".join(f"{parts.get(g, 0.0):.1f}" for g in GROUPS)
            print(f"| {sub[11:-1]} | {n} | {seen.get('T')} | {cells} | {total:.1f} | "
                  f"{seen.get('tokens_local')}/{seen.get('pairs'):.0f} |")  # fmt: skip
            full = (n, parts, total)
        what_ifs.append((sub, d, pr, full))
    print("\n| row | P x B | S(B) ms | capacity req/s | measured req/s | host hidden | "
          "MoE factor for the measured rate |")  # fmt: skip
    print("|---" * 7 + "|")
    for sub, d, pr, (n, parts, total) in what_ifs:
        workers = d.pools[0]
        ttft, tpot = float(pr.get("ttft_ms") or 0), float(pr.get("tpot_ms") or 0)
        e2e = 1e-3 * (ttft + (0.9 * d.output_len - 1) * tpot)
        rate = d.concurrency / e2e if e2e > 0 else float("nan")
        need = workers * n / rate * 1e3  # S(B) ms that serves the measured rate
        moe = parts["fused MoE"]
        print(f"| {sub[11:-1]} | {workers} x {n} | {total:.0f} | {workers * n / total * 1e3:.1f} | "
              f"{rate:.1f} | {workers * n / (total - parts['host']) * 1e3:.1f} | "
              f"{(need - (total - moe)) / moe:.2f} |")  # fmt: skip
    print("\nfused MoE a layer at the plan's EP, priced / kernel table ms (ratio), by EP tokens:")
    done = set()
    for _, d, _, _ in what_ifs:
        step = moe_pool_steps(d, _parts(d, 0.0))[0]
        key = (d.chip, d.precision, step.costs.plan.ep)
        src = MOE_TABLES.get((f"{d.chip}_sxm", d.precision))
        if src is None or key in done or step.costs.plan.ep < 2:
            continue
        done.add(key)
        table = args.kernels / f"{d.chip}_sxm_moe_vllm-0.19.0.csv.gz"
        for routing in ("balanced", "power_law"):
            cells = moe_vs_table(step, routing, table, *src)
            print(f"  {d.chip} {d.precision} EP {key[2]} {src[0]} {routing}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
