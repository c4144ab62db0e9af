"""The revision write's statements on the database driver itself, below SQLAlchemy.

A revision is a handful of statements (the fenced ``UPDATE … RETURNING``, the revision and
event inserts, the touch of an unchanged read, the state change of a first read), run for
every update of every watched resource. Through SQLAlchemy Core each statement paid for the
parameter processing, the cursor result and its description merge, around a driver call
that is a small part of the cost (docs/benchmarks.md). Here they go to the DB-API of the
connection SQLAlchemy already holds, inside the transaction it began, so SQLAlchemy keeps
the schema, the migrations, the pool and every statement off the hot path, and commit,
rollback and fencing are unchanged:

- SQLite: ``sqlite3.Connection.execute`` with the ``:name`` text as it is (the driver's
  statement cache compiles each text once per connection);
- PostgreSQL: the asyncpg adapter's DB-API cursor with the text renumbered ``$1, $2, …``
  (asyncpg's prepared statements, cached per connection; the adapter begins the
  transaction SQLAlchemy opened, and runs inside ``run_sync``).

What SQLAlchemy's execution did besides is done here too, so callers see no difference: a
driver error is raised as SQLAlchemy's exception for it (``database_errors()`` catches it,
``.orig`` is the driver's), a lost connection is invalidated, a storage failure is reported
to the store's health, and the test hook that fails writes as a full disk applies
(:func:`service.store.health.install` puts the last two on the connection's ``info``).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from service.store import health
from service.store.health import FAULT_KEY, HEALTH_KEY, is_storage_failure, writes

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@dataclass(frozen=True, slots=True)
class Sql:
    """One statement in each driver's form, made once at import (:func:`sql`)."""

    text: str
    """``:name`` parameters: SQLite's form (sqlite3 binds them from a mapping)."""
    numbered: str
    """``$1, $2, …``: asyncpg's form."""
    names: tuple[str, ...]
    """The parameter of each ``$n`` in turn."""
    writes: bool

    def positional(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple([params[name] for name in self.names])


def sql(text: str) -> Sql:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return Sql(text, _NAMED.sub(number, text), tuple(names), writes(text))


def sqlite_rows(conn: Connection, statement: Sql, params: Mapping[str, Any]) -> list[Any]:
    """Run ``statement`` on the sqlite3 connection under ``conn``; every row it returns."""
    try:
        if statement.writes:
            _fault(conn)
        raw: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
        return raw.execute(statement.text, params).fetchall()
    except sqlite3.Error as exc:
        raise _raised(conn, statement.text, params, exc) from exc


def asyncpg_rows(conn: Connection, statement: Sql, params: Mapping[str, Any]) -> list[Any]:
    """Run ``statement`` through the asyncpg adapter under ``conn`` (a ``run_sync``
    connection): a prepared statement, in the transaction SQLAlchemy began."""
    try:
        if statement.writes:
            _fault(conn)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(statement.numbered, statement.positional(params))
        return list(cursor.fetchall())
    except (conn.dialect.loaded_dbapi.Error, sqlite3.Error) as exc:  # sqlite3: _fault's
        raise _raised(conn, statement.numbered, params, exc) from exc


def _fault(conn: Connection) -> None:
    """The test hook of :mod:`service.store.health`: fail a write as a full disk does."""
    if not health.fault_armed:
        return
    fault_file = conn.info.get(FAULT_KEY)
    if fault_file and os.path.exists(fault_file):
        raise sqlite3.OperationalError("database or disk is full")


def _raised(
    conn: Connection, statement: str, params: Mapping[str, Any], exc: Exception
) -> BaseException:
    """What SQLAlchemy would have raised for the driver's ``exc``, with what it does on the
    way: report a storage failure, invalidate a connection the error says is lost."""
    dialect = conn.dialect
    disconnect = not conn.invalidated and dialect.is_disconnect(
        exc,  # type: ignore[arg-type]  # a DB-API error, typed as PEP 249's
        conn.connection.dbapi_connection,
        None,
    )
    base = sqlite3.Error if isinstance(exc, sqlite3.Error) else dialect.loaded_dbapi.Error
    wrapped = DBAPIError.instance(
        statement, dict(params), exc, base, connection_invalidated=disconnect, dialect=dialect
    )
    if not isinstance(wrapped, DBAPIError):  # the driver's error has no DB-API class
        wrapped = OperationalError(statement, dict(params), exc)
    state = conn.info.get(HEALTH_KEY)
    if state is not None and is_storage_failure(exc):
        state.failed(exc)
    if disconnect:
        conn.invalidate(wrapped)
    return wrapped
