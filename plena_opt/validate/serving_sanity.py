"""Hardware sanity sweep over ``validate --measurements`` predictions (issue 23, held-out truth).

Synthetic predict-only rows in the serving CSV schema (``serving_rows``), one per engine × model
checkpoint × weight format × system × TP × concurrency × lengths, are priced as ``validate``
prices a row (``serving_score._price_row``) and checked against orderings the hardware fixes at
the same work (same engine defaults, model, format, split, clients and lengths):

* ``h200_le_h100``: H200 TPOT ≤ H100 TPOT (one GH100 die, 4.8 vs 3.35 TB/s HBM; NVIDIA H200 /
  H100 SXM datasheets, cited in ``chip/gpu/profiles``);
* ``b300_le_b200``: B300 TTFT ≤ B200 TTFT at a compute-bound prefill (one request, long prompt;
  B300 has B200's dense BF16 / FP8 rates or more and 1.5× its FP4);
* ``gb200_vs_b200_sxm`` / ``gb300_vs_b300_sxm``: a Grace-Blackwell GPU is its HGX twin's die
  (same 8 TB/s HBM) at a higher power limit: on ≤ 8 GPUs it is not slower (2 % slack: engine
  memory defaults differ with 186 vs 180 GB) and not faster than the datasheet's dense-rate
  ratio (GB200 2.5 / 5 / 10 PF BF16 / FP8 / FP4 vs B200 2.25 / 4.5 / 9, cited in the profiles);
* ``fp8_le_bf16`` / ``fp4_le_fp8``: a smaller weight format is not slower at memory-bound decode
  (concurrency ≤ ``LOW_CONCURRENCY``);
* ``tpot_vs_concurrency``: TPOT non-decreasing in concurrency;
* ``ttft_vs_input``: TTFT non-decreasing in input length (same output length and clients);
* ``tp_low_concurrency``: for dense models of ≥ 70 B parameters, more TP within one 8-GPU NVLink
  node is not slower at low-concurrency decode;
* ``mi325x_vs_h200``: MI325X TPOT between H200's × (4.8 / 6.0) and H200's (HBM bandwidth
  ratio; the MI325X profile carries H200's kernel efficiencies) at low concurrency.

A violation is a pair of rows; ``benchmarks/serving_sanity_sweep.py`` prints every one and every
refusal reason, ``tests/validate/test_serving_sanity.py`` asserts none on a small grid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from plena_opt.validate.serving_rows import ServingRow
from plena_opt.validate.serving_score import RowResult, _price_row

# (catalog entry, format) -> (Hugging Face id, gemm_quant_mode, moe_quant_mode): the checkpoints
# the held-out rows name (bf16 base repositories, NVIDIA's / the vendor's FP8 and NVFP4 ones)
CHECKPOINTS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("llama-3.1-8b", "bf16"): ("meta-llama/Llama-3.1-8B-Instruct", "", ""),
    ("llama-3.1-8b", "fp8"): ("nvidia/Llama-3.1-8B-Instruct-FP8", "fp8", ""),
    ("llama-3.1-8b", "fp4"): ("nvidia/Llama-3.1-8B-Instruct-FP4", "nvfp4", ""),
    ("llama-3.3-70b", "bf16"): ("meta-llama/Llama-3.3-70B-Instruct", "", ""),
    ("llama-3.3-70b", "fp8"): ("nvidia/Llama-3.3-70B-Instruct-FP8", "fp8", ""),
    ("llama-3.3-70b", "fp4"): ("nvidia/Llama-3.3-70B-Instruct-FP4", "nvfp4", ""),
    ("qwen3-32b", "bf16"): ("Qwen/Qwen3-32B", "", ""),
    ("qwen3-32b", "fp8"): ("Qwen/Qwen3-32B-FP8", "fp8", ""),
    ("qwen3-32b", "fp4"): ("nvidia/Qwen3-32B-NVFP4", "nvfp4", ""),
    ("gpt-oss-120b", "fp4"): ("openai/gpt-oss-120b", "nvfp4", "nvfp4"),
    ("deepseek-r1", "fp8"): ("deepseek-ai/DeepSeek-R1-0528", "fp8", "fp8_block"),
    ("deepseek-r1", "fp4"): ("nvidia/DeepSeek-R1-0528-FP4", "nvfp4", "nvfp4"),
    ("qwen3-235b-a22b", "bf16"): ("Qwen/Qwen3-235B-A22B", "", ""),
    ("qwen3-235b-a22b", "fp8"): ("Qwen/Qwen3-235B-A22B-FP8", "fp8", "fp8"),
    ("qwen3-235b-a22b", "fp4"): ("nvidia/Qwen3-235B-A22B-FP4", "nvfp4", "nvfp4"),
    ("qwen3-30b-a3b", "bf16"): ("Qwen/Qwen3-30B-A3B", "", ""),
    ("qwen3-30b-a3b", "fp8"): ("Qwen/Qwen3-30B-A3B-FP8", "fp8", "fp8"),
    ("kimi-k2", "fp8"): ("moonshotai/Kimi-K2-Instruct", "fp8", "fp8_block"),
    ("minimax-m2", "fp8"): ("MiniMaxAI/MiniMax-M2", "fp8", "fp8_block"),
    ("glm-5", "fp8"): ("zai-org/GLM-5-FP8", "fp8", "fp8_block"),
}
MOE = frozenset({"gpt-oss-120b", "deepseek-r1", "qwen3-235b-a22b", "qwen3-30b-a3b", "kimi-k2",
                 "minimax-m2", "glm-5"})  # fmt: skip
LARGE_DENSE = frozenset({"llama-3.3-70b"})  # dense models of ≥ 70 B parameters
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "mi325x")
ENGINES = ("vllm", "sglang", "trtllm")
LOW_CONCURRENCY = 8  # clients at which decode is memory-bound (weights streamed per step)
SAME_GPU_TOLERANCE = 0.02  # GB200 vs B200: same die, HBM 186 vs 180 GB (engine memory defaults)
# MI325X vs H200 HBM bandwidth: 6.0 TB/s (AMD Instinct MI325X datasheet) / 4.8 TB/s (NVIDIA
# H200 SXM datasheet); both cited in chip/gpu/profiles/{mi325x,h200-sxm}.json
MI325X_H200_BANDWIDTH = 6.0 / 4.8


@dataclass(frozen=True)
class Case:
    """One synthetic row: what it deploys (aggregated, one worker)."""

    system: str
    engine: str
    model: str
    fmt: str
    tp: int
    concurrency: int
    isl: int
    osl: int
    ep: bool = False  # MoE experts split by expert parallelism (else by TP)

    @property
    def row_id(self) -> str:
        ep = "ep" if self.ep else "tep"
        return (f"sanity_{self.system}_{self.engine}_{self.model}_{self.fmt}_t{self.tp}{ep}"
                f"_c{self.concurrency}_{self.isl}x{self.osl}")  # fmt: skip


def row_of(case: Case) -> ServingRow:
    """The serving-CSV row of ``case``: dated (engine defaults, lengths drawn at ratio 0.8 as
    the dated rows are), an fp8 KV cache as the InferenceX recipes run, no recipe settings."""
    hf, gemm, moe = CHECKPOINTS[(case.model, case.fmt)]
    f = {"backend": case.engine, "model_path": hf, "system": case.system, "mode": "agg",
         "isl": str(case.isl), "osl": str(case.osl), "gemm_quant_mode": gemm,
         "moe_quant_mode": moe, "tp_size": str(case.tp), "pp_size": "1",
         "batch_size": str(case.concurrency), "concurrency": str(case.concurrency),
         "measured_on": "2026-01-01", "kv_cache_dtype": "fp8"}  # fmt: skip
    if case.model in MOE:
        f["moe_tp_size"], f["moe_ep_size"] = ("1", str(case.tp)) if case.ep else (str(case.tp), "1")
    return ServingRow(case.row_id, f)


def grid(systems: Iterable[str] = SYSTEMS, engines: Iterable[str] = ENGINES,
         models: Iterable[str] | None = None, tps: Iterable[int] = (1, 2, 4, 8),
         concurrencies: Iterable[int] = (1, 4, 16, 64, 256),
         lengths: Iterable[tuple[int, int]] = ((1024, 1024), (4096, 1024), (8192, 1024),
                                              (1024, 8192))) -> Iterator[Case]:  # fmt: skip
    """Every case of the product of the arguments (MoE models: TP and EP splits), skipping
    TensorRT-LLM on AMD (refused by design) and formats a checkpoint does not ship."""
    wanted = set(models) if models is not None else {m for m, _ in CHECKPOINTS}
    for system in systems:
        for engine in engines:
            if engine == "trtllm" and system.startswith("mi"):
                continue
            for model, fmt in CHECKPOINTS:
                if model not in wanted:
                    continue
                for tp in tps:
                    for ep in (False, True) if model in MOE else (False,):
                        for c in concurrencies:
                            for isl, osl in lengths:
                                yield Case(system, engine, model, fmt, tp, c, isl, osl, ep)


def small_grid() -> list[Case]:
    """The test's grid (~500 rows, every invariant exercised): Llama-3.3-70B on vLLM (bf16 /
    fp8 / NVFP4, TP 2-8) on every system, DeepSeek-R1 on TensorRT-LLM (fp8 / NVFP4, TP and EP
    over 8 GPUs), Qwen3-30B-A3B on SGLang on the Hopper parts and B200 (launch-bound decode)."""
    two = ((1024, 1024), (8192, 1024))
    return [*grid(engines=("vllm",), models=("llama-3.3-70b",), tps=(2, 4, 8),
                  concurrencies=(1, 8, 64), lengths=two),
            *grid(engines=("trtllm",), models=("deepseek-r1",), tps=(8,), concurrencies=(1, 64),
                  lengths=two),
            *grid(systems=("h100_sxm", "h200_sxm", "b200_sxm"), engines=("sglang",),
                  models=("qwen3-30b-a3b",), tps=(4,), concurrencies=(1, 8),
                  lengths=((1024, 1024),))]  # fmt: skip


def price(cases: Iterable[Case]) -> dict[Case, RowResult]:
    """Each case priced as ``validate`` prices its row. Step models are shared by the cases
    that differ only in concurrency and dropped after them (a sweep-wide cache of tens of
    thousands of step models does not fit in memory)."""
    groups: dict[Case, list[Case]] = {}
    for c in cases:
        groups.setdefault(replace(c, concurrency=1), []).append(c)
    out: dict[Case, RowResult] = {}
    for group in groups.values():
        steps: dict = {}
        out.update((c, _price_row(row_of(c), steps, {})) for c in group)
    return out


_RUNNING: dict[tuple, int | None] = {}


def running_cap(case: Case) -> int | None:
    """The requests the engine runs at once on ``case``'s worker (its default ``max_running``
    lowered to what the KV pool holds, as ``validate`` prices it; None: no cap), or None for a
    row that is refused. Memoised by everything but the concurrency and output length."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.estimate import Plan
    from plena_opt.validate.serving_rows import Refused, resolve
    from plena_opt.validate.serving_score import _parts, kv_capped

    key = (case.system, case.engine, case.model, case.fmt, case.tp, case.ep, case.isl, case.osl)
    if key not in _RUNNING:
        try:
            d = resolve(row_of(case))
            *parts, eng = _parts(d, 0.0)
            plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
            _RUNNING[key] = kv_capped(eng, tuple(parts), plan, d.trt_kv_fraction).max_running
        except (Refused, PlenaInputError):
            _RUNNING[key] = None
    return _RUNNING[key]


