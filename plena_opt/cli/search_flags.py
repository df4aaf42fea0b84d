"""The flags of ``plena-opt search``, one helper per group of related flags (in ``--help`` order).

``search_cmd.register`` calls :func:`add_search_flags`; the flags are read back into a
``SearchRequest`` by ``search_cmd.request_from_args``.
"""

from __future__ import annotations

import argparse
from typing import Any

from plena_opt.api.recheck import DEFAULT_NOISE, DEFAULT_RECHECK, DEFAULT_SAMPLES
from plena_opt.api.search_io import DEFAULT_OBJECTIVES, OBJECTIVES
from plena_opt.api.studies import DEFAULT_STORAGE
from plena_opt.cli.conventions import ENV_STORAGE
from plena_opt.vocabulary import PERCENTILES, SAMPLERS, SERVING_MODES, SERVING_SAMPLERS


def add_search_flags(p: argparse.ArgumentParser) -> None:
    """The groups ``search``, ``Monte Carlo re-check of the best plans`` and ``output``."""
    g = p.add_argument_group("search")
    _add_space_flags(g)
    _add_sla_flags(g)
    add_robust_flag(g)
    _add_sampler_flags(g)
    _add_codesign_flags(g)
    _add_load_flags(p.add_argument_group("serving under load (GPU chips; issue 23)"))
    _add_recheck_flags(p.add_argument_group("Monte Carlo re-check of the best plans"))
    _add_output_flags(p.add_argument_group("output"))


def _add_space_flags(g: Any) -> None:
    """What is searched: batch sizes, memory share, formats, objectives."""
    g.add_argument(
        "--batch-sizes",
        default=None,
        help="comma list of global batch sizes to search (e.g. 8,16,64), or 'auto': powers of "
        "two up to the largest batch whose weights + KV + activations fit (--memory-fraction) "
        "(default: --batch-size); under --concurrency C the batch is C (the engine's cap on "
        "running requests, max_num_seqs in the launch files)",
    )
    g.add_argument(
        "--memory-fraction",
        type=float,
        default=None,
        help="share of device memory for weights + KV + activations, like vLLM's "
        "--gpu-memory-utilization (default 0.9 with --batch-sizes auto; otherwise memory is "
        "judged on the whole capacity); under --concurrency/--request-rate the engine's KV "
        "pool at this share (default 0.9, what export writes) judges memory: weights + the KV "
        "of the requests it admits, the rest queued in TTFT",
    )
    g.add_argument(
        "--precisions",
        default=None,
        help="comma list of weight/activation formats to search with the plan (e.g. "
        "bf16,fp8,fp4; each one the chip supports; excludes --precision; default: --precision)",
    )
    g.add_argument(
        "--objectives",
        default=",".join(DEFAULT_OBJECTIVES),
        help=f"comma list from {','.join(OBJECTIVES)}",
    )


def _add_sla_flags(g: Any) -> None:
    """The SLAs, the percentile they are judged at, and the serving modes."""
    g.add_argument(
        "--max-ttft-ms", type=float, default=None, help="SLA: TTFT at most, ms (default: no limit)"
    )
    g.add_argument(
        "--min-tps-per-seq",
        type=float,
        default=None,
        help="SLA: decode tokens/s per sequence at least (default: no limit)",
    )
    g.add_argument(
        "--max-tpot-ms",
        type=float,
        default=None,
        help="SLA: time per output token at most, ms (1000 / per-sequence TPS; default: no limit)",
    )
    g.add_argument(
        "--max-cost-per-mtok",
        type=float,
        default=None,
        help="SLA: USD per million output tokens at most, from the price file (default: no "
        "limit; needs a chip the price file prices)",
    )
    g.add_argument(
        "--prices",
        metavar="FILE",
        default=None,
        help="price file for the cost fields, the cost-per-mtok objective and "
        "--max-cost-per-mtok (JSON: per chip usd_per_gpu_hour, site usd_per_kwh and pue; "
        "default: the shipped plena_opt/estimate/prices.json)",
    )
    g.add_argument(
        "--percentile",
        choices=PERCENTILES,
        default="p50",
        help="judge the SLA at this percentile (default p50): of the Monte Carlo re-check; with "
        "--concurrency/--request-rate, of the under-load TTFT and TPOT (the objectives too)",
    )
    g.add_argument(
        "--serving",
        choices=SERVING_MODES,
        default="aggregated",
        help="aggregated plans, disaggregated prefill/decode pools, or both side by side",
    )
    g.add_argument(
        "--serving-sampler",
        choices=SERVING_SAMPLERS,
        default="auto",
        help="how --serving searches the disaggregated deployments (optuna: at most --trials "
        "in all, resuming the <study>-serving study; default auto)",
    )
    g.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="auto",
        help="tpe, nsga2, gp (needs torch), exhaustive (score every legal plan), or auto "
        "(default): exhaustive whenever scoring every plan costs less than --trials TPE trials "
        "by a fixed CPU cost model (from counts, never timed: same choice on any machine)",
    )


def add_robust_flag(g: Any) -> None:
    """``--robust``: search on the worst case (``api.robust``)."""
    g.add_argument(
        "--robust",
        action="store_true",
        help="search on the worst case: every plan priced with the GPU's peak compute, memory "
        "bandwidth and network at 0.9 x the datasheet, and the SLA judged at the pessimistic "
        "end of the 90 %% interval from measured error (search under load with an engine; "
        "without one, peaks only); the front then holds robust plans only (study "
        "<study>-robust; local, GPU chips). Without it, front plans are still marked "
        "robust: true/false with the reason",
    )


