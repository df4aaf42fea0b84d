"""Shared test fixtures: the reference data the tests replay (specs, golden vectors, measurements).

The tests read ``tests/shared/``, a byte-identical copy of ``../shared/{golden,spec,data}`` kept in
the repository, so ``python -m pytest`` passes in a clone with nothing beside it.
``tests/test_shared_copy.py`` checks the copy equals ``../shared``; under ``CI=true`` that check
fails when ``../shared`` is missing. ``PLENA_OPT_SHARED_DIR`` overrides the location the tests
read (used by the test of the skip/fail rule): a missing one skips outside CI and fails under
``CI=true``, so the golden replays never pass by not running.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PLENA_OPT_SHARED_DIR") or REPO / "tests" / "shared")
# The upstream ../shared the copy must equal (``PLENA_OPT_UPSTREAM_SHARED_DIR`` overrides it).
UPSTREAM = Path(os.environ.get("PLENA_OPT_UPSTREAM_SHARED_DIR") or REPO.parent / "shared")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
MISSING = f"the reference data directory is missing (looked in {SHARED})"


def require_shared() -> Path:
    """``SHARED`` if present; else skip (outside CI) or fail (under ``CI=true``)."""
    if not SHARED.is_dir():
        if IN_CI:
            pytest.fail(MISSING + "; under CI=true this is a failure", pytrace=False)
        pytest.skip(MISSING)
    return SHARED


# For modules whose every test reads ../shared: skips outside CI only; under CI the module's
# load_golden() then raises at collection, which fails the run.
needs_shared = pytest.mark.skipif(not SHARED.is_dir() and not IN_CI, reason=MISSING)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return require_shared()


def load_golden(name: str) -> dict:
    """Load ``<SHARED>/golden/<name>.json`` (fails, never skips, under ``CI=true``)."""
    path = SHARED / "golden" / f"{name}.json"
    if not path.is_file() and IN_CI:
        raise FileNotFoundError(f"{path}: {MISSING}; under CI=true this is a failure")
    return json.loads(path.read_text())


ENV_POSTGRES = "PLENA_OPT_TEST_POSTGRES"


@pytest.fixture
def postgres_url() -> str:
    """A fresh, empty PostgreSQL database on the server ``PLENA_OPT_TEST_POSTGRES`` names
    (``postgresql://user@host:port/db``; ``.ci/run`` starts one with ``.ci/postgres.sh``).

    No server: skipped outside CI, a failure under ``CI=true``. The database is dropped after.
    """
    base = os.environ.get(ENV_POSTGRES)
    if not base:
        why = f"no PostgreSQL server: set {ENV_POSTGRES} (source .ci/postgres.sh start DIR)"
        if IN_CI:
            pytest.fail(why + "; under CI=true this is a failure", pytrace=False)
        pytest.skip(why)
    import uuid

    import psycopg

    name = f"plena_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield base.rsplit("/", 1)[0] + "/" + name
    from plena_opt.search.storage import storage

    for key in [k for k in storage._OPEN if name in k]:  # close this process's pools first
        engine = getattr(storage._OPEN.pop(key), "engine", None)
        if engine is not None:
            engine.dispose()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    """One in-process gRPC server per test module (2 workers, the default limits, a journal store
    of its own): its ``host:port`` target. A module that needs another server defines its own."""
    from plena_server.app import start_server
    from plena_server.limits import ServerLimits

    store = tmp_path_factory.mktemp("grpc") / "studies.log"
    running = start_server("127.0.0.1", 0, str(store), workers=2, limits=ServerLimits())
    yield f"127.0.0.1:{running.port}"
    running.drain(1)
