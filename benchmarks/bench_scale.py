"""Evaluator speed and memory from 8 to 65,536 devices (issue 15).

Two families of hierarchical NoC profiles (made up here, values in the style of DeepStack's
h200x32 and ``examples/custom_noc.py``; not a hardware specification):

* ``switch``: 8-port node switches (1.25 µs, 370 GB/s), pods of up to 32 nodes on a pod switch
  (2 µs, 50 GB/s), pods on a top switch (5 µs, 50 GB/s);
* ``torus_mesh_switch``: 4-port switches on an L2 mesh on an L3 torus (the
  ``torus_mesh_switch_64`` pattern, grown by doubling the mesh and torus sides in turn).

For every size a child process (so peak RSS is that size's alone) builds
``Evaluator(llama-3.1-70b, profile, fictional_stacked_dram, Workload())`` and measures:

* ``first_s``: ``evaluate_batch`` of every legal plan on the first evaluator of the process
  (routing and pricing every collective pattern included); ``first_cpu_s``: the CPU time of the
  same call (the fairer figure when other processes share the cores);
* ``fresh_plans_per_s``: the same plans on a new evaluator (empty layer/collective caches, the
  process's routed patterns kept); ``warm_plans_per_s``: the same evaluator again;
* ``peak_rss_mib``: the child's peak resident memory.

``exponent_first_s`` / ``exponent_rss`` are least-squares slopes of log(value) over log(devices)
for sizes ≥ 512. A size that runs past ``--timeout`` is reported as ``{"timeout_s": …}`` and ends
its family. ``--source DIR`` measures another checkout (e.g. ``git archive main``) with this script;
``--compare DIR`` measures that checkout too, size by size right before this one, so before and
after figures come from one run. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _compare  # benchmarks/ is the script's folder

SWITCH_SIZES = (8, 64, 512, 4096, 8192, 65536)
TMS_SIZES = (64, 256, 1024, 4096)
MODEL, MEMORY = "llama-3.1-70b", "fictional_stacked_dram"


def switch_profile(n: int):
    """8-port nodes, pods of ≤ 32 nodes, one top switch over the pods."""
    from deepstack.presets import make_hierarchy
    from deepstack.topology import Level

    if n % 8:
        raise ValueError("switch hierarchy needs a multiple of 8 devices")
    nodes = n // 8
    pods = max(1, nodes // 32)
    per_pod = nodes // pods

    def sw(ports: int, hop_s: float, bw: float) -> Level:
        centre = ports * bw if ports > 1 else None
        return Level("switch", 1, ports, hop_s, bw, centre, centre)

    return make_hierarchy(
        f"bench-switch-{n}",
        sw(pods, 5e-6, 50e9),
        sw(per_pod, 2e-6, 50e9),
        sw(8, 1.25e-6, 370e9),
        provenance={"source": "benchmarks/bench_scale.py (made-up values)"},
    )


def tms_profile(n: int):
    """4-port switches × L2 mesh × L3 torus; sides doubled in turn from 2×2 × 2×2 (64)."""
    from deepstack.presets import torus_mesh_switch

    k = n // 64
    if n % 64 or k & (k - 1):
        raise ValueError("torus-mesh-switch sizes are 64·4^j or 64·2·4^j")
    torus, mesh = [2, 2], [2, 2]
    step = 0
    while math.prod(torus) * math.prod(mesh) * 4 < n:
        (mesh if step % 2 == 0 else torus)[(step // 2) % 2] *= 2
        step += 1
    return torus_mesh_switch(tuple(torus), tuple(mesh), 4, name=f"bench-tms-{n}")


def child(kind: str, n: int) -> dict:
    """Measure one size in this process (called in a fresh interpreter)."""
    import resource

    from plena_opt.estimate import Evaluator, Workload
    from plena_opt.memory import load_memory
    from plena_opt.models import load_model

    noc = switch_profile(n) if kind == "switch" else tms_profile(n)
    model, memory = load_model(MODEL), load_memory(MEMORY)

    def make() -> Evaluator:
        return Evaluator(model, noc, memory, Workload())

    ev = make()
    plans = ev.legal_plans()
    t, c = time.perf_counter(), time.process_time()
    ev.evaluate_batch(plans)
    first = time.perf_counter() - t
    first_cpu = time.process_time() - c
    t = time.perf_counter()
    ev.evaluate_batch(plans)
    warm = time.perf_counter() - t
    fresh = make()
    t = time.perf_counter()
    fresh.evaluate_batch(plans)
    fresh_s = time.perf_counter() - t
    return {
        "devices": n,
        "plans": len(plans),
        "first_s": round(first, 3),
        "first_cpu_s": round(first_cpu, 3),
        "fresh_plans_per_s": round(len(plans) / fresh_s, 1),
        "warm_plans_per_s": round(len(plans) / warm, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run_child(kind: str, n: int, timeout: float, source: str | None) -> dict:
    env = _compare.env(source)
    script = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory() as cwd:  # keep the checkout's cwd off sys.path
        try:
            out = subprocess.run(
                _compare.command(script, ["--child", kind, str(n)]),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=cwd,
                check=True,
            )
        except subprocess.TimeoutExpired:
            return {"devices": n, "timeout_s": timeout}
    return json.loads(out.stdout.strip().splitlines()[-1])


def exponent(rows: list[dict], key: str) -> float | None:
    """Least-squares slope of log(key) over log(devices) for sizes ≥ 512."""
    pts = [
        (math.log(r["devices"]), math.log(r[key]))
        for r in rows
        if r.get(key, 0) > 0 and r["devices"] >= 512
    ]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return round(sum((x - mx) * (y - my) for x, y in pts) / sxx, 2)


def family(
    kind: str, sizes: list[int], timeout: float, source: str | None, compare: str | None
) -> dict:
    """One row per size; with ``compare``, the other checkout's row for the same size is
    measured right before (``before``), until it times out."""
    rows, before = [], []
    for n in sizes:
        if compare and (not before or "timeout_s" not in before[-1]):
            before.append(run_child(kind, n, timeout, compare))
            print(json.dumps({kind: {"before": before[-1]}}), file=sys.stderr)
        row = run_child(kind, n, timeout, source)
        rows.append(row)
        print(json.dumps({kind: row}), file=sys.stderr)
        if "timeout_s" in row:
            break
    out = _summary(rows)
    if compare:
        out["before"] = _summary(before)
    return out


def _summary(rows: list[dict]) -> dict:
    done = [r for r in rows if "first_s" in r]
    return {
        "sizes": rows,
        "exponent_first_s": exponent(done, "first_s"),
        "exponent_first_cpu_s": exponent(done, "first_cpu_s"),
        "exponent_rss": exponent(done, "peak_rss_mib"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--switch-sizes", default=",".join(map(str, SWITCH_SIZES)), help="comma-separated"
    )
    parser.add_argument(
        "--tms-sizes", default=",".join(map(str, TMS_SIZES)), help="comma-separated"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per size")
    parser.add_argument("--source", help="checkout to measure instead of the installed one")
    parser.add_argument(
        "--compare", help="also measure this checkout (e.g. main), size by size, as 'before'"
    )
    args = parser.parse_args()
    if args.child:
        row = child(args.child[0], int(args.child[1]))
        print(json.dumps(row | {"source": _compare.source_of()}))
        return
    result = {
        "model": MODEL,
        "memory": MEMORY,
        "source": args.source or "installed",
        "switch": family(
            "switch", _sizes(args.switch_sizes), args.timeout, args.source, args.compare
        ),
        "torus_mesh_switch": family(
            "tms", _sizes(args.tms_sizes), args.timeout, args.source, args.compare
        ),
    }
    print(json.dumps(result))


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


if __name__ == "__main__":
    main()
