"""Run a benchmark's child process on another checkout (``--compare DIR``), provably.

``PYTHONPATH`` alone is not enough with an editable install (``pip install -e .``): its import
finder stays on ``sys.meta_path`` and answers every import the other checkout cannot, so a
module (or a whole package root such as ``DeepStack/``) missing there is silently imported from
this checkout and the "before" row mixes both trees. The launcher here

* puts the other checkout's package roots on ``PYTHONPATH`` and names it in
  ``PLENA_BENCH_SOURCE``;
* in the child, drops the editable finders before anything of the project is imported, runs
  the benchmark script (``runpy``), then checks that every project package it imported came
  from that checkout (exit status 3 and a message otherwise).

Usage from a benchmark: ``subprocess.run(_compare.command(script, args), env=_compare.env(src),
cwd=<temporary folder>)``; a child row may add ``_compare.source_of()`` to say where it ran.
Run as ``python _compare.py SCRIPT ARGS...`` or ``python _compare.py -c CODE`` (a child), or by
hand as ``python benchmarks/_compare.py --source DIR SCRIPT ARGS...``: SCRIPT on checkout DIR,
from a temporary folder (for benchmarks without ``--compare``, e.g. ``bench_search.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SOURCE_VAR = "PLENA_BENCH_SOURCE"
ROOTS = (".", "DeepStack", "server", "client", "proto/python")  # package roots of a checkout
PACKAGES = ("plena_opt", "deepstack", "plena_server", "plena_client", "plena_proto")
LAUNCHER = str(Path(__file__).resolve())


def env(source: str | None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``source``'s package roots first on ``PYTHONPATH`` (None: the
    installed checkout, nothing changed but ``PLENA_BENCH_SOURCE`` removed)."""
    out = dict(os.environ if base is None else base)
    out.pop(SOURCE_VAR, None)
    if source:
        src = Path(source).resolve()
        out["PYTHONPATH"] = os.pathsep.join(str(src / r) for r in ROOTS)
        out[SOURCE_VAR] = str(src)
    return out


def command(script: str | Path, args: list[str], flags: tuple[str, ...] = ()) -> list[str]:
    """``python [flags] _compare.py SCRIPT ARGS...`` (SCRIPT may be ``-c`` and the code)."""
    return [sys.executable, *flags, LAUNCHER, str(script), *args]


def _drop_editable_finders() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in _name(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in _name(h)]
    sys.path_importer_cache.clear()


def _name(obj: object) -> str:
    kind = obj if isinstance(obj, type) else type(obj)
    return f"{getattr(obj, '__module__', '')}.{kind.__module__}.{kind.__qualname__}"


def source_of(package: str = "plena_opt") -> str:
    """The checkout ``package`` was imported from (its package root's parent folder for
    DeepStack and the other roots: the checkout itself)."""
    __import__(package)
    root = Path(sys.modules[package].__file__).resolve().parent.parent
    for r in ROOTS[1:]:
        if root.as_posix().endswith("/" + r):
            return str(root.parents[len(Path(r).parts) - 1])
    return str(root)


def foreign_modules(source: str) -> list[str]:
    """Imported project modules whose file is not under ``source``."""
    src = Path(source).resolve()
    bad = []
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] not in PACKAGES:
            continue
        f = getattr(mod, "__file__", None)
        if f and src not in Path(f).resolve().parents:
            bad.append(f"{name} ({f})")
    return bad


def _by_hand(source: str, argv: list[str]) -> int:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as cwd:
        script = argv[0] if argv[0] == "-c" else str(Path(argv[0]).resolve())
        return subprocess.run(command(script, argv[1:]), env=env(source), cwd=cwd).returncode


def _main(argv: list[str]) -> int:
    import runpy

    if argv[:1] == ["--source"]:
        return _by_hand(argv[1], argv[2:])
    source = os.environ.get(SOURCE_VAR)
    if source:
        _drop_editable_finders()
    if argv[:1] == ["-c"]:
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = list(argv)
        sys.path.insert(0, str(Path(argv[0]).resolve().parent))
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
    if source and (bad := foreign_modules(source)):
        print(f"error: not from {source}: {', '.join(bad[:5])}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.path.pop(0)  # this folder: the script's own folder is put back by _main
    sys.exit(_main(sys.argv[1:]))
