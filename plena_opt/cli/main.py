"""Entry point of the ``plena-opt`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module's parser sets
``func`` (``args -> int`` exit code). User errors (:class:`PlenaInputError`, argparse errors) print
``error: …`` and exit 2 without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from plena_opt.errors import PlenaInputError

# Subcommand modules, in the order ``plena-opt --help`` lists them.
SUBCOMMAND_MODULES = (
    "plena_opt.cli.search_cmd",
    "plena_opt.cli.estimate_cmd",
    "plena_opt.cli.simulate_cmd",
    "plena_opt.cli.models_cmd",
    "plena_opt.cli.memory_cmd",
    "plena_opt.cli.noc_cmd",
    "plena_opt.cli.studies_cmd",
    "plena_opt.cli.serve_cmd",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints usage + exits 2; keep 2
        self.exit(2, f"error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="plena-opt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a subcommand not built yet
            if exc.name == name:
                continue
            raise
        module.register(sub)
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
    parser = build_parser()
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
