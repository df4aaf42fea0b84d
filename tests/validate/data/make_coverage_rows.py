"""Write ``coverage_rows.csv``: synthetic, predict-only serving rows for the coverage test.

The shipped measurements (``measured_serving_h100_b200.csv``: H100 / B200, five models) are
re-targeted to the systems and models validate must also price: every system of
``validate.serving_rows.SYSTEMS`` (with the alias spellings it accepts), an 8 x MI325X node, and
the catalog's other models by Hugging Face id (base, FP8 / NVFP4 / INT4 checkpoints, dated
revisions). Each row keeps a shipped row's engine, version, lengths and concurrency and gets a
parallel split valid for the target model (experts divisible by the expert-parallel size, the
weights within 70 % of the worker's HBM), aggregated and fully specified disaggregated (worker
counts), including wide expert parallelism over GB200 / GB300 NVL72 racks, and pipeline stages
(``pp_size`` 2) for the dense models. Measured columns are
empty (predict only). A few rows are deployments no engine runs (TensorRT-LLM on an AMD GPU,
NVFP4 weights on Hopper): they must be refused by name (``id`` starts with ``expect_refused``).

Run from the repository root: ``python tests/validate/data/make_coverage_rows.py``. Deterministic.
"""

from __future__ import annotations

import csv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "plena_opt/validate/data/serving/measured_serving_h100_b200.csv"
OUT = Path(__file__).with_name("coverage_rows.csv")

# system name as the rows spell it -> (GB of HBM per GPU, NVIDIA Blackwell FP4 tensor cores)
SYSTEMS = {
    "h100_sxm": (80, False),
    "h200_sxm": (141, False),
    "b200_sxm": (180, True),
    "b300_sxm": (288, True),
    "gb200": (186, True),
    "gb300": (288, True),
    "gb200_sxm": (186, True),
    "gb300_sxm": (288, True),
    "mi325x": (256, False),
    "mi325x_sxm": (256, False),
}
AMD = {"mi325x", "mi325x_sxm"}
ALIASES = {"gb200_sxm", "gb300_sxm", "mi325x_sxm"}  # spelled as aliases: every 4th checkpoint
RACKS = {"gb200", "gb300", "gb200_sxm", "gb300_sxm"}
# (Hugging Face id, weight format, total parameters in billions (model cards), routed experts)
CHECKPOINTS = [
    ("meta-llama/Llama-3.3-70B-Instruct", "bf16", 70.6, 0),
    ("nvidia/Llama-3.3-70B-Instruct-FP8", "fp8", 70.6, 0),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "nvfp4", 70.6, 0),
    ("amd/Llama-3.3-70B-Instruct-FP8-KV", "fp8", 70.6, 0),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", 8.0, 0),
    ("Qwen/Qwen3-32B-FP8", "fp8", 32.8, 0),
    ("deepseek-ai/DeepSeek-V3", "fp8", 671, 256),
    ("deepseek-ai/DeepSeek-V3-0324", "fp8", 671, 256),
    ("deepseek-ai/DeepSeek-V3.1-Terminus", "fp8", 671, 256),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "fp8", 671, 256),
    ("deepseek-ai/DeepSeek-R1-0528", "fp8", 671, 256),
    ("nvidia/DeepSeek-R1-0528-FP4", "nvfp4", 671, 256),
    ("nvidia/DeepSeek-R1-0528-FP4-v2", "nvfp4", 671, 256),
    ("nvidia/DeepSeek-V3-0324-FP4", "nvfp4", 671, 256),
    ("moonshotai/Kimi-K2-Instruct", "fp8", 1026, 384),
    ("moonshotai/Kimi-K2-Instruct-0905", "fp8", 1026, 384),
    ("moonshotai/Kimi-K2-Thinking", "int4", 1026, 384),
    ("nvidia/Kimi-K2-Thinking-NVFP4", "nvfp4", 1026, 384),
    ("moonshotai/Kimi-K2.5", "int4", 1026, 384),
    ("Qwen/Qwen3-235B-A22B", "bf16", 235, 128),
    ("Qwen/Qwen3-235B-A22B-FP8", "fp8", 235, 128),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "fp8", 235, 128),
    ("nvidia/Qwen3-235B-A22B-FP4", "nvfp4", 235, 128),
    ("Qwen/Qwen3-30B-A3B", "bf16", 30.5, 128),
    ("Qwen/Qwen3-30B-A3B-FP8", "fp8", 30.5, 128),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "bf16", 30.5, 128),
    ("openai/gpt-oss-20b", "mxfp4", 21, 32),
    ("openai/gpt-oss-120b", "mxfp4", 117, 128),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "bf16", 109, 16),
    ("nvidia/Llama-4-Scout-17B-16E-Instruct-FP8", "fp8", 109, 16),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "bf16", 46.7, 8),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "bf16", 141, 8),
    ("MiniMaxAI/MiniMax-M2", "fp8", 230, 256),
    ("MiniMaxAI/MiniMax-M2.1", "fp8", 230, 256),
    ("MiniMaxAI/MiniMax-M2.5", "fp8", 230, 256),
    ("zai-org/GLM-5-FP8", "fp8", 744, 256),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "bf16", 80, 512),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "fp8", 80, 512),
    ("Qwen/Qwen3.5-397B-A17B-FP8", "fp8", 397, 512),
]
# the file's quant-mode columns per format: (gemm_quant_mode, moe_quant_mode, precision)
MODES = {"bf16": ("", "", ""), "fp8": ("fp8", "fp8_block", "fp8"),
         "nvfp4": ("nvfp4", "nvfp4", "fp4"), "mxfp4": ("nvfp4", "nvfp4", "fp4"),
         "int4": ("int4_wo", "int4_wo", "int4")}  # fmt: skip
