"""Entry point of the ``plena-opt`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)`` (listed in
``plena_opt.cli.commands``); the module's parser sets ``func`` (``args -> int`` exit code). User
errors (:class:`PlenaInputError`, argparse errors) print ``error: …`` and exit 2 without a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from plena_opt.cli.commands import COMMANDS
from plena_opt.errors import PlenaInputError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints usage + exits 2; keep 2
        self.exit(2, f"error: {message}\n")


def _chosen(argv: Sequence[str] | None) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option), if any."""
    for word in argv or ():
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the subcommand ``argv`` names is fully built (``argv`` None: all)."""
    parser = _Parser(prog="plena-opt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    chosen = _chosen(argv)
    module = COMMANDS[chosen].module if chosen else None
    for name, command in COMMANDS.items():
        if name in sub.choices:  # registered with another command of its module
            continue
        if argv is None or command.module == module:
            importlib.import_module(command.module).register(sub)
        else:
            sub.add_parser(name, help=command.help)
    return parser


def error_text(exc: PlenaInputError) -> str:
    """The message, prefixed with the field when the message does not already name it (e.g.
    ``layers.L2.shape: ring size must be even``)."""
    msg = str(exc)
    field = exc.field or ""
    names = (field, field.replace("_", "-"))
    if not field or field in ("request", "profile") or any(n in msg for n in names):
        return msg
    return f"{field}: {msg}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PlenaInputError as exc:
        print(f"error: {error_text(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # an unreadable input or unwritable output file named by the user
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
