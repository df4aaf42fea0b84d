"""``plena-opt validate``: the accuracy scorecard against the public measurements shipped, or
``--measurements FILE.csv``: each row of a serving results file priced as it was deployed."""

from __future__ import annotations

import argparse
import json

from plena_opt.cli.calibration_flag import add_calibration_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="score the model against shipped public measurements (MAPE per dataset and model)",
        description="Price every public measurement the package ships (fig09: vLLM decode "
        "tokens/s on 8x B200, TP 8, 1k/1k, batch 1-512) and print, per dataset and per model, "
        "the points, MAPE, signed bias and worst point. No constant is fitted on these points. "
        "With --measurements FILE.csv: price each row of a serving benchmark results file "
        "(columns of the shipped data/serving/measured_serving_h100_b200.csv; 'shipped' names "
        "that file) under its engine's scheduler at its concurrency, print predicted next to "
        "measured TTFT/TPOT and MAPE by GPU, engine, model, mode and concurrency band; a row "
        "that cannot be priced as deployed is refused with the reason.",
    )
    p.add_argument("--json", action="store_true", help="print the scorecard as JSON")
    p.add_argument("--points", action="store_true", help="also list every point")
    p.add_argument(
        "--measurements",
        metavar="FILE.csv",
        help="a serving results CSV to price row by row ('shipped': the packaged one), or a "
        "benchmark result file with its deployment (default: none, the fig09 scorecard)",
    )
    add_bench_flags(p)
    p.add_argument(
        "--cross-validate",
        action="store_true",
        help="with --measurements: fit the per-engine TTFT overhead and host time per step "
        "leaving one GPU (then one model) out, and print the held-out MAPE before and after",
    )
    add_calibration_flag(p)
    p.set_defaults(func=run)


def add_bench_flags(p: argparse.ArgumentParser) -> None:
    """The deployment flags of a benchmark result file (also ``plena-opt calibrate``'s)."""
    g = p.add_argument_group(
        "benchmark result files (--measurements RESULT.json: vllm bench serve --save-result, "
        "SGLang bench_serving --output-file .jsonl, aiperf profile_export_aiperf.json) and the "
        "deployment they measured"
    )
    g.add_argument(
        "--deployment", metavar="KEY", help="the plan key as search prints it (default: none)"
    )
    g.add_argument(
        "--model", help="catalog model or Hugging Face id the engine served (default: none)"
    )
    g.add_argument(
        "--gpu",
        help="GPU as AIConfigurator names it (h100_sxm, ...) or a chip name (default: none)",
    )
    g.add_argument(
        "--engine",
        help="serving engine: vllm, sglang or trtllm (default: the bundle's only engine)",
    )
    g.add_argument(
        "--bundle",
        metavar="DIR",
        help="a folder plena-opt export --out-dir wrote: its deployment.json names the "
        "deployment (the flags above fill or override its fields; default: none)",
    )


def run(args: argparse.Namespace) -> int:
    if args.measurements:
        return _run_measurements(args)
    if args.cross_validate:
        from plena_opt.errors import PlenaInputError

        raise PlenaInputError("cross_validate", "--cross-validate needs --measurements FILE.csv")
    from plena_opt.validate import run_scorecard

    card = run_scorecard()
    if args.json:
        print(json.dumps(card.to_dict(), indent=2))
        return 0
    datasets = list(dict.fromkeys(p.dataset for p in card.points))
    w = max([8, *map(len, datasets)])
    print(f"{'dataset':{w}} {'model':18} {'points':>6} {'MAPE %':>8} {'bias %':>8} {'worst %':>8}")
    for s in card.by_model() + [card.overall(d) for d in datasets]:
        where = "BS" if s.dataset.startswith("fig09") else "row"
        worst = f"{s.worst:+8.1f} ({where} {s.worst_batch})"
        print(f"{s.dataset:{w}} {s.model:18} {s.points:6d} {s.mape:8.2f} {s.bias:+8.2f} {worst}")
    for key, why in card.skipped.items():
        print(f"skipped  {key}: {why}")
    if args.points:
        for p in card.points:
            print(f"{p.dataset} {p.model} BS {p.batch_size}: measured {p.measured:.1f}, "
                  f"predicted {p.predicted:.1f} ({100 * p.error:+.1f} %)")  # fmt: skip
    return 0