def runs_all(case: Case) -> bool:
    """Whether every client of ``case`` runs at once (none waits for a running slot or KV)."""
    cap = running_cap(case)
    return cap is None or cap >= case.concurrency


@dataclass(frozen=True)
class Violation:
    """Two rows that break ``invariant``: ``a`` should not be slower than ``b`` (ms values)."""

    invariant: str
    a: Case
    b: Case
    metric: str
    a_ms: float
    b_ms: float

    def __str__(self) -> str:
        return (f"{self.invariant}: {self.metric} {self.a.row_id} {self.a_ms:.3f} ms vs "
                f"{self.b.row_id} {self.b_ms:.3f} ms")  # fmt: skip


def _ms(r: RowResult | None, metric: str) -> float | None:
    return getattr(r, f"{metric}_ms") if r is not None and r.status == "priced" else None


def _compare(inv: str, res: dict, a: Case, b: Case, metric: str, slack: float = 1e-9,
        lower: float | None = None) -> Violation | None:  # fmt: skip
    """A violation unless ``a``'s metric ≤ ``b``'s × (1 + slack) (and ≥ ``b``'s × ``lower``)."""
    x, y = _ms(res.get(a), metric), _ms(res.get(b), metric)
    if x is None or y is None:
        return None
    if x > y * (1 + slack) or (lower is not None and x < y * lower):
        return Violation(inv, a, b, metric, x, y)
    return None


