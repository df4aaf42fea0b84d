"""Under CI=true, a missing ../shared fails the golden replays instead of skipping them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tests: list[str], ci: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CI": ci, "PLENA_OPT_SHARED_DIR": str(tmp_path / "absent")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", *tests],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_missing_shared_fails_under_ci(tmp_path: Path) -> None:
    tests = ["tests/estimate/test_estimate_golden.py", "tests/models/test_models_catalog.py"]
    result = _run(tests, "true", tmp_path)
    assert result.returncode != 0, result.stdout[-2000:]
    assert "under CI=true this is a failure" in result.stdout


def test_missing_shared_skips_outside_ci(tmp_path: Path) -> None:
    result = _run(["tests/estimate/test_estimate_golden.py"], "", tmp_path)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "skipped" in result.stdout and "failed" not in result.stdout
