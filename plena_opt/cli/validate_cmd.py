"""``plena-opt validate``: the accuracy scorecard against the public measurements shipped."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="score the model against shipped public measurements (MAPE per dataset and model)",
        description="Price every public measurement the package ships (fig09: vLLM decode "
        "tokens/s on 8x B200, TP 8, 1k/1k, batch 1-512) and print, per dataset and per model, "
        "the points, MAPE, signed bias and worst point. No constant is fitted on these points.",
    )
    p.add_argument("--json", action="store_true", help="print the scorecard as JSON")
    p.add_argument("--points", action="store_true", help="also list every point")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
