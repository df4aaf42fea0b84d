"""The HGX node measurements a NoC profile is built from: NVLink links fitted on the collectives
the switch does not help, plus the measured all-reduce and all-gather / reduce-scatter /
all-to-all tables (``calibrate_hgx`` writes the profiles).

Data: ``<sys>_custom_allreduce_vllm-0.19.0.csv.gz`` (vLLM's CUDA-graph custom all-reduce) and
``<sys>_nccl_nccl-2.29.2.csv.gz`` (nccl-tests), bf16/half, inside one node.

* **Links** (hop latency, directed link bandwidth of one 8-port switch level):
  ``plena_opt.validate.calibrate_links`` fits them on nccl-tests all-gather, reduce-scatter and
  all-to-all (2, 4, 8 GPUs), which get no in-switch reduction. They price everything no table
  covers: pipeline point-to-point, the routed EP dispatch, groups spanning nodes, KV transfer.
* **measured_allreduce** (2, 4, 8 GPUs): at each size the faster of vLLM custom and NCCL (what
  vLLM runs). On H100/H200 NCCL's all-reduce uses NVLink SHARP (NVLS: reduction inside the
  NVSwitch), faster than any link model can be; ``fit_node`` (the old all-reduce fit of the links)
  shows it: 476 GB/s on H100, above the 450 GB/s NVLink rate per direction.
* **measured_collectives** (``deepstack.measured_ops``): the nccl-tests tables themselves, for
  the groups of those sizes inside one node (the two-parameter links miss NCCL's protocol
  switches).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plena_opt.validate.calibrate import read_rows

NODES = {
    "h100_sxm": ("hgx-h100x8", "NVIDIA HGX H100 8-GPU, NVLink 4 + NVSwitch", 450e9),
    "h200_sxm": ("hgx-h200x8", "NVIDIA HGX H200 8-GPU, NVLink 4 + NVSwitch", 450e9),
    "b200_sxm": ("hgx-b200x8", "NVIDIA HGX B200 8-GPU, NVLink 5 + NVSwitch", 900e9),
}
NVLINK_SOURCE = (
    "NVLink per-GPU rate per direction: H100/H200 900 GB/s bidirectional "
    "(https://www.nvidia.com/en-us/data-center/h200/), B200 1.8 TB/s bidirectional "
    "(https://www.nvidia.com/en-us/data-center/hgx/)"
)


@dataclass(frozen=True)
class NocFit:
    hop_latency_s: float
    link_bandwidth_bps: float
    nominal_bps: float
    rows: int
    mape: float
    data: str

    @property
    def efficiency(self) -> float:
        return self.link_bandwidth_bps / self.nominal_bps


def measured_all_reduce(folder: Path, system: str, gpus: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, seconds): the faster of vLLM custom (graph) and NCCL all-reduce per size."""
    best: dict[int, float] = {}
    for r in read_rows(folder / f"{system}_custom_allreduce_vllm-0.19.0.csv.gz"):
        if r["backend"] == "vllm_graph" and int(r["num_gpus"]) == gpus:
            n = int(r["message_size"]) * 2
            best[n] = min(best.get(n, np.inf), float(r["latency"]) * 1e-3)
    for r in read_rows(folder / f"{system}_nccl_nccl-2.29.2.csv.gz"):
        if (
            r["op_name"] == "all_reduce"
            and r["nccl_dtype"] == "half"
            and int(r["num_gpus"]) == gpus
        ):
            n = int(r["message_size"]) * 2
            best[n] = min(best.get(n, np.inf), float(r["latency"]) * 1e-3)
    sizes = np.array(sorted(best), dtype=float)
    return sizes, np.array([best[int(s)] for s in sizes])


MEASURED_GROUPS = (2, 4, 8)


def measured_source(system: str) -> str:
    """Provenance of the shipped ``measured_allreduce`` table of one system."""
    return (
        f"../shared/data/kernels/{system}_custom_allreduce_vllm-0.19.0.csv.gz (vllm_graph) and "
        f"{system}_nccl_nccl-2.29.2.csv.gz (all_reduce, half): AIConfigurator (ai-dynamo/"
        "aiconfigurator @095f58a5) measurements, vLLM 0.19.0 / NCCL 2.29.2, bf16, inside one "
        "node; at each size the faster of the two (what vLLM runs)"
    )


def measured_table(folder: Path, system: str) -> dict:
    """The ``measured_allreduce`` object of a node profile: every measured group size."""
    groups = []
    for g in MEASURED_GROUPS:
        sizes, t = measured_all_reduce(folder, system, g)
        us = [float(f"{x * 1e6:.6g}") for x in t]
        groups.append({"devices": g, "bytes": [int(b) for b in sizes], "microseconds": us})
    return {"source": measured_source(system), "groups": groups}


NCCL_OPS = {
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "all_to_all": "alltoall",
}


