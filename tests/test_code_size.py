"""Module and function size limits of the product code (HELPERS.md standards, issue 11).

Every product module (``plena_opt``, ``plena_server``, ``plena_client``, ``plena_proto``,
``deepstack``; generated ``*_pb2*`` stubs excluded) has at most :data:`MAX_MODULE_LINES` lines
and every function or method at most :data:`MAX_FUNCTION_LINES` (``def`` line to its last line,
decorators excluded; a nested function counts in its parent and on its own). A module or
function that must stay above the limits is listed in :data:`ALLOWED` with the reason (empty
now); the list only shrinks: a new offender fails, and so does an entry that no longer offends.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_architecture import REPO, product_modules

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

# "path" for a module, "path::qualified.name" for a function; the value says why it is allowed.
ALLOWED: dict[str, str] = {}


def measure(source: str, path: str) -> dict[str, int]:
    """Offenders of one module: ``path`` → its line count if above the module limit, and
    ``path::qualname`` → length of every function above the function limit."""
    out: dict[str, int] = {}
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        out[path] = lines

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                length = child.end_lineno - child.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out[f"{path}::{name}"] = length
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def offenders() -> dict[str, int]:
    """Every offender of the product code, keyed as in :data:`ALLOWED`."""
    out: dict[str, int] = {}
    for path in product_modules().values():
        out.update(measure(path.read_text(), path.relative_to(REPO).as_posix()))
    return out


def test_the_product_code_has_no_new_oversized_module_or_function():
    found = offenders()
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert new == {}, (
        f"above {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function: {new}"
    )


def test_the_allow_list_only_holds_current_offenders():
    stale = sorted(set(ALLOWED) - set(offenders()))
    assert stale == [], f"no longer above the limits; remove from ALLOWED: {stale}"


def test_every_allowed_entry_names_a_product_file():
    files = {p.relative_to(REPO).as_posix() for p in product_modules().values()}
    assert {k.split("::")[0] for k in ALLOWED} <= files
    assert all(reason.strip() for reason in ALLOWED.values())


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}():\n{body}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_function("f", 80), {"m.py::f": 81}),
        (_function("f", 79), {}),
        ("class C:\n" + _function("method", 85, "    "), {"m.py::C.method": 86}),
        (
            "def outer():\n" + _function("inner", 81, "    "),
            {"m.py::outer": 83, "m.py::outer.inner": 82},
        ),
        ("async " + _function("g", 90), {"m.py::g": 91}),
        ("x = 1\n" * 401, {"m.py": 401}),
        ("x = 1\n" * 400, {}),
    ],
)
def test_the_measure_finds_each_kind_of_offender(source: str, expected: dict[str, int]):
    assert measure(source, "m.py") == expected


def test_a_new_offender_and_a_stale_entry_are_reported(tmp_path: Path, monkeypatch):
    """The two rules on a fake tree: one file too long and one allow-list entry that fits."""
    import tests.test_code_size as mod

    big, small = tmp_path / "big.py", tmp_path / "small.py"
    big.write_text("x = 1\n" * 401)
    small.write_text(_function("f", 3))
    monkeypatch.setattr(mod, "REPO", tmp_path)
    monkeypatch.setattr(mod, "product_modules", lambda: {"big": big, "small": small})
    monkeypatch.setattr(mod, "ALLOWED", {"small.py::f": "fits now"})
    with pytest.raises(AssertionError, match="big.py"):
        mod.test_the_product_code_has_no_new_oversized_module_or_function()
    with pytest.raises(AssertionError, match="small.py::f"):
        mod.test_the_allow_list_only_holds_current_offenders()