# the same checkpoints as a row may also write them: gpt-oss's own layout (bf16 attention, MXFP4
# experts run weight-only where the GPU has no FP4 tensor cores), 16-bit as "float16"
ALT_MODES = {"mxfp4": ("", "w4a16_mxfp4", "fp4"), "bf16": ("float16", "float16", "")}
BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5625, "mxfp4": 0.53, "int4": 0.53}
ENGINES = ("vllm", "sglang", "trtllm")
ROWS_PER_PAIR = 1


def templates() -> dict[str, list[dict[str, str]]]:
    """Dated, fully specified aggregated shipped rows per engine (version, lengths, load)."""
    out: dict[str, list[dict[str, str]]] = {e: [] for e in ENGINES}
    with open(SHIPPED, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["mode"] == "agg" and r["measured_on"] and r["concurrency"] and r["tp_size"]:
                out[r["backend"]].append(r)
    for rows in out.values():
        rows.sort(key=lambda r: r["id"])
    return out


def worker_gpus(params_b: float, fmt: str, hbm_gb: int) -> int:
    """The fewest GPUs (a power of two) whose HBM holds the weights within 70 %."""
    g = 1
    while params_b * BYTES[fmt] > 0.7 * hbm_gb * g:
        g *= 2
    return g


def moe_splits(g: int, experts: int, racks: bool) -> list[tuple[int, int, int, int]]:
    """(tp, attention dp, moe_tp, moe_ep) splits of ``g`` GPUs, wide EP on a rack (48 and 72:
    EP sizes that need redundant expert replicas, as GB200 NVL72 deployments run them)."""
    out = []
    for ep in [g, 16, 32, 48, 64, 72] if racks else [g]:
        uneven_ok = ep in (48, 72) and ep < experts
        if ep >= g and (experts % ep == 0 or uneven_ok) and ep <= 72:
            out.append((1, ep, 1, ep))  # attention DP x expert parallel (DEP)
    if experts % g == 0:
        out.append((g, 1, 1, g))  # attention TP, MoE EP (TEP)
    out.append((g, 1, g, 1))  # TP everywhere
    return out


def base_row(t: dict[str, str], system: str, hf: str, fmt: str) -> dict[str, str]:
    row = {k: "" for k in t}
    alt = fmt in ALT_MODES and not SYSTEMS[system][1] and len(hf) % 2 == 0
    gemm, moe, precision = (ALT_MODES if alt else MODES)[fmt]
    for k in ("backend", "backend_version", "engine_image", "measured_on", "isl", "osl"):
        row[k] = t[k]
    row.update(model_path=hf, system=system, gemm_quant_mode=gemm, moe_quant_mode=moe,
               precision=precision, pp_size="1")  # fmt: skip
    return row


def agg(t: dict, system: str, ck: tuple, split: tuple[int, int, int, int], n: int,
        pp: int = 1) -> dict:  # fmt: skip
    hf, fmt, _, experts = ck
    tp, dp, mtp, mep = split
    conc = max(dp, int(t["concurrency"]) // dp * dp)
    row = base_row(t, system, hf, fmt)
    moe = {"attention_dp_size": dp, "moe_tp_size": mtp, "moe_ep_size": mep} if experts else {}
    row.update(mode="agg", concurrency=str(conc), batch_size=str(conc // dp), tp_size=str(tp),
               pp_size=str(pp), **{k: str(v) for k, v in moe.items()})  # fmt: skip
    ep = str(mep) if experts and mep > 1 else "none"
    row["id"] = _id(row, f"tp{tp * dp}_ep{ep}_{n}")
    return row


def disagg(t: dict, system: str, ck: tuple, pools: tuple, n: int) -> dict:
    """``pools``: ((workers, tp, dp, moe_ep) prefill, (…) decode)."""
    hf, fmt, _, experts = ck
    row = base_row(t, system, hf, fmt)
    row.update(mode="disagg", concurrency=t["concurrency"])
    for role, (w, tp, dp, mep) in zip(("prefill", "decode"), pools, strict=True):
        row.update({f"{role}_num_workers": str(w), f"{role}_tp_size": str(tp),
                    f"{role}_pp_size": "1", f"{role}_attention_dp_size": str(dp),
                    f"{role}_moe_tp_size": str(tp * dp // mep) if experts else "",
                    f"{role}_moe_ep_size": str(mep) if experts else ""})  # fmt: skip
    row["id"] = _id(row, f"tp_epnone_{n}")
    return row


def _id(row: dict, tail: str) -> str:
    slug = row["model_path"].replace("/", "_").replace(".", "p").replace("-", "_").lower()
    lead = "expect_refused_" if _unrunnable(row) else "cov_"  # NVFP4: "precision" fp4 + nvfp4
    return (f"{lead}{slug}_{row['system']}_{row['backend']}_{row['mode']}_{row['isl']}x"
            f"{row['osl']}_c{row['concurrency']}_{tail}")  # fmt: skip


def _unrunnable(row: dict) -> bool:
    """TensorRT-LLM on AMD, or NVFP4 weights on a GPU without FP4 tensor cores (gpt-oss rows
    labelled nvfp4, as the shipped file labels them, are its MXFP4 checkpoint: priced W4A16)."""
    fp4 = SYSTEMS[row["system"]][1]
    nvfp4_ckpt = row["gemm_quant_mode"] == "nvfp4" and not row["model_path"].startswith("openai/")
    return (row["system"] in AMD and row["backend"] == "trtllm") or (nvfp4_ckpt and not fp4)


def rows() -> list[dict[str, str]]:
    """Every synthetic row, in a fixed order."""
    tpl, out, n = templates(), [], 0
    for si, (system, (hbm, _)) in enumerate(SYSTEMS.items()):
        for ci, ck in enumerate(CHECKPOINTS):
            hf, fmt, params, experts = ck
            if system in ALIASES and ci % 4:
                continue
            g = worker_gpus(params, fmt, hbm)
            if g > (64 if system in RACKS else 16):
                continue
            if fmt == "nvfp4" and not SYSTEMS[system][1] and ci % 3:
                continue  # NVFP4 weights where no engine runs them: a few rows, to be refused
            splits = moe_splits(g, experts, system in RACKS) if experts else [(g, 1, g, 1)]
            for k in range(ROWS_PER_PAIR):
                engine = ENGINES[(si + ci + k) % 3]
                if system in AMD and engine == "trtllm" and (ci + k) % 5:
                    engine = "vllm" if k else "sglang"  # a few trtllm-on-AMD rows stay
                t = tpl[engine][(7 * si + 13 * ci + 29 * k) % len(tpl[engine])]
                n += 1
                out.append(agg(t, system, ck, splits[(ci + k) % len(splits)], n))
            if not experts and (si + ci) % 2 == 0:  # pipeline stages: half the TP, pp 2
                t = tpl[ENGINES[(si + ci + 1) % 3]][(3 * si + 11 * ci) % 50]
                n += 1
                half = max(1, g // 2)
                out.append(agg(t, system, ck, (half, 1, half, 1), n, pp=2))
            if (si + ci) % 3 == 0:  # a fully specified disaggregated deployment
                t = tpl[ENGINES[ci % 3]][(5 * si + ci) % len(tpl[ENGINES[ci % 3]])]
                n += 1
                out.append(disagg(t, system, ck, _pools(g, experts, system in RACKS, ci), n))
    return out


def _pools(g: int, experts: int, racks: bool, i: int) -> tuple:
    """Prefill and decode pools for a model needing ``g`` GPUs per worker."""
    if not experts:
        return ((1 + i % 4, g, 1, 1), (1 + i % 2, max(g, 2 if i % 2 else g), 1, 1))
    if racks and g <= 16:  # wide expert-parallel decode over the rack, several prefill workers
        wide = 32 if experts % 32 == 0 else g
        return ((2 + i % 3, 1, g, g if experts % g == 0 else 1), (1, 1, wide, wide))
    return (
        (1 + i % 2, g, 1, g if experts % g == 0 else 1),
        (1, g, 1, g if experts % g == 0 else 1),
    )


def main() -> None:
    out = rows()
    with open(SHIPPED, newline="") as fh:
        header = next(csv.reader(fh))
    with open(OUT, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    print(f"{len(out)} rows -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