def peak_ratio(slow: str, fast: str) -> float:
    """The smallest datasheet ratio of ``slow``'s to ``fast``'s dense tensor rates over the
    formats both list (``chip/gpu/profiles``, cited there): how much faster ``fast`` can be."""
    from plena_opt.chip import load_chip

    a, b = load_chip(slow).peak_flops, load_chip(fast).peak_flops  # type: ignore[union-attr]
    return min(a[f].value / b[f].value for f in a if f in b)


WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}  # bytes per weight (scales not counted)
# Decode is memory-bound where streaming the weights at datasheet HBM bandwidth takes at least
# this share of TPOT. Every smaller-format-slower pair of the full sweep (835 of 4,570 at C ≤ 8)
# lies below 0.24 (an 8 B model over 4-8 GPUs, Qwen3-32B over 8, 3 B-active MoE): there the
# measured vLLM 0.19 tables (../shared/data/kernels/*_gemm_vllm-0.19.0.csv.gz, m ≤ 16, median
# fp8 / bf16 time) put fp8 GEMMs behind bf16: B200 2.01 × at n·k ≤ 4 Mi, 1.24 × at 4-16 Mi,
# 1.05 × at 16-64 Mi (0.84 × above); H100 1.37 × / H200 1.34 × at n·k ≤ 4 Mi. A test threshold,
# not a product constant: 2,466 pairs at or above it, none violating.
MEMORY_BOUND_SHARE = 0.25


