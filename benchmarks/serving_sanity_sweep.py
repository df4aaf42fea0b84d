"""Print the hardware sanity sweep over ``validate`` predictions (``validate.serving_sanity``).

Every engine × catalog checkpoint (dense and MoE; bf16 / fp8 / NVFP4 where shipped) × system
(h100_sxm … gb300, mi325x) × TP 1-8 (MoE: TP and EP experts) × concurrency × lengths is written as
a predict-only serving row, priced as ``validate --measurements`` prices it, and checked against
the invariants of ``plena_opt/validate/serving_sanity.py``. Prints rows, priced fraction, the
refusal reasons (numbers folded to ``#``), and every violation grouped by invariant.

Run from the repository root: ``python benchmarks/serving_sanity_sweep.py [--quick]``
(full grid ~25,000 rows, a few minutes on one core; ``--quick`` the test's grid).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from plena_opt.validate.serving_sanity import check, grid, price, refusals, small_grid  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the test's small grid")
    ap.add_argument("--show", type=int, default=5, help="violations printed per invariant")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = price(small_grid() if args.quick else grid())
    priced = sum(r.status == "priced" for r in res.values())
    print(f"{len(res)} rows, {priced} priced ({100 * priced / len(res):.1f} %), "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    folded: Counter[str] = Counter()
    for reason, n in refusals(res).items():
        folded[re.sub(r"\b\d+(\.\d+)?\b", "#", reason)] += n
    print("\nrefusals (rows, reason):")
    for reason, n in folded.most_common():
        print(f"  {n:6d}  {reason}")
    checked = check(res)
    vs = checked.violations
    by = Counter(v.invariant for v in vs)
    print(f"\ncomparisons: {dict(sorted(checked.compared.items()))}")
    print(f"violations: {len(vs)}")
    for inv, n in by.most_common():
        worst = max((v for v in vs if v.invariant == inv), key=lambda v: v.a_ms / v.b_ms)
        print(f"  {inv}: {n} (worst ratio {worst.a_ms / worst.b_ms:.3f})")
        for v in [v for v in vs if v.invariant == inv][: args.show]:
            print(f"    {v}")


if __name__ == "__main__":
    main()
