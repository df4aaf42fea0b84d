"""What `plena-opt --help` imports, and how long it takes: this tree beside another revision.

    python benchmarks/bench_cli_import.py [--base REV] [--runs N]

Both trees run from a temporary folder with ``PYTHONPATH`` naming their package roots, so the
only difference is the code. For each tree: the median wall time of ``main(["--help"])`` in a
fresh interpreter (N runs), the modules it imports (``-X importtime``), and whether scipy, optuna,
grpc, numpy, the simulator (``plena_opt.simulator``, before the rename ``plena_opt.pipeline``) or
the server (``plena_server``) are among them.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import _compare  # benchmarks/ is the script's folder

REPO = Path(__file__).resolve().parents[1]
ROOTS = (".", "DeepStack", "server", "client", "proto/python")
# the simulator was ``plena_opt.pipeline`` before the rename (older --base revisions)
HEAVY = (
    "scipy",
    "optuna",
    "grpc",
    "numpy",
    "plena_opt.simulator",
    "plena_opt.pipeline",
    "plena_server",
)
CODE = (
    "import sys\nfrom plena_opt.cli.main import main\n"
    "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
)


def _export(rev: str, into: Path) -> Path:
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), rev], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def _run(tree: Path, cwd: Path, importtime: bool) -> tuple[float, str]:
    flags = ("-X", "importtime") if importtime else ()
    t = time.perf_counter()
    out = subprocess.run(
        _compare.command("-c", [CODE], flags),
        cwd=cwd,
        env=_compare.env(str(tree)),
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"{tree}: {out.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - t, out.stderr


def measure(tree: Path, cwd: Path, runs: int) -> dict:
    wall = statistics.median(_run(tree, cwd, False)[0] for _ in range(runs))
    _, log = _run(tree, cwd, True)
    modules = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", log, flags=re.M)
    heavy = [h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules)]
    return {"wall_ms": wall * 1e3, "modules": len(modules), "heavy": heavy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="revision to compare with (default main)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = _export(args.base, Path(tmp))
        results = {
            args.base: measure(base, Path(tmp), args.runs),
            "this tree": measure(REPO, Path(tmp), args.runs),
        }
    for name, r in results.items():
        print(
            f"{name:>10}: {r['wall_ms']:7.1f} ms, {r['modules']:5d} modules, "
            f"heavy: {', '.join(r['heavy']) or 'none'}"
        )
    a, b = results[args.base], results["this tree"]
    speed, fewer = a["wall_ms"] / b["wall_ms"], a["modules"] / b["modules"]
    print(f"ratio: {speed:.1f}x faster, {fewer:.1f}x fewer modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
