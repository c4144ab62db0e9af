"""Which database the store runs on: SQLite in the state dir (default) or PostgreSQL.

A URL names the backend. ``sqlite:///path`` (or ``sqlite+aiosqlite://``) is the embedded
default; ``postgresql://`` / ``postgres://`` (or ``postgresql+asyncpg://``) selects the shared
backend for several replicas. Callers keep the URL the user gave; the store and the migrations
ask this module for the driver form. PostgreSQL URLs may carry a password, so anything shown to
a person goes through :func:`redact` first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from service.safetext import redact_urls

BackendName = Literal["sqlite", "postgresql"]
"""Which backend a URL names (the statements of each are ``service.store.dialect.Dialect``)."""


class DatabaseUrlError(ValueError):
    """The URL names no backend we support; the message says which ones we do."""


@dataclass(frozen=True, slots=True)
class Database:
    dialect: BackendName
    async_url: str
    """With the asyncio driver: ``sqlite+aiosqlite://`` or ``postgresql+asyncpg://``."""

    @property
    def is_postgresql(self) -> bool:
        return self.dialect == "postgresql"


def parse(url: str) -> Database:
    """Normalise ``url`` to the asyncio driver of its backend; raise on anything else."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseUrlError(
            "database_url is not a URL (use postgresql://USER@HOST/DB or sqlite:///PATH)"
        ) from exc
    backend, _, _driver = parsed.drivername.partition("+")
    if backend == "sqlite":
        return Database("sqlite", parsed.set(drivername="sqlite+aiosqlite").render_as_string(False))
    if backend in ("postgresql", "postgres"):
        return Database(
            "postgresql", parsed.set(drivername="postgresql+asyncpg").render_as_string(False)
        )
    raise DatabaseUrlError(
        f"database_url: unsupported backend {backend!r} (use postgresql://… or sqlite:///…)"
    )


def redact(url: str) -> str:
    """The URL as ``mcpsubd`` shows it (logs, "migrating …", "database unavailable"): the
    product's one rule, :func:`service.safetext.redact_urls`, so a password in the userinfo
    and one given as a parameter (``?password=…``, which libpq accepts) are both hidden."""
    try:
        make_url(url)
    except ArgumentError:
        return "<invalid database url>"
    return redact_urls(url)


_BASE_ERRORS: tuple[type[BaseException], ...] = (OSError, SQLAlchemyError)


def database_errors() -> tuple[type[BaseException], ...]:
    """What "the database cannot be reached or used" raises: refused connections and timeouts
    (``OSError``), and whatever SQLAlchemy wraps (asyncpg's errors surface as DBAPI errors, or
    as ``asyncpg.PostgresError`` when raised while connecting).

    A function for ``except database_errors():`` (evaluated only when something is raised)
    rather than a constant, so that a SQLite daemon never imports asyncpg (its memory):
    asyncpg can only raise once the PostgreSQL backend has imported it.
    """
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return _BASE_ERRORS
    return (*_BASE_ERRORS, asyncpg.PostgresError)


def describe(exc: BaseException) -> str:
    """One line about a database failure, without SQL or parameters."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
