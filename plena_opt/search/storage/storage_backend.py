"""The journal files opened in this process, by their storage object, and what a store's
writers and readers ask of it: batched appends, a committed view, its SQLAlchemy URL.

Below ``storage`` (which opens stores and registers their journals here), so the trial writer
(``trials``) and the gRPC proxy (``grpc_proxy``) need not import the module that imports them.
"""

from __future__ import annotations

import weakref
from contextlib import nullcontext
from typing import Any

import optuna

from plena_opt.search.storage.journal import BatchingJournalBackend

RDB_SCHEMES = ("sqlite", "postgresql", "mysql", "oracle", "mssql")

# Journal files opened here, by their storage object: weak keys, because a storage dropped from
# ``_OPEN`` is collected and an ``id()`` key could then name a new storage (an in-memory one
# picked up a damaged file's backend this way in a test run).
_BACKENDS: weakref.WeakKeyDictionary[optuna.storages.BaseStorage, BatchingJournalBackend] = (
    weakref.WeakKeyDictionary()
)


def is_batched(storage: optuna.storages.BaseStorage) -> bool:
    """Whether ``storage`` is a journal file opened here (``batch_writes`` holds its lock)."""
    return storage in _BACKENDS


def journal_backend(storage: optuna.storages.BaseStorage) -> BatchingJournalBackend | None:
    """The journal file under ``storage`` when it is one opened here, else None."""
    return _BACKENDS.get(storage)


def batch_writes(storage: optuna.storages.BaseStorage) -> Any:
    """Context in which a journal store's appends become one locked append and one fsync.

    Keep it short (it holds the journal lock: other writers wait). Other stores: no effect.
    """
    backend = _BACKENDS.get(storage)
    return backend.batch() if backend is not None else nullcontext()


def committed_view(storage: optuna.storages.BaseStorage) -> Any:
    """Context in which reads of a journal store see only records already on disk (it waits
    for this process's batches in progress). Other stores: no effect."""
    backend = _BACKENDS.get(storage)
    return backend.committed_view() if backend is not None else nullcontext()


def sqlalchemy_url(url: str) -> str:
    """``url`` as SQLAlchemy needs it: ``postgresql://`` (no driver named) uses psycopg 3, the
    driver ``pip install "plena-opt[postgres]"`` installs (SQLAlchemy's default is psycopg2)."""
    for plain in ("postgresql://", "postgres://"):
        if url.lower().startswith(plain):
            return "postgresql+psycopg://" + url[len(plain) :]
    return url