def _add_sampler_flags(g: Any) -> None:
    """The sampler, its budget and seed, the study and its storage, workers."""
    g.add_argument(
        "--trials",
        type=int,
        default=200,
        help="plans a sampler's study holds in all (default 200; a re-run of the same search "
        "scores only what it lacks); it stops earlier when every legal plan is scored",
    )
    g.add_argument(
        "--timeout", type=float, default=None, help="stop after S seconds (default: no limit)"
    )
    g.add_argument(
        "--seed",
        type=int,
        default=0,
        help="sampler seed: the same inputs and seed give the same plans, front and "
        "recommendation (default: 0)",
    )
    g.add_argument(
        "--study",
        default=None,
        help="study name; the same name resumes (default: from model, NoC and workload)",
    )
    g.add_argument(
        "--storage",
        default=None,
        help=f"journal file, RDB URL or :memory: (default: ${ENV_STORAGE} or ./{DEFAULT_STORAGE})",
    )
    g.add_argument(
        "--compare-exact",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score the whole space to rate a sampled front (default: if small)",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="score every plan with N local worker processes on --storage (an RDB URL, e.g. "
        "postgresql://…); more join from any machine with plena-opt worker (default: this "
        "process alone)",
    )
    g.add_argument(
        "--store-plans",
        choices=("all", "front"),
        default=None,
        help="with --workers: what each chunk of plans stores: 'front' (default) stores its "
        "Pareto fronts as trials and every plan's metrics compactly on the chunk (the study's "
        "front, --csv-all and resume are the same, ~10x less database work); 'all' stores a "
        "trial per plan",
    )


def _add_codesign_flags(g: Any) -> None:
    """Hardware co-design: the design space and its cost limit."""
    g.add_argument(
        "--design-space",
        default=None,
        metavar="FILE|NAME",
        help="search hardware knobs too: a design space file (JSON/TOML) or shipped name "
        "(plena-stacked-dram); the exact plan front on each hardware point, the joint front "
        "over (hardware, plan) (default: the hardware is fixed)",
    )
    g.add_argument(
        "--max-cost",
        type=float,
        default=None,
        help="with --design-space: skip hardware points whose cost is above this (default: none)",
    )


def _add_recheck_flags(r: Any) -> None:
    """The Monte Carlo re-check of the top front plans."""
    r.add_argument(
        "--recheck",
        type=int,
        default=None,
        metavar="K",
        help=f"re-check the top K front plans by simulation (0: off; default: up to "
        f"{DEFAULT_RECHECK}, as many as keep the re-check under 30%% of the search's CPU by a "
        "fixed cost model)",
    )
    r.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_SAMPLES,
        help=f"Monte Carlo samples per re-checked plan (default {DEFAULT_SAMPLES})",
    )
    r.add_argument(
        "--noise",
        default=DEFAULT_NOISE,
        help=f"noise spec of the re-check (default {DEFAULT_NOISE})",
    )
    r.add_argument(
        "--trace-dir",
        default=None,
        help="write Perfetto traces of the re-checked plans to this folder (default: none)",
    )


def _add_output_flags(o: Any) -> None:
    """Output: JSON, CSV, plot, progress and launch-file export."""
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    o.add_argument(
        "--csv", default=None, metavar="FILE", help="write the front as CSV (default: none)"
    )
    o.add_argument(
        "--csv-all",
        default=None,
        metavar="FILE",
        help="write every plan scored or reused by this search as CSV (feasible, on_front "
        "columns; default: none)",
    )
    o.add_argument(
        "--plot", default=None, metavar="FILE.png", help="plot the front (default: none)"
    )
    o.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (default: a bar on a terminal, a line every 2 s otherwise)",
    )
    o.add_argument(
        "--export-dir",
        default=None,
        metavar="DIR",
        help="write vLLM / SGLang launch files of the top K front plans (K = --export-top; "
        "default: none)",
    )
    o.add_argument("--export-top", type=int, default=5, metavar="K", help="plans to export")
    o.add_argument(
        "--engine-model",
        default=None,
        help="model id written into exported launch files (default: the catalog model's "
        "Hugging Face id, or --model-path)",
    )


def _add_load_flags(g: Any) -> None:
    """The serving workload every plan is priced under (objectives and SLAs read it)."""
    from plena_opt.bounds import MAX_CONCURRENCY, MAX_REQUEST_RATE

    g.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="C",
        help=f"price every plan under a closed loop of C clients, 1..{MAX_CONCURRENCY:,} (as "
        "vllm bench serve --max-concurrency; --input-seq/--output-seq lengths): TTFT, TPOT and "
        "tokens/s are the engine's steady state under that load, judged at --percentile; the "
        "static batch's stay as static_* (default: none, static batch figures)",
    )
    g.add_argument(
        "--request-rate",
        type=float,
        default=None,
        metavar="RATE",
        help=f"instead of --concurrency: Poisson arrivals, requests/s, at most "
        f"{MAX_REQUEST_RATE:,.0f} (split evenly over a plan's DP replicas; default: none)",
    )
    g.add_argument(
        "--engine",
        default=None,
        help="serving engine whose scheduler runs the load: vllm (default), sglang or trtllm",
    )
    g.add_argument(
        "--engine-version",
        default=None,
        help="engine version (default and only one modelled: vllm 0.34.0, sglang 0.5.23, "
        "trtllm 00209af1)",
    )
    g.add_argument(
        "--range-ratio",
        type=float,
        default=None,
        metavar="R",
        help="lengths drawn within ±R of --input-seq/--output-seq, 0 <= R < 1 (default 0)",
    )
