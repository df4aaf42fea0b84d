"""``--calibration overlay.json`` on the commands that price GPU plans under load (estimate,
search, capacity, validate): the overlay ``plena-opt calibrate`` wrote is read once and is in force
while the command runs (``plena_opt.api.calibration``). A ``--server`` request and ``search
--workers`` (other processes) do not carry it, so they refuse it by name: a server prices with the
overlay it was started with (``plena-opt serve --calibration``, ``plena-opt ui --calibration``,
which read it themselves at start: ``applies_calibration``)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from plena_opt.errors import PlenaInputError


def add_calibration_flag(parser: argparse.ArgumentParser) -> None:
    """Register ``--calibration FILE.json`` (default: none, the shipped constants)."""
    parser.add_argument(
        "--calibration",
        metavar="FILE.json",
        default=None,
        help="apply the constants plena-opt calibrate fitted (per engine and GPU chip) to "
        "every plan priced under load; local runs only (a server applies the overlay it was "
        "started with: plena-opt serve/ui --calibration; default: none, the shipped constants)",
    )


@contextlib.contextmanager
def calibration_in_force(args: argparse.Namespace) -> Iterator[None]:
    """Apply ``args.calibration`` (when given) around the command's run."""
    path = getattr(args, "calibration", None)
    if path is None or getattr(args, "applies_calibration", False):  # serve, ui: their own
        yield
        return
    for flag in ("server", "workers"):
        if getattr(args, flag, None) is not None:
            raise PlenaInputError(
                "calibration",
                f"--calibration applies to local runs only: drop --{flag} (a server prices "
                "with the overlay it was started with: plena-opt serve --calibration FILE)",
            )
    from plena_opt.api.calibration import applied, load_overlay

    with applied(load_overlay(path)):
        yield
