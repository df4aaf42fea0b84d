"""fig13 replay: DeepStack's single-level collective cases vs its archived times and NS-3.

Spec: validation-data.md §1 (case parameters s5 = t2 = 32 GB/s & 32 ns/hop, s0 = t0 = 128 GB/s &
128 ns, s2 = t1 = 512 GB/s & 128 ns; byte semantics; torus header rule
``bytes' = X + ceil(X/988)·36``; models per panel) and network-model.md §13.
A validation script, not part of the ``deepstack`` library: run
``python DeepStack/validation/fig13.py [DIR]`` for the per-panel table (``DIR`` defaults to
``../shared/data/validation/fig13`` beside the repository).
``tests/deepstack/test_deepstack_fig13.py`` imports it by path.
"""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from deepstack import Level, Network, ParallelScheme, make_hierarchy

DEFAULT_DIR = (
    Path(__file__).resolve().parents[2].parent / "shared" / "data" / "validation" / "fig13"
)

# (link bandwidth B/s, hop latency s) derived from the single-level rows (validation-data §1.1)
CASE_PARAMETERS = {
    "s5": (32e9, 32e-9),
    "t2": (32e9, 32e-9),
    "s0": (128e9, 128e-9),
    "t0": (128e9, 128e-9),
    "s2": (512e9, 128e-9),
    "t1": (512e9, 128e-9),
}
PANELS = {
    "switch/all_reduce_rabenseifner_test.csv": "switch all-reduce",
    "switch/all_gather_halving_doubling_test.csv": "switch all-gather",
    "switch/all_to_all_test.csv": "switch all-to-all",
    "torus/all_reduce_ring_test.csv": "torus all-reduce",
    "torus/all_gather_rs_ag_ag_3stage_test.csv": "torus all-gather",
    "torus/all_to_all_test.csv": "torus all-to-all",
}


def with_headers(x: int) -> int:
    """Packetised size: 36-byte header per 988-byte payload (1024-byte packets)."""
    return x + math.ceil(x / 988) * 36


def _single_level(kind: str, rows: int, cols: int, case: str) -> Network:
    bw, hop = CASE_PARAMETERS[case]
    unit = Level("switch", 1, 1, 0.0, bw)
    inner = Level(kind, rows, cols, hop, bw)
    return Network(make_hierarchy(f"fig13-{case}-{kind}-{rows}x{cols}", unit, unit, inner))


@dataclass(frozen=True)
class Fig13Row:
    """One CSV row replayed: our time and the archived DeepStack / NS-3 times (ns)."""

    panel: str
    shape: tuple[int, int]
    case: str
    nbytes: int
    ours_ns: float
    deepstack_ns: float
    ns3_ns: float | None


def model_time_ns(panel: str, shape: tuple[int, int], case: str, x: int) -> float | None:
    """Our time (ns) for one fig13 row, or ``None`` for rows outside the single-level scope."""
    if case not in CASE_PARAMETERS:
        return None
    if panel.startswith("switch"):
        n1, n2 = shape
        if n2 != 1:
            return None
        net = _single_level("switch", 1, n1, case)
        sch = ParallelScheme(tp=n1)
        if panel == "switch all-reduce":
            c = net.all_reduce(sch, "tp", x).candidates["rabenseifner"]
        elif panel == "switch all-gather":  # bytes = per-device shard; payload doubles per stage
            c = net.all_gather(sch, "tp", x * n1).candidates["recursive_doubling"]
        else:  # bytes per ordered pair
            c = net.all_to_all(sch, "tp", x)
        return (c.hop_seconds + c.link_seconds) * 1e9
    r, c_ = shape
    net = _single_level("torus2d", r, c_, case)
    n = r * c_
    if panel == "torus all-reduce":
        cost = net.all_reduce(ParallelScheme(tp=n), "tp", with_headers(x)).candidates["ring"]
        return cost.seconds * 1e9
    if panel == "torus all-to-all":
        return net.all_to_all(ParallelScheme(tp=n), "tp", with_headers(x)).seconds * 1e9
    # torus all-gather: (d−1)·[PP-ring stage of X + TP-ring stage of X·d], d×d torus
    d = r
    sch = ParallelScheme(tp=d, pp=d)
    tp = net.all_gather(sch, "tp", x * d * d).candidates["ring"]
    pp = net.all_gather(sch, "pp", x * d).candidates["ring"]
    return (tp.seconds + pp.seconds) * 1e9


def replay(folder: str | Path) -> list[Fig13Row]:
    """Replay every in-scope row of the six fig13 CSVs under ``folder``."""
    out: list[Fig13Row] = []
    for rel, panel in PANELS.items():
        with open(Path(folder) / rel, newline="") as fh:
            for row in csv.DictReader(fh):
                shape = (
                    (int(row["num_nodes_l1"]), int(row["num_nodes_l2"]))
                    if "num_nodes_l1" in row
                    else (int(row["num_nodes_x"]), int(row["num_nodes_y"]))
                )
                x = int(float(row["bytes"]))
                ours = model_time_ns(panel, shape, row["reference_case_id"], x)
                if ours is None:
                    continue
                ns3 = row["overall_time_ns_as_ns3"].strip()
                out.append(
                    Fig13Row(
                        panel,
                        shape,
                        row["reference_case_id"],
                        x,
                        ours,
                        float(row["overall_time_ns"]),
                        float(ns3) if ns3 else None,
                    )
                )
    return out


def weighted_error(pairs: list[tuple[float, float]]) -> float:
    """Σ|model − reference| / Σ reference over (model, reference) pairs."""
    den = sum(ref for _, ref in pairs)
    return sum(abs(m - ref) for m, ref in pairs) / den if den else 0.0


def main(argv: list[str] | None = None) -> int:
    """Print per-panel agreement with DeepStack's column and weighted error vs NS-3."""
    args = sys.argv[1:] if argv is None else argv
    rows = replay(args[0] if args else DEFAULT_DIR)
    print("| panel | rows | max rel. dev. vs DeepStack | weighted err. vs NS-3 (rows) |")
    print("| --- | --- | --- | --- |")
    for panel in PANELS.values():
        sel = [r for r in rows if r.panel == panel]
        dev = max(abs(r.ours_ns - r.deepstack_ns) / r.deepstack_ns for r in sel)
        ns3 = [(r.ours_ns, r.ns3_ns) for r in sel if r.ns3_ns is not None]
        print(
            f"| {panel} | {len(sel)} | {dev:.2e} | {100 * weighted_error(ns3):.2f} % ({len(ns3)}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
