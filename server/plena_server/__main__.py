"""``python -m plena_server [serve flags]``: the same server as ``plena-opt serve``."""

from __future__ import annotations

import argparse
import sys

from plena_opt.errors import PlenaInputError
from plena_server.flags import DESCRIPTION, add_serve_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plena_server", description=DESCRIPTION)
    add_serve_args(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.func(args) or 0)
    except PlenaInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
