"""Fit the HGX node profiles' NVLink hop latency and link bandwidth on measured all-reduce times.

Data: ``<sys>_custom_allreduce_vllm-0.19.0.csv.gz`` (vLLM's CUDA-graph custom all-reduce) and
``<sys>_nccl_nccl-2.29.2.csv.gz`` (nccl-tests), 8 GPUs, bf16/half. At each message size the
faster of the two is what vLLM runs; the fit chooses the hop latency (s) and directed link
bandwidth (B/s) of a one-level 8-port switch so that ``deepstack``'s own all-reduce (its
cheapest algorithm) matches those times in least squares on log time. The fitted link bandwidth
divided by the NVLink datasheet rate per direction is the collective efficiency.

The measured times themselves ship in each profile as ``measured_allreduce`` (2, 4 and 8 GPUs)
and, for all-gather, reduce-scatter and all-to-all, ``measured_collectives`` (nccl-tests): the
links fitted on the all-reduce carry NVLink SHARP's in-switch reduction and are ~1.4x too fast
for the collectives that lack it (``deepstack.measured_ops``).
groups of those shapes inside one node are priced from them (``deepstack.measured``), since the
two-parameter fit misses the protocol switches (e.g. B200 at 256-512 KB); the fitted links price
everything else (larger or multi-node groups, other collectives).
"""

from __future__ import annotations

import json
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


def write_profiles(folder: Path, out_dir: Path) -> dict[str, NocFit]:
    """Fit every HGX node and write ``<name>.json`` NoC profiles into ``out_dir``."""
    fits = {}
    for system, (name, desc, nominal) in NODES.items():
        fit = fit_node(folder, system)
        fits[name] = fit
        src = (
            f"fitted on {fit.data} with deepstack's all-reduce (per-size MAPE "
            f"{100 * fit.mape:.1f} %) by plena_opt.validate.calibrate_noc"
        )
        prov = {
            "source": f"{desc}: one 8-port switch level; hop latency and link bandwidth {src}",
            "collective_efficiency": f"link bandwidth = {fit.efficiency:.3f} x the NVLink rate per "
            f"direction {nominal / 1e9:g} GB/s ({NVLINK_SOURCE})",
            "measured_collectives_bus_bandwidth": bus_bandwidth_note(folder, system, nominal),
        }
        prof = node_profile(
            name, fit.hop_latency_s, round(fit.link_bandwidth_bps, -6), 8, prov,
            measured_table(folder, system), collectives_table(folder, system),
        )  # fmt: skip
        (out_dir / f"{name}.json").write_text(json.dumps(prof.to_dict(), indent=2) + "\n")
    return fits


if __name__ == "__main__":
    import sys

    import deepstack

    target = Path(deepstack.__file__).parent / "profiles"
    for n, f in write_profiles(Path(sys.argv[1]), target).items():
        print(n, f"hop {f.hop_latency_s * 1e6:.2f} us, link {f.link_bandwidth_bps / 1e9:.0f} GB/s",
              f"eff {f.efficiency:.3f}, MAPE {100 * f.mape:.1f} %")  # fmt: skip
