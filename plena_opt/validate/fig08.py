"""fig08: fused compute + collective kernels measured on 8x H100 SXM (validation-data.md §2).

Each row is priced with the ``h100-sxm`` chip (fp16 runs at the bf16 rate) and the
``hgx-h100x8`` node: the GEMM by the chip's fitted kernel curve, the collective by ``deepstack``
from the node's measured nccl-tests tables (``measured_collectives``: the links fitted on the
all-reduce carry NVLink SHARP and are ~1.4x too fast for an all-gather or all-to-all). GEMM and
collective overlap by the wave formula of network-model §10 (``overlap_seconds``). Byte
semantics follow the spec's per-file table:

* AG-GEMM (N already /8): all-gather assembling the ``[M, K]`` input (``M·K·2`` bytes).
* GEMM-RS (K already /8): one-shot exchange of ``M·N·2/8`` bytes per pair, then the local sum of
  the 8 received partial shards (read ``M·N·2``, write ``M·N·2/8`` bytes at the chip's
  memory-bound bandwidth).
* MoE reduce (M = tokens·activated): the same exchange in ``MOE_ROUNDS`` rounds, then the sum.
* EP dispatch: each rank's ``M`` tokens go to their ``topk`` experts (balanced routing, no
  assumed imbalance): a permute packs the ``M·topk`` copies (read ``M·2N``, write ``M·topk·2N``),
  then the all-to-all of ``M·topk/8`` tokens of ``2N`` bytes per pair.
* Ulysses (sequence-parallel all-to-all + output GEMM): the spec's all-to-all of ``ag_bytes``
  per pair on ``sp_size`` GPUs, ``ULYSSES_WAVES`` chunks, with the GEMM ``[bs·seqlen, nh·hd/sp]
  × [nh·hd/sp, out_features]``.

The fused kernels give ``COMM_SMS`` of the GPU's ``H100_SMS`` SMs to communication, so the GEMM
runs at ``(H100_SMS − COMM_SMS)/H100_SMS`` of the full-chip kernel curve and its waves count
those SMs. Nothing here is fitted on the fig08 times.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from plena_opt.validate.points import Point, data_dir

CASES = ("ag_gemm", "gemm_rs", "moe_reduce_ar", "ep_a2a", "ulysses")
# NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): the SXM5 H100 has 132 SMs.
H100_SMS = 132
# SMs the fused kernels give to communication: ``num_comm_sm`` = 16 in every fig08 Ulysses row
# (validation-data.md §2); the GEMM files do not state theirs and the same split is assumed.
COMM_SMS = 16
# Rounds of the MoE-reduce exchange and chunks of the Ulysses all-to-all (validation-data.md §2).
MOE_ROUNDS = 4
ULYSSES_WAVES = 3


@dataclass(frozen=True)
class KernelParts:
    """One fused kernel's parts (seconds): GEMM on the compute SMs, collective (latency + the
    rest), the un-overlapped memory pass before/after it, and the pipelining depth."""

    gemm: float
    hop: float
    link: float
    memory: float
    waves: int

    @property
    def seconds(self) -> float:
        return overlap_seconds(self.gemm, self.hop, self.link, self.waves) + self.memory


def overlap_seconds(compute: float, hop: float, link: float, waves: int) -> float:
    """Network-model §10: ``W`` waves of a producer overlapped with the collective (seconds)."""
    if waves > 1:
        w = waves
        return compute / w + max(compute * (w - 1) / w, hop + link * (w - 1) / w) + hop + link / w
    return compute + hop + link


def gemm_waves(m: int, n: int, tb_m: int, tb_n: int) -> int:
    """Waves of a GEMM's ``tb_m × tb_n`` output tiles over the compute SMs."""
    return math.ceil(math.ceil(m / tb_m) * math.ceil(n / tb_n) / (H100_SMS - COMM_SMS))


