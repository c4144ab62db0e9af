"""The import graph of ``service/`` has no cycles and keeps its layers (:data:`LAYERS`): every import counts, those under ``TYPE_CHECKING`` and inside functions
too, since each says "this module needs that one".

Read from the source with ``ast``, nothing is imported. ``from package import name`` is an
edge to ``package.name`` when that is a module (importing a submodule runs the package's
``__init__`` first, which is not a dependency on what the ``__init__`` re-exports).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("service.mcp",),
    ("service.auth", "service.store"),
    ("service.failures", "service.probe", "service.toolcall", "service.webhooks"),
    ("service.probe_follow", "service.triggers"),
    ("service.app",),
    ("service.http",),
    ("service.api", "service.face", "service.console"),
    ("service.daemon",),
)
"""Every package of ``service/`` and its rank, lowest first (docs/architecture.md "Layers"):
the MCP client; the token store and the database (neither knows the other); what is built on
them (the one classifier, the wait algorithm, a tool call, the webhooks); ``--follow`` and the
triggers; the application layer; the HTTP concerns the front ends share; the three front ends
(the REST API, the MCP face, the console); the daemon that composes them. Every module not
named here is a leaf (rank 0: ``safetext``, ``jsondecode``, ``backoff``, ``errorcodes``, ...) and
imports only leaves. A module may import its own package and any lower rank; never a higher
one, never another package of its own rank (the API never imports the face or the console,
the store never the token store). A new package is one entry here."""


def layer_of(module: str) -> tuple[int, str]:
    """(rank, package): rank 0 for the leaves."""
    for rank, packages in enumerate(LAYERS, start=1):
        for package in packages:
            if module == package or module.startswith(package + "."):
                return rank, package
    return 0, module


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, deps in sorted(graph.items()):
        rank, package = layer_of(module)
        for dep in sorted(deps):
            dep_rank, dep_package = layer_of(dep)
            if dep_rank > rank or (dep_rank == rank != 0 and dep_package != package):
                found.append(f"{module} -> {dep}")
    return found


def modules(root: Path = ROOT) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((root / "service").rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in known else module)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
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
                        found.append(component)
    return found


def graph_of(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def test_service_has_no_import_cycles() -> None:
    found = cycles(graph_of(ROOT))
    assert found == [], f"import cycles in service/: {[sorted(c) for c in found]}"


def test_no_package_imports_another_of_its_rank_or_one_above() -> None:
    assert layering_violations(graph_of(ROOT)) == []


def test_the_layering_check_finds_a_front_end_importing_another(tmp_path: Path) -> None:
    """The check itself can fail: the API importing the face (inside a function, even), the
    face importing the API, the application layer importing the shared HTTP layer, the store
    importing the webhooks or the token store's package, the MCP client the store, a leaf
    the MCP client."""
    files = {
        "service/api/routes.py": "def f():\n    from service.face.backend import FaceBackend\n",
        "service/face/inproc.py": "from service.api import views\n",
        "service/api/views.py": "",
        "service/face/backend.py": "",
        "service/app/errors.py": "from service.http import guard\n",
        "service/http/guard.py": "from service.app.errors import ApiError\n",
        "service/store/store.py": "from service.daemon import main\n",
        "service/daemon/main.py": "from service.api import routes\n",
        "service/store/groupcommit.py": "from service.webhooks import outbox\n",
        "service/webhooks/outbox.py": "",
        "service/safetext.py": "from service.mcp import wire\n",
        "service/mcp/wire.py": "",
        "service/mcp/client.py": "from service.store import store\n",
        "service/auth/store.py": "from service.store import store\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layering_violations(graph_of(tmp_path)) == [
        "service.api.routes -> service.face.backend",
        "service.app.errors -> service.http.guard",
        "service.auth.store -> service.store.store",
        "service.face.inproc -> service.api.views",
        "service.mcp.client -> service.store.store",
        "service.safetext -> service.mcp.wire",
        "service.store.groupcommit -> service.webhooks.outbox",
        "service.store.store -> service.daemon.main",
    ]


def test_the_cycle_finder_finds_a_cycle_through_type_checking(tmp_path: Path) -> None:
    """The check itself can fail: a TYPE_CHECKING import that closes a loop is a cycle."""
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    b.write_text("def f():\n    from pkg.a import A\n")
    known = {"pkg.a": a, "pkg.b": b}
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [{"pkg.a", "pkg.b"}]
