"""Entry point of the ``plena-opt`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)`` (listed in
``plena_opt.cli.commands``); the module's parser sets ``func`` (``args -> int`` exit code). User
errors (:class:`PlenaInputError`, argparse errors) print ``error: …`` and exit 2 without a
traceback; work left unfinished (:class:`PlenaRunError`) prints ``error: …`` and exits 1. An
unknown flag, subcommand, choice or catalog name gets a did-you-mean. A closed stdout
(``plena-opt … | head``) ends the command quietly with exit status 141 (128 + SIGPIPE).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from plena_opt import __version__
from plena_opt.cli.calibration_flag import calibration_in_force
from plena_opt.cli.commands import COMMANDS
from plena_opt.cli.conventions import (
    ENV_SERVER,
    ENV_STORAGE,
    DefaultsFormatter,
    quiet_broken_pipe,
    suggest_in_message,
    unknown_flag_hint,
)
from plena_opt.errors import PlenaInputError, PlenaRunError

DESCRIPTION = "Choose parallelism plans for LLM serving on PLENA accelerator clusters."
EPILOG = (
    f"environment: {ENV_STORAGE} is the default --storage and {ENV_SERVER} the default --server "
    "(HOST[:PORT], port 50051 when omitted); a flag on the command line wins over its variable. "
    "Run 'plena-opt COMMAND --help' for a command's flags and their defaults."
)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # argparse's default prints usage + exits 2; keep 2
        self.exit(2, f"error: {suggest_in_message(message)}\n")


def _chosen(argv: Sequence[str] | None) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option), if any."""
    for word in argv or ():
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the subcommand ``argv`` names is fully built (``argv`` None: all)."""
    parser = _Parser(prog="plena-opt", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
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


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parse_args`` whose unknown-flag error suggests the chosen subcommand's closest flag."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        target = sub.choices.get(getattr(args, "command", None) or "", parser)
        parser.error(unknown_flag_hint(extras, target))
    return args


def error_text(exc: PlenaInputError) -> str:
    """The message, prefixed with the field when the message does not already name it (e.g.
    ``layers.L2.shape: ring size must be even``); reference-worded messages (``exc.bare``) print
    as they are."""
    msg = str(exc)
    field = exc.field or ""
    names = (field, field.replace("_", "-"))
    if exc.bare or not field or field in ("request", "profile") or any(n in msg for n in names):
        return msg
    return f"{field}: {msg}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = _parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with calibration_in_force(args):
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:  # `plena-opt … | head`: the reader has all it wants
        return quiet_broken_pipe()
    except PlenaInputError as exc:
        print(f"error: {suggest_in_message(error_text(exc))}", file=sys.stderr)
        return 2
    except PlenaRunError as exc:  # work left unfinished (not bad input): exit 1
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # an unreadable input or unwritable output file named by the user
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
