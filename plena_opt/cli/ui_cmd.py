"""``plena-opt ui``: the simulator's local web app (needs the ``plena-opt[ui]`` extra)."""

from __future__ import annotations

import argparse
import sys

from plena_opt.cli.commands import help_of
from plena_opt.cli.conventions import ENV_STORAGE, env_default
from plena_opt.errors import PlenaInputError

MISSING = (
    "error: plena-opt ui needs FastAPI and uvicorn; install the extra: pip install 'plena-opt[ui]'"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ui",
        help=help_of("ui"),
        description="Serve the simulator's web UI: timelines of every op and why it waited, "
        "Monte Carlo statistics, traces and the studies in the store. Binds loopback by default "
        "and answers only loopback Host names, the bound address and --allowed-host names.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (0 = any free port)")
    p.add_argument(
        "--storage",
        default=None,
        help="journal file or RDB URL the studies tab reads "
        f"(default: ${ENV_STORAGE}, else ./plena-opt-studies.log)",
    )
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host is NAME (repeatable; '*.example.com' for its "
        "subdomains). Only loopback names and the bound address are answered by default, so a "
        "web page on a rebound DNS name cannot reach the app (other hosts: HTTP 400). With "
        "--host 0.0.0.0 give the names or addresses clients use (default: none)",
    )
    p.add_argument(
        "--auth-token-file",
        default=None,
        metavar="FILE",
        help="require this token on every request: 'Authorization: Bearer TOKEN', or the "
        "browser's login prompt with TOKEN as password (HTTP 401 otherwise; default: none, "
        "open to anyone who reaches the port)",
    )
    p.add_argument(
        "--calibration",
        default=None,
        metavar="FILE.json",
        help="apply the overlay plena-opt calibrate --out wrote (its fitted constants per "
        "engine and GPU chip) to every plan the app prices under load (planner searches, plan "
        "views); read once at start, a damaged file is refused then (default: none, the "
        "shipped constants)",
    )
    p.set_defaults(func=run, storage=env_default(ENV_STORAGE), applies_calibration=True)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise PlenaInputError("port", "--port must be between 0 and 65535")
    from plena_opt.api.access import read_token_file
    from plena_opt.api.calibration import applied, overlay_flag

    token = read_token_file(args.auth_token_file) if args.auth_token_file else None
    overlay = overlay_flag(args.calibration)
    try:
        import uvicorn

        from plena_opt.web.app import create_app
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("fastapi", "uvicorn", "starlette"):
            print(MISSING, file=sys.stderr)
            return 2
        raise

    class _Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.should_exit or not self.servers:  # could not bind: uvicorn said why
                return
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            url = f"http://{shown}:{port}/"
            print(f"plena-opt ui on {url} (Ctrl-C to stop)", flush=True)
            if args.open:
                import webbrowser

                webbrowser.open(url)

    app = create_app(
        args.storage, bound_host=args.host, allowed_hosts=args.allowed_host, auth_token=token
    )
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    server = _Server(config)
    try:
        with applied(overlay):  # process-wide: every request's thread prices with it
            server.run()
    except KeyboardInterrupt:
        return 0
    if not server.started:
        raise PlenaInputError("port", f"cannot serve on {args.host}:{args.port}")
    return 0
