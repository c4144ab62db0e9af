"""The import graph of ``service/`` has no cycles (issue 28 §3): every import counts, those
under ``TYPE_CHECKING`` and inside functions too, since each says "this module needs that one".

Read from the source with ``ast``, nothing is imported. ``from package import name`` is an
edge to ``package.name`` when that is a module (importing a submodule runs the package's
``__init__`` first, which is not a dependency on what the ``__init__`` re-exports).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KNOWN_CYCLES = [
    # The front ends lean on each other: the API mounts the face and calls it
    # (routes/agent.py), the face's in-process backend calls the API's validate, errors,
    # queries and views. Issue 28 §1 moves what they share into an application layer; until
    # then this one cycle is known and may not grow.
    {
        "service.api",
        "service.api.app",
        "service.api.openapi",
        "service.api.routes.agent",
        "service.api.routes.content",
        "service.api.routes.events",
        "service.api.routes.history",
        "service.api.routes.overview",
        "service.api.routes.subscriptions",
        "service.api.routes.system",
        "service.api.routes.webhooks",
        "service.face.inproc",
    },
]


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((ROOT / "service").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
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


def test_service_has_no_import_cycles_but_the_known_one() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    found = cycles(graph)
    unexpected = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert unexpected == [], f"import cycles in service/: {unexpected}"


def test_the_cycle_finder_finds_a_cycle_through_type_checking(tmp_path: Path) -> None:
    """The check itself can fail: a TYPE_CHECKING import that closes a loop is a cycle."""
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    b.write_text("def f():\n    from pkg.a import A\n")
    known = {"pkg.a": a, "pkg.b": b}
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [{"pkg.a", "pkg.b"}]
