"""``plena-opt describe-noc`` and ``plena-opt collective``: inspect a NoC, price one collective.

Spec: analytic-model.md §5 (describe-noc text and JSON), network-model.md §7–§8 (collectives,
``--bytes`` contract of §7.1).
"""

from __future__ import annotations

import argparse
from typing import Any

from plena_opt import jsonio
from plena_opt.api import network
from plena_opt.api.network import DIMS, Network, ParallelScheme, ProfileError, ProfileTypeError
from plena_opt.cli.commands import help_of
from plena_opt.errors import PlenaInputError, PlenaTypeError

OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "p2p")


def _num(x: float) -> str:
    return f"{x:.6g}"


def _load(source: str) -> network.NocProfile:
    try:
        return network.load_noc_profile(source)
    except ProfileTypeError as exc:
        raise PlenaTypeError(exc.field, str(exc)) from exc
    except ProfileError as exc:
        raise PlenaInputError(exc.field, str(exc)) from exc


def describe_text(profile: network.NocProfile) -> str:
    """The analytic-model §5 text: header, one line per level, energy line."""
    lines = [f"{profile.name}: {profile.num_devices} devices (ranks fill L1 first)"]
    for name, lv in zip(("L3", "L2", "L1"), profile.levels, strict=True):
        line = (
            f"  {name}: {lv.kind} {lv.rows}x{lv.cols}, {_num(lv.link_bandwidth_bps / 1e9)} GB/s, "
            f"{_num(lv.hop_latency_s * 1e9)} ns/hop"
        )
        if lv.centre_in_bps is not None:
            line += f" (centre {_num(lv.centre_in_bps / 1e9)}/{_num(lv.centre_out_bps / 1e9)} GB/s)"
        lines.append(line)
    if profile.nic_bandwidth_bps is not None:
        lines.append(
            f"  NIC: {_num(profile.nic_bandwidth_bps / 1e9)} GB/s per device "
            "(caps each device's traffic leaving its L1 switch)"
        )
    e = profile.energy
    lines.append(
        "  energy: not modelled (no energy_pj_per_bit)"
        if e is None
        else f"  energy: l1 {_num(e.l1)} / l2 {_num(e.l2)} / l3 {_num(e.l3)} pJ/bit"
    )
    return "\n".join(lines)


def _describe(args: argparse.Namespace) -> int:
    profile = _load(args.profile)
    if args.json:
        print(jsonio.dumps(profile.describe(), indent=2))
    else:
        print(describe_text(profile))
    return 0


def price(profile: network.NocProfile, op: str, nbytes: int, dim: str, sizes: dict) -> dict:
    """Price one collective; returns the JSON document printed by ``collective --json``."""
    try:
        scheme = ParallelScheme(**sizes)
    except ProfileTypeError as exc:
        raise PlenaTypeError(exc.field, str(exc)) from exc
    except ProfileError as exc:
        raise PlenaInputError(exc.field, str(exc)) from exc
    if scheme.world_size != profile.num_devices:
        raise PlenaInputError(
            "scheme",
            f"the scheme uses {scheme.world_size} devices but NoC profile {profile.name!r} has "
            f"{profile.num_devices}; set --tp/--ep/--sp/--cp/--dp/--pp so their product matches",
        )
    if nbytes < 0:
        raise PlenaInputError("bytes", "--bytes must be >= 0")
    net = Network(profile)
    if op == "p2p":
        if dim not in ("tp", "pp"):  # tp is only the flag's default
            raise PlenaInputError("dim", "--op p2p runs across pipeline stages: use --dim pp")
        dim = "pp"
        if scheme.pp < 2:
            raise PlenaInputError("pp", "--op p2p needs --pp of at least 2 (stage boundaries)")
    calls = {
        "all-reduce": net.all_reduce,
        "all-gather": net.all_gather,
        "reduce-scatter": net.reduce_scatter,
        "all-to-all": net.all_to_all,
    }
    cost = net.pipeline_p2p(scheme, nbytes) if op == "p2p" else calls[op](scheme, dim, nbytes)
    doc: dict[str, Any] = {
        "profile": profile.name,
        "op": op,
        "dim": dim,
        "group_size": scheme.size(dim),
        "bytes": nbytes,
        **cost.to_dict(),
    }
    if op == "p2p":
        doc["boundaries"] = [b.__dict__ for b in cost.boundaries]
    return doc


def _collective(args: argparse.Namespace) -> int:
    profile = _load(args.profile)
    sizes = {d: getattr(args, d) for d in DIMS}
    doc = price(profile, args.op, args.bytes, args.dim, sizes)
    if args.json:
        print(jsonio.dumps(doc, indent=2))
        return 0
    energy = doc["noc_energy_pj"]
    print(
        f"{doc['op']} of {doc['bytes']} B over {doc['dim']} (group {doc['group_size']}) "
        f"on {doc['profile']}"
    )
    print(f"  algorithm     {doc['algorithm']}")
    print(f"  hop           {doc['hop_seconds'] * 1e6:.4f} us")
    print(f"  link          {doc['link_seconds'] * 1e6:.4f} us")
    print(f"  total         {doc['seconds'] * 1e6:.4f} us")
    print(f"  busiest link  {doc['busiest_link']}")
    print(
        "  NoC energy    "
        + (
            "not modelled (profile has no energy_pj_per_bit)"
            if energy is None
            else f"{energy:g} pJ"
        )
    )
    for name, c in doc["candidates"].items():
        text = "n/a (needs a power-of-two group)" if c is None else f"{c['seconds'] * 1e6:.4f} us"
        print(f"    {name:<20} {text}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``describe-noc`` and ``collective`` to the ``plena-opt`` command."""
    names = ", ".join(network.list_noc_profiles())
    p = subparsers.add_parser(
        "describe-noc",
        help=help_of("describe-noc"),
        description=f"Describe a NoC profile. PROFILE is a built-in name ({names}) or a JSON path.",
    )
    p.add_argument("profile", metavar="PROFILE", help="built-in NoC profile name or JSON path")
    p.add_argument("--json", action="store_true", help="print the describe() JSON document")
    p.set_defaults(func=_describe)

    c = subparsers.add_parser(
        "collective",
        help=help_of("collective"),
        description=(
            "Price one collective over every group of --dim. --bytes is the full tensor per "
            "device: the buffer an all-reduce reduces, the input a reduce-scatter splits, the "
            "output an all-gather assembles (network-model §7.1); for all-to-all it is the bytes "
            "each rank sends to each peer (the uniform closed-form EP estimate with imbalance 1, "
            "one stage); for p2p the bytes every rank of stage i sends to stage i+1. "
            f"PROFILE is a built-in name ({names}) or a JSON path; the product of the "
            "parallel degrees must equal the profile's device count. Times in seconds, "
            "energy in pJ."
        ),
    )
    c.add_argument("profile", metavar="PROFILE", help="built-in NoC profile name or JSON path")
    c.add_argument("--op", required=True, choices=OPS, help="the collective to price (required)")
    c.add_argument(
        "--bytes", required=True, type=int, help="message size in bytes, see above (required)"
    )
    c.add_argument("--dim", default="tp", choices=DIMS, help="parallel dimension (p2p: pp)")
    for d in DIMS:
        c.add_argument(f"--{d}", type=int, default=1, help=f"{d} degree (default 1)")
    c.add_argument("--json", action="store_true", help="print JSON with every candidate's cost")
    c.set_defaults(func=_collective)
