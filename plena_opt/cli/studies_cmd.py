"""``plena-opt studies`` (list or repair stored studies) and ``plena-opt dashboard``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from plena_opt.api.studies import (
    DEFAULT_STORAGE,
    list_studies,
    open_storage,
    run_dashboard,
    salvage_journal,
    scan_journal,
    storage_exists,
    torn_tail_note,
)
from plena_opt.cli.commands import help_of
from plena_opt.cli.common import add_server_arg
from plena_opt.cli.conventions import ENV_STORAGE, env_default
from plena_opt.errors import PlenaInputError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "studies",
        help=help_of("studies"),
        description="List the studies in a store (default), or `studies repair`: salvage every "
        "intact record of a damaged journal file into a new file (the original is only read).",
    )
    p.add_argument(
        "action", nargs="?", choices=("list", "repair"), default="list", help="default: list"
    )
    p.add_argument(
        "--output",
        default=None,
        metavar="FILE",
        help="repair: the new journal file (default <storage>.repaired; must not exist)",
    )
    p.add_argument(
        "--storage",
        default=None,
        help=f"journal file or RDB URL (default: ${ENV_STORAGE}, else ./{DEFAULT_STORAGE})",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    add_server_arg(p, "list the studies of a plena-opt server's store instead")
    p.set_defaults(func=handle_studies, storage=env_default(ENV_STORAGE))

    d = subparsers.add_parser(
        "dashboard",
        help=help_of("dashboard"),
        description="Serve optuna-dashboard on the study store; the URL is printed once it "
        "listens.",
    )
    d.add_argument(
        "--storage",
        default=None,
        help=f"journal file or RDB URL (default: ${ENV_STORAGE}, else ./{DEFAULT_STORAGE})",
    )
    d.add_argument("--host", default="127.0.0.1", help="address to bind")
    d.add_argument("--port", type=int, default=8080, help="TCP port of the dashboard")
    d.set_defaults(func=handle_dashboard, storage=env_default(ENV_STORAGE))


def handle_repair(args: argparse.Namespace) -> int:
    """Salvage a damaged journal into a new file; exit 0 when the new file opens cleanly."""
    src = args.storage or DEFAULT_STORAGE
    if "://" in src or not storage_exists(src):
        raise PlenaInputError("storage", f"--storage {src!r}: no journal file to repair")
    dst = args.output or f"{src}.repaired"
    if Path(dst).exists():
        raise PlenaInputError("output", f"--output {dst!r} exists; choose a new file")
    before = scan_journal(src)
    counts = salvage_journal(src, dst)
    after = scan_journal(dst)
    for d in before.damage:
        print(f"damaged: {d.describe()}")
    print(
        f"wrote {dst}: {counts['kept']} intact records kept, {counts['dropped']} damaged lines "
        f"dropped, {counts['rebuilt']} lost create-trial records rebuilt, {counts['lost']} "
        f"trials lost with their only record; {src} is unchanged"
    )
    if after.damage:
        raise PlenaInputError("storage", f"{dst} still has damage: {after.damage[0].describe()}")
    rows = list_studies(open_storage(dst))
    for r in rows:
        print(f"  {r['name']}: {r['trials_completed']} scored plans, {r['n_trials']} trials")
    print(f"use it with --storage {dst} (or move it in place of {src} yourself)")
    return 0


def _list_local(storage: str | None) -> list[dict]:
    """The studies of a local store, read only: a journal's torn tail is left in place and
    reported on stderr with the command that repairs it (a listing never changes the store)."""
    if not storage_exists(storage):
        return []
    rows = list_studies(open_storage(storage, repair=False))
    url = storage or DEFAULT_STORAGE
    note = None if "://" in url else torn_tail_note(url)
    if note:
        print(f"warning: {note}", file=sys.stderr)
    return rows


def handle_studies(args: argparse.Namespace) -> int:
    if args.action == "repair":
        return handle_repair(args)
    if getattr(args, "server", None):
        from plena_opt.cli.remote import remote_studies

        rows = remote_studies(args)
        if rows is None:  # the server could not be reached (printed)
            return 1
        where = f"the store of server {args.server}"
    else:
        rows = _list_local(args.storage)
        where = args.storage or DEFAULT_STORAGE
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no studies in {where}")
        return 0
    for r in rows:
        states = ", ".join(f"{k} {v}" for k, v in sorted(r["trials_by_state"].items()))
        names = ", ".join(r["metric_names"] or [])
        print(
            f"{r['name']}: {r['trials_completed']} scored plans, {r['n_trials']} trials "
            f"({states}); objectives {names}"
        )
    return 0


def handle_dashboard(args: argparse.Namespace) -> int:
    def announce(url: str) -> None:
        print(f"optuna-dashboard on {url} (Ctrl-C to stop)", flush=True)

    if not 0 <= args.port <= 65535:
        raise PlenaInputError("port", "--port must be between 0 and 65535")
    try:
        run_dashboard(args.storage, host=args.host, port=args.port, announce=announce)
    except KeyboardInterrupt:
        return 0
    return 0