def measured_collective(
    folder: Path, system: str, op: str, gpus: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, seconds) of nccl-tests ``op`` (``NCCL_OPS`` key), half, ``gpus`` GPUs; bytes are
    nccl-tests' size per device (``deepstack.measured_ops``)."""
    rows = {
        int(r["message_size"]) * 2: float(r["latency"]) * 1e-3
        for r in read_rows(folder / f"{system}_nccl_nccl-2.29.2.csv.gz")
        if r["op_name"] == NCCL_OPS[op] and r["nccl_dtype"] == "half" and int(r["num_gpus"]) == gpus
    }
    sizes = np.array(sorted(rows), dtype=float)
    return sizes, np.array([rows[int(s)] for s in sizes])


def collectives_table(folder: Path, system: str) -> dict:
    """The ``measured_collectives`` object of a node profile (every op, 2, 4 and 8 GPUs)."""
    out: dict = {
        "source": f"../shared/data/kernels/{system}_nccl_nccl-2.29.2.csv.gz (all_gather, "
        "reduce_scatter, alltoall; half): AIConfigurator (ai-dynamo/aiconfigurator @095f58a5) "
        "nccl-tests measurements, NCCL 2.29.2, inside one node; bytes = nccl-tests size"
    }
    for op in NCCL_OPS:
        groups = []
        for g in MEASURED_GROUPS:
            sizes, t = measured_collective(folder, system, op, g)
            us = [float(f"{x * 1e6:.6g}") for x in t]
            groups.append({"devices": g, "bytes": [int(b) for b in sizes], "microseconds": us})
        out[op] = groups
    return out


def bus_bandwidth_note(folder: Path, system: str, nominal: float) -> str:
    """nccl-tests bus bandwidth (size·(g−1)/g / time, x2 for the all-reduce) of each op at its
    largest measured size, 8 GPUs, and its fraction of the NVLink rate per direction (B/s)."""
    parts = []
    for op in ("all_reduce", *NCCL_OPS):
        if op == "all_reduce":
            sizes, t = measured_all_reduce(folder, system)
        else:
            sizes, t = measured_collective(folder, system, op)
        bus = sizes[-1] * (2 if op == "all_reduce" else 1) * 7 / 8 / t[-1]
        parts.append(
            f"{op} {bus / 1e9:.0f} GB/s = {bus / nominal:.3f} x at {sizes[-1] / 2**20:.0f} MiB"
        )
    return f"bus bandwidth, 8 GPUs, per NVLink rate {nominal / 1e9:g} GB/s: " + "; ".join(parts)


def node_profile(
    name: str,
    hop_s: float,
    link_bps: float,
    ports: int = 8,
    provenance=None,
    measured: dict | None = None,
    collectives: dict | None = None,
):
    """A one-switch node profile (``measured``: an optional ``measured_allreduce`` object,
    ``collectives`` an optional ``measured_collectives`` one)."""
    from deepstack import Level, make_hierarchy
    from deepstack.profile import profile_from_dict

    sw = Level("switch", 1, ports, hop_s, link_bps, link_bps * ports, link_bps * ports)
    one = Level("switch", 1, 1, 0.0, link_bps)
    prof = make_hierarchy(name, one, one, sw, None, provenance or {})
    if measured is None and collectives is None:
        return prof
    extra = {"measured_allreduce": measured, "measured_collectives": collectives}
    return profile_from_dict({**prof.to_dict(), **extra})


def model_all_reduce(hop_s: float, link_bps: float, sizes: np.ndarray) -> np.ndarray:
    from deepstack import Network, ParallelScheme

    net = Network(node_profile("fit", hop_s, link_bps))
    scheme = ParallelScheme(tp=8)
    return np.array([net.all_reduce(scheme, "tp", int(s)).seconds for s in sizes])


def fit_node(folder: Path, system: str) -> NocFit:
    """The links fitted on the 8-GPU all-reduce (hop latency, link bandwidth; log-time least
    squares). Not shipped: NVLS makes it faster than the NVLink rate on H100/H200; kept to say so
    in the profiles' provenance."""
    from scipy.optimize import least_squares

    sizes, t = measured_all_reduce(folder, system)
    nominal = NODES[system][2]

    def resid(x):
        return np.log(model_all_reduce(x[0] * 1e-6, x[1] * 1e9, sizes) / t)

    res = least_squares(resid, [2.0, 0.7 * nominal / 1e9], bounds=([0.01, 10], [50, 5000]))
    pred = model_all_reduce(res.x[0] * 1e-6, res.x[1] * 1e9, sizes)
    mape = float(np.mean(np.abs(pred / t - 1)))
    data = (
        f"{system}_custom_allreduce_vllm-0.19.0.csv.gz (vllm_graph) and "
        f"{system}_nccl_nccl-2.29.2.csv.gz (all_reduce, half), 8 GPUs, {len(t)} sizes"
    )
    return NocFit(res.x[0] * 1e-6, res.x[1] * 1e9, nominal, len(t), mape, data)
