"""fig08: fused compute + collective kernels measured on 8x H100 SXM (validation-data.md §2).

Each row is priced with the ``h100-sxm`` chip (fp16 runs at the bf16 rate) and the
``hgx-h100x8`` node: the GEMM by the fitted kernel curve, the collective by ``deepstack``; the
two are added (the measured fused kernels hide little of the collective: pricing them as fully
overlapped, ``max``, gives 43.5 % MAPE against 29.1 % for the sum). AG-GEMM all-gathers the
``[M, K]`` input (``M·K·2`` bytes assembled per GPU); GEMM-RS reduce-scatters the ``[M, N]``
output (``M·N·2`` bytes); the MoE reduce all-reduces ``ag_bytes`` = ``M·N·2/8``; EP dispatch
sends ``8·M`` tokens of ``2·N`` bytes to their top-k experts (balanced, no assumed imbalance).
Ulysses (attention + all-to-all) is not scored yet.
"""

from __future__ import annotations

import csv
from pathlib import Path

from plena_opt.validate.scorecard import Point, data_dir

CASES = ("ag_gemm", "gemm_rs", "moe_reduce_ar", "ep_a2a")


def _rows(name: str) -> list[dict[str, str]]:
    with open(data_dir() / "fig08" / f"{name}.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def fig08_points(folder: Path | None = None) -> list[Point]:
    from deepstack import Network, ParallelScheme, load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.chip.gpu import GpuPerfModel

    perf = GpuPerfModel(load_chip("h100-sxm"), "bf16", 2.0, 2.0, 2.0)
    net = Network(load_noc_profile("hgx-h100x8"))
    tp8 = ParallelScheme(tp=8)
    out: list[Point] = []
    for case in CASES:
        for i, r in enumerate(_rows(case)):
            if case == "ep_a2a":
                m, n = int(r["M"]), int(r["N"])
                cost = net.ep_all_to_all(
                    ParallelScheme(ep=8),
                    bytes_per_token=2 * n,
                    num_experts=int(r["G"]),
                    top_k=int(r["topk"]),
                    micro_batch=1,
                    seq=8 * m,
                )
                pred, meas = cost.seconds, float(r["dispatch_ms"]) * 1e-3
            else:
                m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
                gemm = float(perf.gemm(m, n, k).seconds)
                if case == "ag_gemm":
                    comm = net.all_gather(tp8, "tp", m * k * 2).seconds
                elif case == "gemm_rs":
                    comm = net.reduce_scatter(tp8, "tp", m * n * 2).seconds
                else:
                    comm = net.all_reduce(tp8, "tp", int(float(r["ag_bytes"]))).seconds
                pred, meas = gemm + comm, float(r["ref_time/ms(gpu)"]) * 1e-3
            out.append(Point("fig08", case, i, meas, pred))
    return out
