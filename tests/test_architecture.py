"""The dependency rules of docs/ARCHITECTURE.md, checked by reading every module's imports.

deepstack ← chip/memory/models ← estimate ← search / simulator ← api (use cases) ←
{cli, server, web}; ``plena_opt.errors``, ``plena_opt.vocabulary``, ``plena_opt.lazy``,
``plena_opt.stop``, ``plena_opt.bounds``, ``plena_opt.jsonio`` and ``plena_opt.metrics`` are leaves
every layer may use;
the generated ``plena_proto`` imports nothing of ours and the client imports only it. A module
may import its own package and lower layers, never a peer package of its layer (the front ends'
exceptions are listed), and never a private (``_name``) name of another package. A front end
(cli, web, server) imports only ``plena_opt.api`` (its use cases and the re-export modules that
name what a front end shows: ``api.catalog``, ``api.studies``, ``api.search_io``,
``api.simulation_io``, ``api.launch``, ``api.network``), the use case ``plena_opt.validate``, the
package ``plena_opt`` itself, the leaves and the exceptions listed. No import cycle exists
anywhere, imports inside functions counted, and none between the sub-packages of a package.
Each rule is shown failing on a small fake tree.
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
    "plena_opt.metrics": 1,  # the metric registry (name, unit, direction, interval)
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
FRONT_ENDS = {"plena_opt.cli", "plena_opt.web", "plena_server"}
# What a front end may import besides its own package and the ALLOWED exceptions: the use cases
# (``plena_opt.api``; ``plena_opt.validate``, the scorecard use case; ``plena_opt``, the library
# API), the leaves, and the generated API. Never chip, memory, models, estimate, search,
# simulator, serving, export or deepstack: their names reach a front end through ``api``.
FRONT_END_MAY_IMPORT = {
    "plena_opt",
    "plena_opt.api",
    "plena_opt.validate",
    "plena_proto",
    *(pkg for pkg, layer in LAYER.items() if layer == 1),
}


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
            if target == "plena_opt" and f"plena_opt.{name}" in LAYER:  # from plena_opt import x
                target = f"plena_opt.{name}"
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
            elif own in FRONT_ENDS and pkg not in FRONT_END_MAY_IMPORT:
                out.append(f"{module}: imports {target} (a front end imports only plena_opt.api)")
    return out


def product_modules(roots: dict[str, Path] | None = None) -> dict[str, Path]:
    """Every first-party module of the product (not tests, benchmarks or generated stubs); with
    ``roots`` (top package → the folder holding it), those packages' modules."""
    mods = {}
    for top, root in (ROOTS if roots is None else roots).items():
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
        ("plena_opt.cli.x", "from plena_opt.api.searches import _Search", "private name"),
        (
            "plena_opt.cli.x",
            "from plena_opt.search.storage.storage import S",
            "front end imports only",
        ),
        ("plena_opt.web.x", "def f():\n    import plena_opt.simulator.engine", "front end imports"),
        ("plena_server.x", "from plena_opt import estimate", "front end imports only"),
        ("plena_opt.cli.x", "import deepstack", "front end imports only"),
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
        ("plena_server.x", "from plena_opt.api.studies import open_storage"),
        ("plena_opt.web.x", "from plena_opt.errors import PlenaInputError"),
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


# --- import cycles --------------------------------------------------------------------------


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs (module level and inside functions), not those under
    ``if TYPE_CHECKING:`` (read by type checkers only)."""
    out: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module → the modules of ``modules`` it imports (``from a import b``: ``a.b`` when that is
    a module, else ``a``; a relative import resolved against the module's package)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [(alias.name, None) for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                names = [(base, alias.name) for alias in node.names]
            for base, name in names:
                target = f"{base}.{name}" if f"{base}.{name}" in modules else base
                while target and target not in modules:  # import a.b.c → the module a.b
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(component)
    return cycles


def test_no_import_cycle():
    """No import cycle anywhere in the product (plena_opt, deepstack, the server, the client),
    imports inside functions counted, cycles inside one package too."""
    cycles = import_cycles(import_graph(product_modules()))
    assert [sorted(c) for c in cycles] == []


def sub_package_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Sub-package → the sibling sub-packages its modules import (``plena_opt.search.run`` →
    ``plena_opt.search.fronts``, …); modules beside a package's ``__init__`` belong to none."""

    def node(module: str) -> str | None:
        parts = module.split(".")
        depth = 3 if parts[0] == "plena_opt" else 2
        head = ".".join(parts[:depth])
        if len(parts) > depth and head in modules and modules[head].name == "__init__.py":
            return head
        return None

    out: dict[str, set[str]] = {}
    for module, targets in import_graph(modules).items():
        if (a := node(module)) is not None:
            out.setdefault(a, set())
            for b in filter(None, map(node, targets)):
                if b != a and b.rpartition(".")[0] == a.rpartition(".")[0]:
                    out[a].add(b)
    return out


def test_no_cycle_between_sub_packages():
    """The sub-packages of one package import each other in one direction only (a layering
    inside the package: ``plena_opt.search``'s space, fronts, storage, serving, run, …)."""
    assert import_cycles(sub_package_graph(product_modules())) == []


def test_a_cycle_between_sub_packages_is_found(tmp_path):
    """Modules without a cycle between them, in two sub-packages that import each other."""
    modules = _fake_tree(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/up/__init__.py": "",
            "fake/up/a.py": "from fake.down import b\n",
            "fake/down/__init__.py": "",
            "fake/down/b.py": "",
            "fake/down/c.py": "def f():\n    import fake.up.a\n",
            "fake/top.py": "import fake.up.a\nimport fake.down.c\n",  # beside: in no sub-package
        },
    )
    assert import_cycles(import_graph(modules)) == []
    assert import_cycles(sub_package_graph(modules)) == [{"fake.up", "fake.down"}]


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    """Write ``files`` (path under tmp_path → source) and return their modules."""
    for rel, source in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    tops = {rel.split("/")[0] for rel in files}
    return product_modules({top: tmp_path for top in tops})


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    modules = _fake_tree(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/a.py": "from fake import b\n",
            "fake/b.py": "def f():\n    from . import c\n",
            "fake/c.py": "def g():\n    import fake.a\n",
            "fake/d.py": "from fake.a import x\n",  # imports the cycle, is not in it
            "fake/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fake.d\n",
        },
    )
    modules["fake.d"].write_text("from fake.a import x\nimport fake.e\n")
    cycles = import_cycles(import_graph(modules))
    assert cycles == [{"fake.a", "fake.b", "fake.c"}]  # e → d only for type checkers


def test_a_front_end_reaching_under_the_use_cases_is_found_in_a_fake_tree(tmp_path):
    modules = _fake_tree(
        tmp_path,
        {
            "plena_opt/__init__.py": "",
            "plena_opt/web/__init__.py": "from plena_opt.api.studies import open_storage\n",
            "plena_opt/web/routes.py": "def f():\n    from plena_opt.search.y import s\n",
        },
    )
    problems = [p for m, path in modules.items() for p in check_source(m, path.read_text())]
    assert problems == [
        "plena_opt.web.routes: imports plena_opt.search.y (a front end imports only plena_opt.api)"
    ]
