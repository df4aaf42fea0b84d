"""``plena-opt serve``: run the gRPC server (health, reflection, graceful SIGTERM drain)."""

from __future__ import annotations

import argparse

from plena_opt.cli.commands import help_of


def register(subparsers: argparse._SubParsersAction) -> None:
    from plena_server.flags import DESCRIPTION, add_serve_args

    p = subparsers.add_parser("serve", help=help_of("serve"), description=DESCRIPTION)
    add_serve_args(p)
