"""Shared test fixtures: the location of ../shared (specs, golden vectors, validation data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside the repository")
    return SHARED


def load_golden(name: str) -> dict:
    """Load ``../shared/golden/<name>.json``."""
    return json.loads((SHARED / "golden" / f"{name}.json").read_text())