def _run_measurements(args: argparse.Namespace) -> int:
    from pathlib import Path

    from plena_opt.jsonio import dumps
    from plena_opt.validate.serving_score import score_serving, shipped_serving_csv

    path = shipped_serving_csv() if args.measurements == "shipped" else Path(args.measurements)
    report = _bench_report(args, path) or score_serving(path)
    if args.json:
        doc = report.to_dict()
        if args.cross_validate:
            doc["cross_validation"] = _cross_validation(report)
        print(dumps(doc, indent=2))
        return 0

    def ms(v: float | None) -> str:
        return f"{v:10.1f}" if v is not None else f"{'-':>10}"

    print(
        f"{'id':60} {'status':8} {'TTFT ms':>10} {'measured':>10} {'TPOT ms':>10} {'measured':>10}"
    )
    for r in report.rows:
        line = f"{r.id[:60]:60} {r.status:8} {ms(r.ttft_ms)} {ms(r.measured_ttft_ms)} "
        line += f"{ms(r.tpot_ms)} {ms(r.measured_tpot_ms)}"
        print(line + (f"  {r.reason}" if r.reason else ""))
    _print_summary(report.summary())
    if args.cross_validate:
        print(f"\n{'held out':34} {'rows':>5} {'TTFT before':>11} {'after':>7} "
              f"{'TPOT before':>11} {'after':>7}  fitted (ms)")  # fmt: skip
        for split in _cross_validation(report).values():
            for h in split:
                print(f"{h['test'][:34]:34} {h['rows']:5d} {h['ttft_before']:11.1f} "
                      f"{h['ttft_after']:7.1f} {h['tpot_before']:11.1f} {h['tpot_after']:7.1f}  "
                      f"{h['constants_ms']}")  # fmt: skip
    return 0


def _cross_validation(report: object) -> dict[str, list[dict]]:
    from plena_opt.validate.serving_fit import cross_validate

    out: dict[str, list[dict]] = {}
    for split, held in cross_validate(report).items():  # type: ignore[arg-type]
        out[split] = []
        for h in held:
            c = h.constants
            fitted = {e: {"ttft_overhead": round(1e3 * c.ttft_overhead_seconds[e], 2),
                          "host_step": round(1e3 * c.host_step_seconds[e], 3)}
                      for e in c.ttft_overhead_seconds}  # fmt: skip
            out[split].append({"test": h.test, "rows": h.rows, "ttft_before": h.ttft_before,
                               "ttft_after": h.ttft_after, "tpot_before": h.tpot_before,
                               "tpot_after": h.tpot_after, "constants_ms": fitted})  # fmt: skip
    return out


def _print_summary(s: dict) -> None:
    def pct(v: float | None) -> str:
        return f"{v:8.1f}" if v is not None else f"{'-':>8}"

    print(f"\n{s['priced']} of {s['rows']} rows priced ({100 * s['priced_fraction']:.1f} %), "
          f"{s['refused']} refused")  # fmt: skip
    print(f"{'group':10} {'value':34} {'rows':>5} {'TTFT MAPE':>9} {'bias':>8} "
          f"{'TPOT MAPE':>9} {'bias':>8}")  # fmt: skip
    groups = [("all", {"": s["overall"]})]
    groups += [(g, s[f"by_{g}"]) for g in ("system", "backend", "model", "mode", "band")]
    for g, by in groups:
        for k, m in by.items():
            ttft = f"{pct(m['ttft_mape']):>9} {pct(m['ttft_bias'])}"
            tpot = f"{pct(m['tpot_mape']):>9} {pct(m['tpot_bias'])}"
            print(f"{g:10} {k[:34]:34} {m['rows']:5d} {ttft} {tpot}")
    for key, what in (("tpot_ranking", ""), ("tpot_ranking_same_concurrency", ", concurrency")):
        rk = s[key]
        if rk["groups"]:
            print(f"TPOT ranking within (model, GPU, engine, lengths{what}): {rk['groups']} "
                  f"groups, mean Spearman {rk['mean_rho']:.3f}, "
                  f"{rk['groups_rho_at_least_0_9']} at >= 0.9")  # fmt: skip
    for reason, n in s["refusals"].items():
        print(f"refused {n:5d}  {reason}")


def _bench_report(args: argparse.Namespace, path: object) -> object | None:
    """The runs of a benchmark result file priced on the named deployment (None: a CSV)."""
    from plena_opt.validate.bench_score import score_bench

    target = bench_target(args, path)
    return None if target is None else score_bench(path, target)  # type: ignore[arg-type]


def bench_target(args: argparse.Namespace, path: object) -> object | None:
    """The deployment a benchmark result file measured, from the flags (None: a CSV)."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.validate.bench_score import target_from_bundle, target_from_flags

    named = (args.deployment, args.model, args.gpu, args.engine)
    if args.bundle is None and not any(named):
        if path.is_file() and path.read_bytes()[:64].lstrip()[:1] in (b"{", b"["):  # type: ignore[attr-defined]
            raise PlenaInputError("deployment", "a benchmark result file needs the deployment "
                                  "it measured: --deployment KEY --model M --gpu G --engine E, "
                                  "or --bundle DIR")  # fmt: skip
        return None
    if args.bundle is not None:
        if args.deployment:
            raise PlenaInputError("deployment", "--bundle names the deployment: drop --deployment")
        target = target_from_bundle(args.bundle, args.model, args.gpu, args.engine)
    else:
        target = target_from_flags(*named)
    return target
