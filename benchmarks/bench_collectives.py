"""Benchmark: price every collective of every legal scheme on a 1,024-device NoC.

Profile: ``torus_mesh_switch((4, 4), (4, 4), 4)`` — a 4×4 torus (L3) of 4×4 meshes (L2) of
4-port switches (L1), DeepStack's ``torus_mesh_switch_64`` pattern scaled up (1,024 devices).
Schemes: every (tp, ep, dp, pp, cp) of powers of two with product 1,024 (1,001 schemes). Per scheme
the evaluator's collectives (analytic-model §4.4–§4.7) on its dense scheme (ep folded into dp) and
its MoE scheme (replace mode, 128 experts, top-8): TP all-reduce, CP all-reduce and all-gather,
pipeline p2p, EP dispatch routed from balanced rows (decode, 64 tokens per micro-batch) and by the
uniform closed form (prefill, 16,384 tokens), MoE-TP all-reduce. Pass 1 routes and memoises; pass
2 prices the same patterns at other message sizes (the search's steady state).

Run: ``.venv/bin/python benchmarks/bench_collectives.py`` (prints a Markdown table).
"""

from __future__ import annotations

import itertools
import time

import deepstack as ds

DEVICES = 1024
EXPERTS, TOP_K, HIDDEN = 128, 8, 4096
BYTES_PER_TOKEN = int(HIDDEN * 1.125)


def schemes() -> list[tuple[int, int, int, int, int]]:
    powers = [2**i for i in range(11)]
    out = []
    for tp, ep, dp, pp in itertools.product(powers, repeat=4):
        rest = tp * ep * dp * pp
        if DEVICES % rest == 0:
            out.append((tp, ep, dp, pp, DEVICES // rest))
    return out


def price_all(net: ds.Network, plans, scale: int) -> int:
    """Price every collective of every plan; returns the number of collectives priced."""
    count = 0
    rows = ds.moe.balanced_rows(64, EXPERTS, TOP_K)
    for tp, ep, dp, pp, cp in plans:
        dense = ds.ParallelScheme(tp=tp, cp=cp, dp=dp * ep, pp=pp)
        act = 64 * HIDDEN * scale
        net.all_reduce(dense, "tp", act)
        net.all_reduce(dense, "cp", act // 8)
        net.all_gather(dense, "cp", 2 * act)
        net.pipeline_p2p(dense, act)
        count += 4
        n = tp * ep
        ep_m, tp_m = (n, 1) if n <= EXPERTS else (EXPERTS, n // EXPERTS)
        moe = ds.ParallelScheme(tp=tp_m, ep=ep_m, cp=cp, dp=dp, pp=pp, ep1=ep_m)
        common = dict(bytes_per_token=BYTES_PER_TOKEN * scale, num_experts=EXPERTS, top_k=TOP_K)
        net.ep_all_to_all(moe, micro_batch=64, seq=1, rows=rows, **common)
        net.ep_all_to_all(moe, micro_batch=8, seq=2048, imbalance=1.2, **common)
        net.all_reduce(moe, "tp", act)
        count += 3
    return count


def rss_mib() -> float:
    """Resident set size of this process (MiB), from /proc/self/statm."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


def main() -> None:
    profile = ds.torus_mesh_switch((4, 4), (4, 4), 4)
    assert profile.num_devices == DEVICES
    plans = schemes()
    net = ds.Network(profile)
    before = rss_mib()
    t0 = time.perf_counter()
    n1 = price_all(net, plans, 1)
    first = time.perf_counter() - t0
    held = rss_mib() - before
    t0 = time.perf_counter()
    n2 = price_all(net, plans, 3)
    cached = time.perf_counter() - t0
    info = net.cache_info()
    print(f"profile {profile.name}: {DEVICES} devices, {len(plans)} schemes")
    print("| pass | collectives | wall s | µs per collective |")
    print("| --- | --- | --- | --- |")
    print(f"| first (routes + memo) | {n1} | {first:.2f} | {1e6 * first / n1:.0f} |")
    print(f"| cached (new sizes) | {n2} | {cached:.2f} | {1e6 * cached / n2:.0f} |")
    print(
        f"memo: {info['patterns']} stage patterns, {info['routes']} route segments, "
        f"{info['links']} links; pattern arrays {info['pattern_bytes'] / 2**20:.2f} MiB; "
        f"process RSS grew by {held:.0f} MiB during the first pass"
    )


if __name__ == "__main__":
    main()
