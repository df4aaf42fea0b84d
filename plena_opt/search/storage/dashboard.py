"""Launch optuna-dashboard on a study store (optional dependency ``plena-opt[dashboard]``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.search.storage.storage import DEFAULT_STORAGE, open_storage, storage_exists

MISSING = "optuna-dashboard is not installed; install it with: pip install 'plena-opt[dashboard]'"


def dashboard_app(storage_url: str | None = None) -> Any:
    """The optuna-dashboard WSGI application serving the store at ``storage_url``."""
    try:
        from optuna_dashboard import wsgi
    except ImportError as exc:
        raise PlenaInputError("dashboard", MISSING) from exc
    if not storage_exists(storage_url):
        raise PlenaInputError(
            "storage", f"no study store at {storage_url or DEFAULT_STORAGE}; run a search first"
        )
    return wsgi(open_storage(storage_url))


def run_dashboard(
    storage_url: str | None,
    host: str = "127.0.0.1",
    port: int = 8080,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the dashboard until interrupted (blocking); ``announce(url)`` once it listens.
    A port that cannot be bound is ``PlenaInputError("port", …)``."""
    from wsgiref.simple_server import make_server

    app = dashboard_app(storage_url)
    try:
        httpd = make_server(host, port, app)
    except OSError as exc:
        raise PlenaInputError(
            "port",
            f"cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}; "
            "choose another --port",
        ) from None
    with httpd:
        if announce is not None:
            announce(f"http://{host}:{httpd.server_port}/")
        httpd.serve_forever()
