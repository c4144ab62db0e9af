"""A fresh database created at head in one step (the schema module's tables, then the head
revision stamped) is the same database every migration in turn makes, on both backends:
tables, columns with their types, nullability and defaults, keys, indexes, constraints and
SQLite's AUTOINCREMENT."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, inspect, text

from service.store.migrate import (
    _on_connection,
    script_head,
    stored_revision,
    upgrade,
)
from tests.support.postgres import BACKENDS
from tests.support.store import unmigrated_database


def describe(conn: Connection) -> dict[str, Any]:
    """Everything about the schema a migration can change, in a comparable form."""
    found = inspect(conn)
    tables: dict[str, Any] = {}
    for table in sorted(found.get_table_names()):
        columns = [
            (
                c["name"],
                str(c["type"]),
                c["nullable"],
                str(c.get("default")),
                c.get("autoincrement"),
            )
            for c in found.get_columns(table)
        ]
        tables[table] = {
            "columns": sorted(columns),
            "pk": found.get_pk_constraint(table)["constrained_columns"],
            "fks": sorted(
                (
                    tuple(f["constrained_columns"]),
                    f["referred_table"],
                    tuple(f["referred_columns"]),
                    str(f.get("options")),
                )
                for f in found.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in found.get_indexes(table)
            ),
            "uniques": sorted(
                tuple(u["column_names"]) for u in found.get_unique_constraints(table)
            ),
            "checks": sorted(str(c["sqltext"]) for c in found.get_check_constraints(table)),
        }
    if conn.dialect.name == "sqlite":
        rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        tables["autoincrement"] = sorted(
            name for name, sql in rows if "AUTOINCREMENT" in sql.upper()
        )
    return tables


@pytest.mark.parametrize("backend", BACKENDS)
def test_created_at_head_is_the_migrated_schema(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    migrated = (
        unmigrated_database(backend, tmp_path / "a", request)
        if backend == "postgresql"
        else f"sqlite:///{tmp_path / 'migrated.db'}"
    )
    created = (
        unmigrated_database(backend, tmp_path, request)
        if backend == "postgresql"
        else f"sqlite:///{tmp_path / 'created.db'}"
    )
    head = script_head()
    assert head is not None
    upgrade(migrated, head)  # the newest revision named: every migration in turn
    upgrade(created)  # "head" on an empty database: created at head in one step
    assert _on_connection(created, stored_revision) == script_head()
    assert _on_connection(created, describe) == _on_connection(migrated, describe)


def test_a_fresh_database_is_created_at_head_without_alembic(tmp_path: Path) -> None:
    """What ``mcpsubd`` does on its first start: one step, Alembic not even imported."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    code = (
        "import sys; from service.store.migrate import upgrade_if_needed; "
        f"upgrade_if_needed({url!r}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert _on_connection(url, stored_revision) == script_head()
