"""``plena-opt memory``: list the built-in memories and describe a memory profile (§3.5).

``describe PROFILE [--total-layers 4,8,12] [--connected-layers 2,4,8] [--json]`` tabulates layers,
connected layers, peak GB/s, efficiency, usable GB/s, capacity GiB and clock scale (GB/s = 1e9
B/s, GiB = 2**30 B, as the flags --fixed-bandwidth-gbs and --fixed-capacity-gib).
With only ``--total-layers`` each height is fully connected; connected counts above a height are
skipped. Layer flags apply to stacked-DRAM profiles only.
"""

from __future__ import annotations

import argparse
from typing import Any

from plena_opt import jsonio
from plena_opt.api.catalog import StackedDramModel, list_memory_profiles, load_memory
from plena_opt.cli.commands import help_of
from plena_opt.errors import PlenaInputError


def _int_list(text: str) -> list[int]:
    try:
        values = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _gb(num_bytes: float) -> str:
    return f"{num_bytes / 1e9:.3f}"


def _gib(num_bytes: float | None) -> str:
    return "-" if num_bytes is None else f"{num_bytes / 2**30:.3f}"


def describe_variants(
    memory: Any, total_layers: list[int] | None, connected_layers: list[int] | None
) -> list[Any]:
    """The memories ``describe`` tabulates for the layer flags (see module docstring)."""
    if not isinstance(memory, StackedDramModel):
        if total_layers or connected_layers:
            raise PlenaInputError(
                "total_layers",
                "--total-layers/--connected-layers apply to stacked_dram profiles only "
                f"({memory.name!r} is {memory.kind})",
            )
        return [memory]
    variants = []
    for total in total_layers or [memory.config.total_layers]:
        if connected_layers:
            choices = [count for count in connected_layers if count <= total]
        elif total_layers:
            choices = [total]
        else:
            choices = [memory.config.connected_layers]
        variants.extend(memory.with_layers(total, connected) for connected in choices)
    if not variants:
        raise PlenaInputError(
            "connected_layers", "no --connected-layers value fits within any --total-layers value"
        )
    return variants


def _describe(args: argparse.Namespace) -> int:
    memory = load_memory(args.profile)
    variants = describe_variants(memory, args.total_layers, args.connected_layers)
    rows = [variant.describe() for variant in variants]
    if args.json:
        print(jsonio.dumps(rows if len(rows) > 1 else rows[0], indent=2))
        return 0
    print(f"{memory.name} [{memory.kind}]")
    if isinstance(memory, StackedDramModel):
        print(
            f"{'layers':>7} {'connected':>9} {'peak GB/s':>11} {'efficiency':>10} "
            f"{'usable GB/s':>11} {'capacity GiB':>12} {'clock scale':>11}"
        )
        for row in rows:
            print(
                f"{row['total_layers']:>7} {row['connected_layers']:>9} "
                f"{_gb(row['peak_bandwidth_bytes_per_s']):>11} "
                f"{row['connectivity_efficiency']:>10.4f} "
                f"{_gb(row['usable_bandwidth_bytes_per_s']):>11} "
                f"{_gib(row['capacity_bytes']):>12} {row['compute_frequency_scale']:>11.4f}"
            )
    else:
        row = rows[0]
        capacity = (
            "not modeled" if row["capacity_bytes"] is None else f"{_gib(row['capacity_bytes'])} GiB"
        )
        print(
            f"usable bandwidth {_gb(row['usable_bandwidth_bytes_per_s'])} GB/s, capacity {capacity}"
        )
    return 0


def _list(args: argparse.Namespace) -> int:
    names = list_memory_profiles()
    if args.json:
        print(jsonio.dumps([load_memory(name).describe() for name in names], indent=2))
        return 0
    for name in names:
        memory = load_memory(name)
        print(
            f"{name:<28} {memory.kind:<16} "
            f"{memory.usable_bandwidth_bytes_per_s / 1e9:>12.6g} GB/s usable"
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``memory list`` and ``memory describe`` to the ``plena-opt`` command."""
    parser = subparsers.add_parser(
        "memory",
        help=help_of("memory"),
        description="List the memory profiles or describe one (bandwidth, capacity, clock).",
    )
    commands = parser.add_subparsers(
        dest="memory_command", required=True, help="list: built-in profiles; describe: one profile"
    )

    listing = commands.add_parser(
        "list", help="built-in memory profiles", description="List the built-in memory profiles."
    )
    listing.add_argument("--json", action="store_true", help="print each memory's describe JSON")
    listing.set_defaults(func=_list)

    describe = commands.add_parser(
        "describe",
        help="bandwidth, capacity and clock scale derived from a memory profile",
        description="Bandwidth, capacity and clock scale derived from a memory profile.",
    )
    describe.add_argument("profile", metavar="PROFILE", help="built-in name or profile JSON path")
    describe.add_argument(
        "--total-layers",
        type=_int_list,
        help="comma-separated stack heights to tabulate, fully connected (default: the profile's)",
    )
    describe.add_argument(
        "--connected-layers",
        type=_int_list,
        help="comma-separated connected-layer counts (default: all of each stack height)",
    )
    describe.add_argument("--json", action="store_true", help="print JSON")
    describe.set_defaults(func=_describe)