def streamed_weight_bytes(case: Case) -> float:
    """Weight bytes one decode step of ``case`` reads per GPU: the non-expert weights (less the
    embedding table, which is gathered, not streamed) and, per MoE layer, the experts its
    ``concurrency`` tokens can route to at most (``min(E, C × top_k)``), over ``tp`` GPUs."""
    from plena_opt.models import load_model
    from plena_opt.models.params import count_parameters, ffn_parameters

    m = load_model(CATALOG.get(case.model, case.model))
    n = count_parameters(m)
    expert = ffn_parameters(m, m.moe_intermediate_size) if m.num_experts else 0
    dense = n.total - n.embedding - m.moe_layers * m.num_experts * expert
    touched = min(m.num_experts, case.concurrency * m.top_k) if m.num_experts else 0
    return (dense + m.moe_layers * touched * expert) * WEIGHT_BYTES[case.fmt] / case.tp


def memory_bound(case: Case, tpot_ms: float) -> bool:
    """Streaming ``case``'s weights once at the chip's datasheet HBM bandwidth takes at least
    ``MEMORY_BOUND_SHARE`` of its TPOT (``tpot_ms``, ms). Below it decode is launch- and
    latency-bound and the measured kernel tables put fp8 GEMMs behind bf16 (the constant's
    note), so no format ordering is asserted there."""
    from plena_opt.chip import load_chip

    bw = load_chip(CHIPS[case.system]).hbm.bandwidth_bytes_per_s.value  # type: ignore[union-attr]
    return streamed_weight_bytes(case) / bw >= MEMORY_BOUND_SHARE * tpot_ms * 1e-3


CATALOG = {"deepseek-r1": "deepseek-v3"}  # the catalog entry a model's rows are priced on
CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "b300_sxm": "b300",
         "gb200": "gb200", "gb300": "gb300", "mi325x": "mi325x"}  # fmt: skip


