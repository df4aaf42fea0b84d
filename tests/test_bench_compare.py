"""``benchmarks/_compare.py``: a ``--compare DIR`` child imports DIR's code, all of it.

A fake checkout (marker packages only) stands for the other tree: the child must import its
``plena_opt`` and ``deepstack``, must fail rather than take a package DIR lacks from this
checkout (plain ``PYTHONPATH`` does take it: the hazard the launcher removes), and must refuse a
run whose imports came from elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("_compare", HERE / "benchmarks" / "_compare.py")
_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_compare)

PROBE = """
import json, sys
import plena_opt, deepstack
out = {"plena_opt": plena_opt.__file__, "deepstack": deepstack.__file__, "mark": plena_opt.MARK}
try:
    import plena_proto
    out["plena_proto"] = plena_proto.__file__
except ImportError as exc:
    out["plena_proto"] = f"missing: {exc.name}"
print(json.dumps(out))
"""


def _fake_checkout(root: Path) -> Path:
    (root / "plena_opt").mkdir(parents=True)
    (root / "plena_opt" / "__init__.py").write_text('MARK = "other checkout"\n')
    (root / "DeepStack" / "deepstack").mkdir(parents=True)
    (root / "DeepStack" / "deepstack" / "__init__.py").write_text("")
    return root


def _run(cmd: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_child_imports_the_other_checkout_and_nothing_of_this_one(tmp_path: Path) -> None:
    other = _fake_checkout(tmp_path / "other")
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = _run(_compare.command(script, []), _compare.env(str(other)), tmp_path)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["mark"] == "other checkout"
    assert Path(row["plena_opt"]).resolve().is_relative_to(other.resolve())
    assert Path(row["deepstack"]).resolve().is_relative_to(other.resolve())
    # the other checkout has no plena_proto: refused, not taken from this checkout
    assert row["plena_proto"] == "missing: plena_proto"


def test_plain_pythonpath_mixes_in_this_checkout(tmp_path: Path) -> None:
    """What the launcher guards against: a package root the other checkout lacks (here
    ``plena_proto``; a DeepStack not on the path alike) is imported from the installed tree."""
    other = _fake_checkout(tmp_path / "other")
    env = _compare.env(None) | {"PYTHONPATH": f"{other}:{other / 'DeepStack'}"}
    out = _run([_compare.sys.executable, "-c", PROBE], env, tmp_path)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["mark"] == "other checkout"
    assert not row["plena_proto"].startswith("missing")
    assert not Path(row["plena_proto"]).resolve().is_relative_to(other.resolve())


def test_a_child_importing_from_elsewhere_is_refused(tmp_path: Path) -> None:
    other = _fake_checkout(tmp_path / "other")
    code = f"import sys; sys.path.insert(0, {str(HERE / 'proto' / 'python')!r}); import plena_proto"
    out = _run(_compare.command("-c", [code]), _compare.env(str(other)), tmp_path)
    assert out.returncode == 3
    assert "plena_proto" in out.stderr and str(other.resolve()) in out.stderr


def test_source_of_names_the_checkout_and_env_none_changes_nothing(tmp_path: Path) -> None:
    other = _fake_checkout(tmp_path / "other")
    code = (
        "import _compare as c, json; print(json.dumps([c.source_of(), c.source_of('deepstack')]))"
    )
    env = _compare.env(str(other))
    env["PYTHONPATH"] += f":{HERE / 'benchmarks'}"
    out = _run(_compare.command("-c", [code]), env, tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [str(other.resolve())] * 2
    base = {"PYTHONPATH": "/x", _compare.SOURCE_VAR: "/y"}
    assert _compare.env(None, base) == {"PYTHONPATH": "/x"}


def test_by_hand_runs_a_script_on_the_other_checkout(tmp_path: Path) -> None:
    other = _fake_checkout(tmp_path / "other")
    cmd = [_compare.sys.executable, _compare.LAUNCHER, "--source", str(other), "-c", PROBE]
    out = _run(cmd, _compare.env(None), tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["mark"] == "other checkout"
