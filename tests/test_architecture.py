"""The dependency rules of docs/ARCHITECTURE.md, checked by reading every module's imports.

deepstack ← chip/memory/models ← estimate ← search / simulator ← api (use cases) ←
{cli, server, web}; ``plena_opt.errors``, ``plena_opt.vocabulary``, ``plena_opt.lazy``,
``plena_opt.stop``, ``plena_opt.bounds`` and ``plena_opt.jsonio`` are leaves every layer may use;
the generated ``plena_proto`` imports nothing of ours and the client imports only it. A module
may import its own package and lower layers, never a peer package of its layer (the front ends'
exceptions are listed), and never a private (``_name``) name of another package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {
    "plena_opt": REPO,
    "deepstack": REPO / "DeepStack",
    "plena_server": REPO / "server",
    "plena_client": REPO / "client",
    "plena_proto": REPO / "proto" / "python",
}
# Lower number = lower layer. A package is the first two dotted parts for plena_opt, else one.
LAYER = {
    "deepstack": 0,
    "plena_opt.errors": 1,
    "plena_opt.vocabulary": 1,
    "plena_opt.lazy": 1,
    "plena_opt.stop": 1,  # deadline/cancel token of long work (simulation, re-check, server)
    "plena_opt.bounds": 1,  # ranges of physical inputs and request sizes (every front end)
    "plena_opt.jsonio": 1,  # strict JSON output (no non-finite numbers)
    "plena_opt.chip": 2,
    "plena_opt.memory": 2,
    "plena_opt.models": 2,
    "plena_opt.estimate": 3,
    "plena_opt.search": 4,
    "plena_opt.simulator": 4,
    "plena_opt.export": 4,  # serving-engine launch arguments of a plan (reads estimate.plan)
    "plena_opt.serving": 4,  # serving under load: workload, engine scheduler, steady state, replay
    "plena_opt.api": 5,
    "plena_opt.validate": 5,  # the accuracy scorecard and calibration: a use case
    "plena_opt": 5,  # the package itself: the library API (re-exports the use cases)
    "plena_opt.cli": 6,
    "plena_opt.web": 6,
    "plena_server": 6,
}
# Imports allowed although no layer rule admits them: (importing package, imported package).
ALLOWED = {
    ("plena_opt.memory", "plena_opt.chip"),  # a memory's clock scale reads the chip clock
    ("plena_opt.jsonio", "plena_opt.errors"),  # a non-finite number is a PlenaInputError
    ("plena_opt.bounds", "plena_opt.errors"),  # a request size out of range is a PlenaInputError
    ("plena_opt.cli", "plena_client"),  # remote mode of the CLI uses the client library
    ("plena_opt.cli", "plena_server"),  # `plena-opt serve` starts the server
    ("plena_opt.cli", "plena_opt.web"),  # `plena-opt ui` starts the web app
}
PROTO_USERS = {"plena_opt.api", "plena_opt.cli", "plena_server", "plena_client"}


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "plena_opt" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def first_party(module: str) -> bool:
    return module.split(".")[0] in ROOTS


def check_source(module: str, source: str) -> list[str]:
    """The rule violations of one module (``module`` its dotted name, ``source`` its text)."""
    own = package_of(module)
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                parent = module.split(".")[: -node.level]
                base = ".".join([*parent, base] if base else parent)
            targets = [(base, alias.name) for alias in node.names]
        else:
            continue
        for target, name in targets:
            if not first_party(target):
                continue
            pkg = package_of(target)
            if name and name.startswith("_") and not name.startswith("__") and pkg != own:
                out.append(f"{module}: imports private name {name} of {target}")
            if pkg == own or (own, pkg) in ALLOWED:
                continue
            if pkg == "plena_proto":
                if own not in PROTO_USERS:
                    out.append(f"{module}: imports {target} (generated API) below the use cases")
                continue
            if own in ("plena_proto", "plena_client"):
                out.append(f"{module}: imports {target} ({own} imports only plena_proto)")
                continue
            if own == "deepstack":
                out.append(f"{module}: imports {target} (deepstack imports nothing of ours)")
                continue
            low, high = LAYER.get(pkg), LAYER.get(own)
            if low is None or high is None or low >= high:
                out.append(f"{module}: imports {target} (layer {high} may not import {low})")
    return out


def product_modules() -> dict[str, Path]:
    """Every first-party module of the product (not tests, benchmarks or generated stubs)."""
    mods = {}
    for top, root in ROOTS.items():
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts[-1].endswith(("_pb2", "_pb2_grpc")):
                continue
            mods[".".join(parts)] = path
    return mods


def test_every_package_of_the_product_has_a_layer():
    packages = {package_of(m) for m in product_modules()}
    assert packages - set(LAYER) == {"plena_proto", "plena_client"}


def test_the_product_keeps_the_dependency_rules():
    problems = []
    for module, path in product_modules().items():
        problems += check_source(module, path.read_text())
    assert problems == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("plena_opt.estimate.x", "from plena_opt.search import runner", "layer 3 may not import 4"),
        ("plena_opt.search.x", "import plena_opt.simulator.report", "layer 4 may not import 4"),
        ("plena_opt.api.x", "from plena_opt.cli.common import f", "layer 5 may not import 6"),
        ("plena_server.x", "from plena_opt.cli import serve_cmd", "layer 6 may not import 6"),
        ("plena_client.x", "from plena_opt.errors import E", "imports only plena_proto"),
        ("plena_opt.search.x", "from plena_proto import plena_opt_pb2", "generated API"),
        ("deepstack.x", "from plena_opt.errors import E", "deepstack imports nothing"),
        ("plena_opt.cli.x", "from plena_opt.search.runner import _Search", "private name"),
        ("plena_opt.estimate.sub.x", "from ...search import runner", "layer 3 may not import 4"),
    ],
)
def test_a_broken_rule_is_reported(module, source, expected):
    problems = check_source(module, source)
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("plena_opt.search.x", "from plena_opt.estimate.plan import Plan"),
        ("plena_opt.cli.x", "from plena_opt import api"),
        ("plena_opt.estimate.x", "from plena_opt.estimate.plan import _private"),
        ("plena_opt.memory.x", "import numpy\nfrom plena_opt.vocabulary import OVERLAP_POLICIES"),
        ("plena_client.x", "from plena_proto import plena_opt_pb2 as pb"),
    ],
)
def test_an_allowed_import_passes(module, source):
    assert check_source(module, source) == []


def test_the_removed_pipeline_shim_is_gone():
    """``plena_opt.pipeline`` (the simulator's old name) was deprecated for one version and removed:
    importing it fails, so nothing can come to rely on it again."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("plena_opt.pipeline")