def _rows(name: str, folder: Path | None = None) -> list[dict[str, str]]:
    with open((folder or data_dir() / "fig08") / f"{name}.csv", newline="") as fh:
        return list(csv.DictReader(fh))


class Fig08Model:
    """Prices fig08 rows on ``h100-sxm`` + ``hgx-h100x8`` (module docstring)."""

    def __init__(self) -> None:
        from deepstack import Network, ParallelScheme, load_noc_profile

        from plena_opt.chip import load_chip
        from plena_opt.chip.gpu import GpuPerfModel

        self.perf = GpuPerfModel(load_chip("h100-sxm"), "bf16", 2.0, 2.0, 2.0)
        self.node = load_noc_profile("hgx-h100x8")
        self.net = Network(self.node)
        self.tp8 = ParallelScheme(tp=8)
        self.ep8 = ParallelScheme(ep=8)

    def _gemm(self, m: int, n: int, k: int) -> float:
        full = float(self.perf.gemm(m, n, k).seconds)
        return full * H100_SMS / (H100_SMS - COMM_SMS)

    def _memory(self, read: float, write: float) -> float:
        return float(self.perf.elementwise(read, write).seconds)

    def parts(self, case: str, r: dict[str, str]) -> KernelParts:
        """The parts of one row of ``case`` (a ``CASES`` name)."""
        if case == "ep_a2a":
            return self._ep(r)
        if case == "ulysses":
            return self._ulysses(r)
        m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
        gemm = self._gemm(m, n, k)
        if case == "ag_gemm":
            c = self.net.all_gather(self.tp8, "tp", m * k * 2)
            w = gemm_waves(m, n, int(r["tb_m"]), int(r["tb_n"]))
            return KernelParts(gemm, c.hop_seconds, c.link_seconds, 0.0, w)
        c = self.net.all_to_all(self.tp8, "tp", m * n * 2 // 8)
        total = m * n * 2
        w = (
            MOE_ROUNDS
            if case == "moe_reduce_ar"
            else gemm_waves(m, n, int(r["tb_m"]), int(r["tb_n"]))
        )
        return KernelParts(gemm, c.hop_seconds, c.link_seconds, self._memory(total, total / 8), w)

    def _ep(self, r: dict[str, str]) -> KernelParts:
        m, n, topk = int(r["M"]), int(r["N"]), int(r["topk"])
        c = self.net.ep_all_to_all(
            self.ep8,
            bytes_per_token=2 * n,
            num_experts=int(r["G"]),
            top_k=topk,
            micro_batch=1,
            seq=8 * m,
        )
        permute = self._memory(m * 2 * n, m * topk * 2 * n)
        return KernelParts(0.0, c.hop_seconds, c.link_seconds, permute, 1)

    def _ulysses(self, r: dict[str, str]) -> KernelParts:
        from deepstack import Network, ParallelScheme
        from deepstack.gpu_nodes import first_devices

        sp = int(r["sp_size"])
        bs, nh, seq, hd = (int(r[x]) for x in ("bs", "nh", "seqlen", "hd"))
        net = Network(first_devices(self.node, sp))
        c = net.all_to_all(ParallelScheme(sp=sp), "sp", int(float(r["ag_bytes"])))
        gemm = self._gemm(bs * seq, int(r["out_features"]), nh * hd // sp)
        return KernelParts(gemm, c.hop_seconds, c.link_seconds, 0.0, ULYSSES_WAVES)


def measured_seconds(case: str, r: dict[str, str]) -> float:
    """The row's measured kernel time (s)."""
    return float(r["dispatch_ms" if case == "ep_a2a" else "ref_time/ms(gpu)"]) * 1e-3


def fig08_points(folder: Path | None = None) -> list[Point]:
    """Every fig08 row as a scorecard point (model = the kernel family)."""
    model = Fig08Model()
    out: list[Point] = []
    for case in CASES:
        for i, r in enumerate(_rows(case, folder)):
            out.append(
                Point("fig08", case, i, measured_seconds(case, r), model.parts(case, r).seconds)
            )
    return out
