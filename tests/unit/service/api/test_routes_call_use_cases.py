"""The REST routes parse, call a use case of ``service/app``, render: no route module imports
the store, the webhooks or the triggers packages (their records excepted: plain data), so
every read and change goes through the one door every front end shares."""

from __future__ import annotations

import ast
from pathlib import Path

import service.api.routes

ROUTES = Path(service.api.routes.__file__).parent
BELOW_THE_DOOR = ("service.store", "service.webhooks", "service.triggers")
PLAIN_DATA = ("service.store.records",)


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def test_no_route_reaches_below_the_use_cases() -> None:
    reached = {
        f"{path.name}: {name}"
        for path in sorted(ROUTES.glob("*.py"))
        for name in _imports(path)
        if name.startswith(BELOW_THE_DOOR) and name not in PLAIN_DATA
    }
    assert not reached
