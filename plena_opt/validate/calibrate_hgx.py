"""Write the HGX node profiles (``python -m plena_opt.validate.calibrate_hgx DIR``): the links
fitted by ``calibrate_links``, the measured tables of ``calibrate_noc``, and each value's
provenance. Above both, so neither imports the other back.
"""

from __future__ import annotations

import json
from pathlib import Path

from plena_opt.validate.calibrate_links import (
    BANDWIDTH_REGIME_BYTES,
    LATENCY_REGIME_BYTES,
    fit_links,
)
from plena_opt.validate.calibrate_noc import (
    NODES,
    NVLINK_SOURCE,
    NocFit,
    bus_bandwidth_note,
    collectives_table,
    fit_node,
    measured_table,
    node_profile,
)


def node_provenance(folder: Path, system: str, desc: str, links, ar_fit: NocFit) -> dict:
    """Provenance of one HGX profile: each fitted value, its source and the data it was fitted on
    (``links``: a ``calibrate_links.LinkFit``)."""
    nominal = links.nominal_bps
    return {
        "source": f"{desc}: one 8-port switch level; hop latency and link bandwidth fitted on "
        f"{links.data} with deepstack's algorithms by plena_opt.validate.calibrate_links",
        "link_bandwidth": f"{links.link_bandwidth_bps / 1e9:.1f} GB/s = {links.efficiency:.3f} x "
        f"the NVLink rate per direction {nominal / 1e9:g} GB/s ({NVLINK_SOURCE}); least squares "
        f"on log time over the sizes >= {BANDWIDTH_REGIME_BYTES >> 20} MiB",
        "hop_latency": f"{links.hop_latency_s * 1e6:.3f} us per hop; least squares on log time "
        f"over the sizes <= {LATENCY_REGIME_BYTES >> 10} KiB",
        "link_fit_residuals": links.note(),
        "all_reduce": "priced from measured_allreduce for 2/4/8 GPUs in one node: NCCL reduces "
        "inside the NVSwitch (NVLS) on H100/H200, which no link carries; links fitted on the "
        f"all-reduce instead would be {ar_fit.link_bandwidth_bps / 1e9:.0f} GB/s = "
        f"{ar_fit.efficiency:.3f} x the NVLink rate (fit_node, {ar_fit.data})",
        "measured_collectives_bus_bandwidth": bus_bandwidth_note(folder, system, nominal),
    }


B300 = (
    "hgx-b300x8",
    "NVIDIA HGX B300 8-GPU, NVLink 5 + NVSwitch (1.8 TB/s bidirectional per GPU, "
    "https://acecloud.ai/blog/nvidia-hgx-b300): the same NVLink 5 fabric and NVSwitch as HGX "
    "B200, so hop latency, link bandwidth and the measured collective tables are hgx-b200x8's "
    "(no B300 collective table ships with the project). NVIDIA HGX B200 8-GPU, NVLink 5 + "
    "NVSwitch",
)
B300_TABLES = (
    "priced from measured_allreduce for 2/4/8 GPUs: hgx-b200x8's table (the same NVLink 5 "
    "NVSwitch fabric; no B300 all-reduce table ships). Pricing it from the links instead made "
    "every TP plan on HGX B300 slower than the same plan on HGX B200"
)


def write_profiles(folder: Path, out_dir: Path) -> dict:
    """Fit every HGX node's links and write ``<name>.json`` NoC profiles into ``out_dir``
    (HGX B300 takes the B200 links and tables); returns the link fits by profile name."""
    fits = {}
    for system, (name, desc, nominal) in NODES.items():
        links = fit_links(folder, system, nominal)
        fits[name] = links
        prov = node_provenance(folder, system, desc, links, fit_node(folder, system))
        prof = node_profile(
            name, links.hop_latency_s, round(links.link_bandwidth_bps, -6), 8, prov,
            measured_table(folder, system), collectives_table(folder, system),
        )  # fmt: skip
        (out_dir / f"{name}.json").write_text(json.dumps(prof.to_dict(), indent=2) + "\n")
        if system == "b200_sxm":
            prov = {k: v for k, v in prov.items() if k != "measured_collectives_bus_bandwidth"}
            prov["source"] = prov["source"].replace(desc, B300[1], 1)
            prov["all_reduce"] = B300_TABLES
            link = round(links.link_bandwidth_bps, -6)
            b300 = node_profile(
                B300[0], links.hop_latency_s, link, 8, prov,
                measured_table(folder, system), collectives_table(folder, system),
            )  # fmt: skip
            (out_dir / f"{B300[0]}.json").write_text(json.dumps(b300.to_dict(), indent=2) + "\n")
    return fits


if __name__ == "__main__":
    import sys

    import deepstack

    target = Path(deepstack.__file__).parent / "profiles"
    for n, f in write_profiles(Path(sys.argv[1]), target).items():
        print(n, f"hop {f.hop_latency_s * 1e6:.2f} us, link {f.link_bandwidth_bps / 1e9:.0f} GB/s",
              f"eff {f.efficiency:.3f};", f.note())  # fmt: skip
