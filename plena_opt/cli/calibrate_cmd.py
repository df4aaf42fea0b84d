"""``plena-opt calibrate --measurements FILE.csv --out overlay.json``: fit the serving model's
named constants (host time per engine step, per engine and GPU chip) to a user's own benchmark
results, report them before → after with the hold-out TTFT/TPOT MAPE before → after, and write
the overlay that ``--calibration`` applies (``plena_opt.validate.calibrate_serving``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from plena_opt.cli.validate_cmd import add_bench_flags, bench_target
from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.api.calibration import CalibrationOverlay


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit the serving constants to your own benchmark results (a --calibration overlay)",
        description="Price every row of a serving results file (the validate --measurements "
        "CSV schema, or a vllm bench serve / SGLang bench_serving result file with its "
        "deployment) under load, fit host_step_seconds per (engine, GPU chip) on the rows "
        "outside a seeded hold-out of whole deployments, and print the constants before -> "
        "after and the hold-out TTFT/TPOT MAPE before -> after. --out writes the overlay that "
        "estimate, search, capacity and validate apply with --calibration, and the gRPC server "
        "(plena-opt serve --calibration) and the web UI (plena-opt ui --calibration) apply to "
        "every request they price under load.",
    )
    p.add_argument(
        "--measurements",
        metavar="FILE.csv",
        required=True,
        help="serving results CSV ('shipped': the packaged one) or a benchmark result file",
    )
    p.add_argument(
        "--out", metavar="FILE.json", help="write the overlay here (default: report only)"
    )
    p.add_argument("--json", action="store_true", help="print the overlay as JSON")
    p.add_argument(
        "--holdout",
        type=float,
        default=0.25,
        metavar="FRACTION",
        help="share of the deployment groups held out for the before/after figures, 0.05-0.5",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the hold-out draw (same seed, same split; default 0)",
    )
    add_bench_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from plena_opt.validate.calibrate_serving import (
        bench_measurements,
        calibrate,
        csv_measurements,
    )
    from plena_opt.validate.serving_score import shipped_serving_csv

    if not 0.05 <= args.holdout <= 0.5:
        raise PlenaInputError("holdout", f"--holdout must be 0.05 to 0.5; got {args.holdout:g}")
    if not 0 <= args.seed < 2**63:
        raise PlenaInputError("seed", f"--seed must be 0 to 2**63 - 1; got {args.seed}")
    if args.out and not Path(args.out).resolve().parent.is_dir():  # said before a minutes-long fit
        raise PlenaInputError("out", f"--out {args.out}: no folder {Path(args.out).parent} to "
                              "write the overlay in")  # fmt: skip
    path = shipped_serving_csv() if args.measurements == "shipped" else Path(args.measurements)
    if not path.is_file():
        raise PlenaInputError("measurements", f"--measurements: no file {path.name[:64]}")
    target = bench_target(args, path)
    m = csv_measurements(path) if target is None else bench_measurements(path, target)  # type: ignore[arg-type]
    overlay = calibrate(m, args.holdout, args.seed)
    if args.out:
        Path(args.out).write_text(overlay.to_json() + "\n", encoding="utf-8")
    if args.json:
        print(overlay.to_json())
        return 0
    _print(overlay, args.out)
    return 0


def _pct(v: float | None) -> str:
    return f"{v:.1f} %" if v is not None else "-"


def _print(ov: CalibrationOverlay, out: str | None) -> None:
    h = ov.holdout
    print(f"fitted on {ov.fitted_on}: {ov.rows_priced} rows priced; hold-out {h.groups} "
          f"{h.by} groups ({h.rows} rows), seed {h.seed}, fraction {h.fraction:g}")  # fmt: skip
    head = f"{'constant':18} {'engine':7} {'chip':10} {'before':>10} {'after':>10}"
    print(f"{head} {'fit rows':>8} {'held':>5} {'TTFT MAPE before -> after':>26} "
          f"{'TPOT MAPE before -> after':>26}")  # fmt: skip
    floor = "  (at 0: the model's TPOT is at or above the measured; a host time is never < 0)"
    for c in ov.constants:
        ttft = f"{_pct(c.holdout_ttft_mape_before)} -> {_pct(c.holdout_ttft_mape_after)}"
        tpot = f"{_pct(c.holdout_tpot_mape_before)} -> {_pct(c.holdout_tpot_mape_after)}"
        print(f"{c.name:18} {c.engine:7} {c.chip[:10]:10} {1e3 * c.default:8.3f}ms "
              f"{1e3 * c.value:8.3f}ms {c.fitted_on_rows:8d} {c.holdout_rows:5d} "
              f"{ttft:>26} {tpot:>26}{floor if c.value == 0 else ''}")  # fmt: skip
    print(f"hold-out TTFT MAPE {_pct(h.ttft_mape_before)} -> {_pct(h.ttft_mape_after)}, "
          f"TPOT MAPE {_pct(h.tpot_mape_before)} -> {_pct(h.tpot_mape_after)}")  # fmt: skip
    if out:
        print(f"wrote {out} (apply with --calibration {out})")
