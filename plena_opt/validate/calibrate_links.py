"""Fit an HGX node's NVLink link bandwidth and hop latency on the collectives that the switch
does not help: nccl-tests all-gather, reduce-scatter and all-to-all, 2, 4 and 8 GPUs, half.

Why not the all-reduce: on H100/H200 NCCL runs it with NVLink SHARP (NVLS), reducing inside the
NVSwitch, so its bus bandwidth (468 GB/s on H100, 8 GPUs) exceeds what a GPU's links carry; a
link fitted on it is 476 GB/s, above the 450 GB/s NVLink rate per direction. Everything priced
from the links (pipeline point-to-point, the routed EP dispatch, groups spanning nodes, KV
transfer) would be too fast. The all-reduce keeps its own measured table (``measured_allreduce``).

Fit (``deepstack``'s own algorithms on a one-level 8-port switch, least squares on log time):
the **link bandwidth** on the bandwidth regime (sizes ≥ ``BANDWIDTH_REGIME_BYTES``), the **hop
latency** on the latency regime (sizes ≤ ``LATENCY_REGIME_BYTES``), alternating until both settle;
the transition between them (NCCL's protocol switches) is left out of the fit and reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plena_opt.validate.calibrate_noc import measured_collective, node_profile

LINK_OPS = ("all_gather", "reduce_scatter", "all_to_all")
LINK_GROUPS = (2, 4, 8)
# Sizes (bytes per device) where the measured time is bandwidth- / latency-dominated.
BANDWIDTH_REGIME_BYTES = 16 * 2**20
LATENCY_REGIME_BYTES = 64 * 2**10
ROUNDS = 6  # alternations of the two one-parameter fits (settles to < 0.1 % in 3)


@dataclass(frozen=True)
class LinkFit:
    """Fitted NVLink hop latency (s) and link bandwidth (B/s, per direction) and residuals:
    ``residuals[(op, group)] = (bandwidth-regime MAPE, latency-regime MAPE, all-sizes MAPE)``."""

    hop_latency_s: float
    link_bandwidth_bps: float
    nominal_bps: float
    residuals: dict[tuple[str, int], tuple[float, float, float]]
    data: str

    @property
    def efficiency(self) -> float:
        """Link bandwidth / NVLink datasheet rate per direction."""
        return self.link_bandwidth_bps / self.nominal_bps

    def regime_mape(self, index: int) -> float:
        """Mean over (op, group) of one residual column (0 bandwidth, 1 latency, 2 all)."""
        return float(np.mean([r[index] for r in self.residuals.values()]))

    def note(self) -> str:
        """The residuals in one line for a profile's provenance."""
        per = ", ".join(
            f"{op} {g}: {100 * r[0]:.1f}" for (op, g), r in sorted(self.residuals.items())
        )
        return (
            f"per-size MAPE: bandwidth regime (>= {BANDWIDTH_REGIME_BYTES >> 20} MiB) "
            f"{100 * self.regime_mape(0):.1f} % ({per}); latency regime "
            f"(<= {LATENCY_REGIME_BYTES >> 10} KiB) {100 * self.regime_mape(1):.1f} %; all sizes "
            f"{100 * self.regime_mape(2):.1f} %"
        )


def model_collective(
    op: str, group: int, hop_s: float, link_bps: float, sizes: np.ndarray
) -> np.ndarray:
    """deepstack's time (s) of ``op`` over groups of ``group`` GPUs of an 8-port switch with these
    links (no measured table); ``sizes`` are nccl-tests bytes per device."""
    from deepstack import Network, ParallelScheme

    net = Network(node_profile("fit", hop_s, link_bps))
    s = ParallelScheme(tp=group, dp=8 // group)
    if op == "all_gather":
        return np.array([net.all_gather(s, "tp", int(x)).seconds for x in sizes])
    if op == "reduce_scatter":
        return np.array([net.reduce_scatter(s, "tp", int(x)).seconds for x in sizes])
    return np.array([net.all_to_all(s, "tp", int(x) // group).seconds for x in sizes])


def _fit_one(data, mask, hop: float, bw: float, which: int) -> float:
    from scipy.optimize import least_squares

    def resid(x):
        h, b = (x[0] * 1e-6, bw) if which == 0 else (hop, x[0] * 1e9)
        return np.concatenate(
            [np.log(model_collective(op, g, h, b, s[mask(s)]) / t[mask(s)]) for op, g, s, t in data]
        )

    x0, lo, hi = (hop * 1e6, 0.01, 50.0) if which == 0 else (bw / 1e9, 10.0, 5000.0)
    return float(least_squares(resid, [x0], bounds=([lo], [hi])).x[0]) * (1e-6, 1e9)[which]


def fit_links(folder: Path, system: str, nominal_bps: float) -> LinkFit:
    """Fit one system's links on its nccl-tests tables (module docstring)."""
    data = [
        (op, g, *measured_collective(folder, system, op, g)) for op in LINK_OPS for g in LINK_GROUPS
    ]
    big = lambda s: s >= BANDWIDTH_REGIME_BYTES  # noqa: E731
    small = lambda s: s <= LATENCY_REGIME_BYTES  # noqa: E731
    hop, bw = 2e-6, 0.7 * nominal_bps
    for _ in range(ROUNDS):
        bw = _fit_one(data, big, hop, bw, 1)
        hop = _fit_one(data, small, hop, bw, 0)
    residuals = {}
    for op, g, s, t in data:
        err = np.abs(model_collective(op, g, hop, bw, s) / t - 1)
        residuals[(op, g)] = tuple(float(np.mean(err[m])) for m in (big(s), small(s), s > 0))
    src = (
        f"{system}_nccl_nccl-2.29.2.csv.gz ({', '.join(LINK_OPS)}; half; "
        f"{'/'.join(map(str, LINK_GROUPS))} GPUs; {sum(len(d[2]) for d in data)} points)"
    )
    return LinkFit(hop, bw, nominal_bps, residuals, src)
