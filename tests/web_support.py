"""Helpers for the web UI tests and benchmark: the app on a free loopback port in a thread, and
Debian's Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = os.environ.get("PLENA_CHROMIUM", "/usr/bin/chromium")


def chromium_path() -> str | None:
    """The system Chromium, or None when it is not installed."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium")


@contextmanager
def running_app(storage: str | None = None) -> Iterator[str]:
    """``create_app(storage)`` served by uvicorn on 127.0.0.1:<free port>; yields the base URL."""
    import uvicorn

    from plena_opt.web.app import create_app

    config = uvicorn.Config(create_app(storage), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the web app did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def browser() -> Iterator[object]:
    """A headless Chromium (Playwright ``Browser``) from the system package."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"], headless=True)
        try:
            yield b
        finally:
            b.close()


PLANNER_WAIT_MS = 120_000


def open_planner(b: object, url: str, errors: list[str], width: int = 1400, height: int = 1000,
                 console: bool = True) -> object:  # fmt: skip
    """A new page on the planner tab, ready (``data-planner-ready``); page errors (and console
    errors with ``console``) are appended to ``errors``."""
    pg = b.new_page(viewport={"width": width, "height": height})  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: errors.append(str(e)))
    if console:
        pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
    pg.goto(url + "/?tab=planner")
    pg.wait_for_selector("body[data-planner-ready='1']", timeout=PLANNER_WAIT_MS)
    return pg


def fill_planner(pg: object, selects: dict[str, str], fills: dict[str, str]) -> None:
    """Pick the ``selects`` (``#id`` → option) then fill the ``fills`` (``#id`` → text)."""
    for sel, value in selects.items():
        pg.select_option(sel, value)  # type: ignore[attr-defined]
    for sel, value in fills.items():
        pg.fill(sel, value)  # type: ignore[attr-defined]


def planner_job_done(client: object, body: dict, timeout_s: float = 300.0) -> dict:
    """POST ``body`` to ``/api/planner/jobs`` (a Starlette ``TestClient``) and poll the job until
    it leaves ``running``; asserts it ended ``done`` and returns its view."""
    r = client.post("/api/planner/jobs", json=body)  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    end = time.monotonic() + timeout_s
    v = r.json()
    while v["state"] == "running" and time.monotonic() < end:
        time.sleep(0.05)
        v = client.get(f"/api/planner/jobs/{v['id']}").json()  # type: ignore[attr-defined]
    assert v["state"] == "done", v.get("error")
    return v
