"""The protocol core (wire, sse, listen, classify) must stay free of httpx and asyncio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
PURE = ["service.mcp.wire", "service.mcp.sse", "service.mcp.listen", "service.mcp.classify"]
FORBIDDEN = {"httpx", "httpx_sse", "asyncio", "anyio", "trio", "h11", "httpcore"}


def module_path(name: str) -> Path:
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def imports_of(name: str) -> set[str]:
    tree = ast.parse(module_path(name).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # ``from service.mcp import wire`` imports the submodule service.mcp.wire.
            for alias in node.names:
                if module_path(f"{node.module}.{alias.name}").exists():
                    found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{name}: relative import {ast.dump(node)}")
    return found


def transitive_imports(name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        for imported in imports_of(current):
            if imported in seen:
                continue
            seen.add(imported)
            if imported.split(".")[0] == "service" and module_path(imported).exists():
                todo.append(imported)
    return seen


@pytest.mark.parametrize("name", PURE)
def test_pure_module_does_not_import_io_libraries(name: str) -> None:
    bad = {m for m in transitive_imports(name) if m.split(".")[0] in FORBIDDEN}
    assert not bad, f"{name} imports {sorted(bad)}"


def test_checker_sees_imports() -> None:
    # Guard against the checker silently finding nothing.
    assert "asyncio" in imports_of("service.probe")
    assert "service.mcp.sse" in transitive_imports("service.mcp.classify")
    assert "service.mcp.wire" in transitive_imports("service.mcp.listen")


def test_the_daemon_loads_httpx_only_for_a_url_that_needs_it() -> None:
    """docs/architecture.md: a daemon whose servers and webhook targets are all plain
    ``http://`` never imports httpx (its RSS counts against the daemon's target). The API's
    URL check imports it only for a name IDNA must encode."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import service.daemon.main, service.webhooks.dispatcher\n"
        "from service.app.validate import host_name_problem\n"
        "assert host_name_problem('example.com') is None\n"
        "assert host_name_problem('a' * 64 + '.com') is not None\n"
        "print('httpx' in sys.modules)\n"
        "assert host_name_problem('bücher.example') is None\n"
        "print('httpx' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "True"]
