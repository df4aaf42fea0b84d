"""gRPC service benchmark: Estimate latency/throughput and concurrent Search load on loopback.

Starts ``python -m plena_server`` (same code as ``plena-opt serve``) on 127.0.0.1 with a fresh
journal store, then

1. Estimate: ``--clients`` threads (one channel each) call Estimate for ``--estimate-seconds``;
   reports p50/p99 latency (ms) and throughput (calls/s).
2. Search: ``--search-clients`` threads run searches back to back for ``--search-seconds``, each
   with a ``--search-deadline`` deadline (TPE, 60 trials, 3 batch sizes, on 64 devices); reports
   searches completed, partial ones, errors, and the server's resident memory (VmRSS) over time.

Usage: ``python benchmarks/bench_grpc.py [--estimate-seconds 20] [--search-seconds 120]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import grpc
from plena_client import PlenaClient, PlenaRpcError, pb, system_spec
from plena_server.process import ServerProcess

SYSTEM = system_spec("llama-3.1-70b", "illustrative_gpu_cluster_32", "fictional_stacked_dram")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_estimate(target: str, clients: int, seconds: float) -> dict:
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop = time.monotonic() + seconds
    plans = [pb.Plan(tp=8, pp=4), pb.Plan(tp=4, pp=8), pb.Plan(tp=8, dp=4), pb.Plan(tp=2, pp=16)]

    def worker(i: int) -> None:
        with PlenaClient(target) as c:
            c.wait_ready(10)
            n = 0
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                try:
                    c.estimate(SYSTEM, plans[(i + n) % len(plans)], timeout=10)
                except PlenaRpcError:
                    errors[i] += 1
                latencies[i].append(time.perf_counter() - t0)
                n += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    lat = sorted(x for per in latencies for x in per)
    return {
        "clients": clients,
        "seconds": round(wall, 2),
        "calls": len(lat),
        "errors": sum(errors),
        "throughput_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(1e3 * lat[len(lat) // 2], 2),
        "p99_ms": round(1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2),
        "mean_ms": round(1e3 * statistics.fmean(lat), 2),
    }


def bench_search(target: str, pid: int, clients: int, seconds: float, deadline: float) -> dict:
    done = [0] * clients
    partial = [0] * clients
    rejected = [0] * clients
    errors: list[str] = []
    rss: list[tuple[float, float]] = []
    stop = time.monotonic() + seconds
    t_start = time.monotonic()

    def worker(i: int) -> None:
        with PlenaClient(target) as c:
            k = 0
            while time.monotonic() < stop:
                req = pb.SearchRequest(
                    system=system_spec("gpt-oss-20b", "torus_mesh_switch_64"),
                    options=pb.SearchOptions(
                        seed=k,
                        trials=60,
                        sampler="tpe",
                        study_name=f"bench-{i}-{k}",
                        batch_sizes=[8, 16, 32],
                        compare_exact=False,
                    ),
                )
                try:
                    res = c.search(req, timeout=deadline)
                    done[i] += 1
                    partial[i] += res.partial
                except PlenaRpcError as exc:
                    if exc.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        rejected[i] += 1  # the limit at work: back off and retry
                        time.sleep(0.5)
                        continue
                    errors.append(f"{exc.code.name}: {exc.message[:80]}")
                k += 1

    def sampler() -> None:
        while time.monotonic() < stop + deadline:
            rss.append((round(time.monotonic() - t_start, 1), round(rss_mib(pid), 1)))
            time.sleep(1.0)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    mon = threading.Thread(target=sampler, daemon=True)
    mon.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = [m for _, m in rss]
    third = max(1, len(values) // 3)
    return {
        "clients": clients,
        "seconds": seconds,
        "deadline_s": deadline,
        "searches": sum(done),
        "partial": sum(partial),
        "rejected_resource_exhausted": sum(rejected),
        "errors": len(errors),
        "error_samples": errors[:5],
        "rss_mib_first_third_max": max(values[:third]),
        "rss_mib_last_third_max": max(values[-third:]),
        "rss_mib_max": max(values),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--estimate-seconds", type=float, default=20.0)
    ap.add_argument("--search-clients", type=int, default=8)
    ap.add_argument("--search-seconds", type=float, default=120.0)
    ap.add_argument("--search-deadline", type=float, default=30.0)
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            Path(tmp) / "bench.log",
            "--workers",
            str(args.clients),
            "--max-searches",
            str(args.search_clients),
        ).start()
        try:
            pid = server.proc.pid
            with PlenaClient(server.target) as c:
                c.estimate(SYSTEM, pb.Plan(tp=8, pp=4))  # warm-up (imports, caches)
            out = {
                "rss_mib_idle": round(rss_mib(pid), 1),
                "estimate": bench_estimate(server.target, args.clients, args.estimate_seconds),
                "search": bench_search(
                    server.target,
                    pid,
                    args.search_clients,
                    args.search_seconds,
                    args.search_deadline,
                ),
            }
            with grpc.insecure_channel(server.target) as ch:
                from grpc_health.v1 import health_pb2, health_pb2_grpc

                health = health_pb2_grpc.HealthStub(ch).Check(
                    health_pb2.HealthCheckRequest(), timeout=5
                )
                out["healthy_after"] = health.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            server.terminate(30)
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
