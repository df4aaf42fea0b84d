"""The repository's copy of the reference data (tests/shared) equals ../shared byte for byte.

The tests read the copy so that they pass in a clone with nothing beside it; this check keeps the
copy honest. Outside CI a missing ../shared skips it; under ``CI=true`` a missing ../shared fails
(the copy must never drift unchecked).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI, REPO, UPSTREAM

COPY = REPO / "tests" / "shared"
PARTS = ("golden", "spec", "data")  # what the tests read; design/, hooks/, README are not copied


def _files(root: Path) -> dict[str, str]:
    """Relative path → sha256 of every file under ``root/PARTS``."""
    out: dict[str, str] = {}
    for part in PARTS:
        for path in sorted((root / part).rglob("*")):
            if path.is_file():
                out[path.relative_to(root).as_posix()] = hashlib.sha256(
                    path.read_bytes()
                ).hexdigest()
    return out


def _upstream() -> Path:
    if not UPSTREAM.is_dir():
        why = f"../shared is not beside the repository (looked in {UPSTREAM})"
        if IN_CI:
            pytest.fail(why + "; under CI=true this is a failure", pytrace=False)
        pytest.skip(why)
    return UPSTREAM


def test_copy_equals_upstream_shared() -> None:
    upstream = _files(_upstream())
    copy = _files(COPY)
    assert upstream, "../shared holds none of golden/, spec/, data/"
    missing = sorted(set(upstream) - set(copy))
    extra = sorted(set(copy) - set(upstream))
    differ = sorted(k for k in set(upstream) & set(copy) if upstream[k] != copy[k])
    assert not (missing or extra or differ), (
        f"tests/shared differs from ../shared: missing {missing[:5]}, extra {extra[:5]}, "
        f"different {differ[:5]} (refresh: cp -r ../shared/{{golden,spec,data}} tests/shared/)"
    )


def test_copy_holds_what_the_tests_read() -> None:
    for name in ("distributed", "single_chip", "collectives", "invalid_plans", "timing"):
        assert (COPY / "golden" / f"{name}.json").is_file(), name
    assert any((COPY / "data" / "kernels").glob("*.csv.gz"))


def _run_copy_check(ci: str, upstream: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CI": ci, "PLENA_OPT_UPSTREAM_SHARED_DIR": str(upstream)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
         "tests/test_shared_copy.py::test_copy_equals_upstream_shared"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_missing_upstream_fails_under_ci_and_skips_outside(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    under_ci = _run_copy_check("true", absent)
    assert under_ci.returncode != 0 and "under CI=true this is a failure" in under_ci.stdout
    outside = _run_copy_check("", absent)
    assert outside.returncode == 0 and "1 skipped" in outside.stdout, outside.stdout[-2000:]


def test_a_changed_upstream_file_fails_the_check(tmp_path: Path) -> None:
    fake = tmp_path / "shared"
    for part in PARTS:
        shutil.copytree(COPY / part, fake / part)
    (fake / "golden" / "timing.json").write_text("{}")
    result = _run_copy_check("true", fake)
    assert result.returncode != 0 and "golden/timing.json" in result.stdout, result.stdout[-2000:]