@dataclass
class Checked:
    """The outcome of ``check``: the violations, and comparisons made per invariant."""

    violations: list[Violation]
    compared: Counter[str]


def check(res: dict[Case, RowResult]) -> Checked:
    """Every invariant of the module docstring over the priced cases of ``res`` (each compares a
    case with its neighbour on one axis, where the sweep holds that neighbour). Comparisons
    across chips, formats or TP sizes are made where every client of both rows runs at once
    (``runs_all``): where a pool admits fewer, the rest queue and the running batch (so TPOT)
    shrinks, which the larger pool does not do — not the same work."""
    out: list[Violation | None] = []
    compared: Counter[str] = Counter()
    concs = sorted({c.concurrency for c in res})
    isls = sorted({c.isl for c in res})

    def _le(inv: str, a: Case, b: Case, metric: str, slack: float = 1e-9,
            lower: float | None = None) -> Violation | None:  # fmt: skip
        if _ms(res.get(a), metric) is not None and _ms(res.get(b), metric) is not None:
            compared[inv] += 1
        return _compare(inv, res, a, b, metric, slack, lower)

    def same_work(a: Case, b: Case) -> bool:
        return runs_all(a) and runs_all(b)

    for c in res:
        low = c.concurrency <= LOW_CONCURRENCY
        if c.system == "h200_sxm" and same_work(c, h100 := replace(c, system="h100_sxm")):
            # one GH100 die, HBM 4.8 vs 3.35 TB/s: exact ordering (the die's constants are fitted
            # once on both kernel tables, calibrate_gemm.SAME_DIE; README_serving r15h200)
            out.append(_le("h200_le_h100", c, h100, "tpot"))
        if c.system == "b300_sxm" and c.concurrency == 1 and c.isl >= 4096:
            out.append(_le("b300_le_b200", c, replace(c, system="b200_sxm"), "ttft"))
        for gb, hgx in (("gb200", "b200_sxm"), ("gb300", "b300_sxm")):
            twin = replace(c, system=hgx)
            if c.system == gb and same_work(c, twin):
                lower = peak_ratio(CHIPS[hgx], CHIPS[gb]) / (1 + SAME_GPU_TOLERANCE)
                for m in ("tpot", "ttft"):
                    out.append(_le(f"{gb}_vs_{hgx}", c, twin, m, SAME_GPU_TOLERANCE, lower))
        if low and c.fmt in ("fp8", "fp4"):
            bigger = "bf16" if c.fmt == "fp8" else "fp8"
            other = replace(c, fmt=bigger)
            t = _ms(res.get(other), "tpot")
            if (c.model, bigger) in CHECKPOINTS and same_work(c, other) and t is not None \
                    and memory_bound(other, t):  # fmt: skip
                out.append(_le(f"{c.fmt}_le_{bigger}", c, other, "tpot"))
        nxt = [k for k in concs if k > c.concurrency]
        if nxt:
            out.append(_le("tpot_vs_concurrency", c, replace(c, concurrency=nxt[0]), "tpot"))
        longer = [n for n in isls if n > c.isl]
        if longer:
            out.append(_le("ttft_vs_input", c, replace(c, isl=longer[0]), "ttft"))
        wider = replace(c, tp=2 * c.tp)
        if low and c.model in LARGE_DENSE and c.tp < 8 and same_work(c, wider):
            out.append(_le("tp_low_concurrency", wider, c, "tpot"))
        h200 = replace(c, system="h200_sxm")
        if low and c.system == "mi325x" and same_work(c, h200):
            out.append(_le("mi325x_vs_h200", c, h200, "tpot", 1e-9,
                           1 / MI325X_H200_BANDWIDTH))  # fmt: skip
    return Checked([v for v in out if v is not None], compared)


def refusals(res: dict[Case, RowResult]) -> dict[str, int]:
    """Refusal reason -> rows refused with it, most frequent first."""
    out: dict[str, int] = {}
    for r in res.values():
        if r.status == "refused":
            out[r.reason] = out.get(r.reason, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
