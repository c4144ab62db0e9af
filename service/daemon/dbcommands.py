"""``mcpsubd``'s database commands, each run once and exiting: ``migrate`` (Alembic to the
newest script), ``backup PATH`` (SQLite's online copy) and ``migrate-db --to URL`` (the SQLite
state copied into an empty PostgreSQL, docs/scale-out.md)."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from service.daemon.config import ConfigError, Settings
from service.daemon.exitcodes import (
    EXIT_ALREADY_RUNNING,
    EXIT_CANT_CREATE,
    EXIT_DB_UNAVAILABLE,
    EXIT_NO_INPUT,
)
from service.store.database import database_errors, describe
from service.store.migrate import upgrade


def migrate(settings: Settings) -> int:
    try:
        upgrade(settings.db_url)
    except database_errors() as exc:
        print(
            f"mcpsubd: cannot migrate {settings.db_display}: {describe(exc)}\n"
            "hint: is the database running and does the URL name it?",
            file=sys.stderr,
        )
        return EXIT_DB_UNAVAILABLE
    print(f"migrated {settings.db_display}")
    return 0


def backup(settings: Settings, path: Path | None) -> int:
    from service.store.backup import BackupError, backup_sqlite

    if path is None:
        print("mcpsubd: backup needs the file to create: mcpsubd backup PATH", file=sys.stderr)
        return 2
    if settings.database_url:
        raise ConfigError(
            "backup copies the SQLite database; for PostgreSQL use pg_dump on database_url"
        )
    try:
        pages = backup_sqlite(settings.db_path, path)
    except BackupError as exc:
        print(f"mcpsubd: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"backed up {settings.db_path} to {path} ({pages} pages, mode 0600)")
    return 0


def migrate_db(settings: Settings, to: str) -> int:
    """Copy this state dir's SQLite database into an empty PostgreSQL (docs/scale-out.md)."""
    from service.store.copy import CopyError, copy_database
    from service.store.database import DatabaseUrlError, parse, redact

    try:
        target = parse(to)
    except DatabaseUrlError as exc:
        raise ConfigError(str(exc).replace("database_url", "--to")) from exc
    if not target.is_postgresql:
        raise ConfigError("--to must be a postgresql:// URL (migrate-db moves SQLite up)")
    if settings.database_url and parse(settings.database_url).is_postgresql:
        raise ConfigError("migrate-db copies the SQLite state; database_url is PostgreSQL")
    if not settings.db_path.exists():
        print(f"mcpsubd: no SQLite database at {settings.db_path}", file=sys.stderr)
        return EXIT_NO_INPUT
    socket_path = settings.api_socket
    if socket_path is not None and socket_path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(socket_path))
        except OSError:
            pass  # a stale socket from a crash
        else:
            print(
                f"mcpsubd: mcpsubd is running on {settings.state_dir}; stop it first "
                "(the copy must see a state nobody writes)",
                file=sys.stderr,
            )
            return EXIT_ALREADY_RUNNING
        finally:
            probe.close()
    shown = redact(to)
    try:
        upgrade(settings.db_url)
        upgrade(to)
        report = asyncio.run(
            copy_database(settings.db_url, to, lambda table, n: print(f"{table} {n}"))
        )
    except CopyError as exc:
        print(f"mcpsubd: cannot copy into {shown}: {exc}", file=sys.stderr)
        return EXIT_CANT_CREATE
    except database_errors() as exc:
        print(
            f"mcpsubd: cannot migrate {shown}: {describe(exc)}\n"
            "hint: is the database running and does the URL name it?",
            file=sys.stderr,
        )
        return EXIT_DB_UNAVAILABLE
    total = sum(report.counts.values())
    print(f"copied {total} rows from {settings.db_path} to {shown}; every table's count verified")
    print(f"next: run every replica with database_url = {shown}")
    return 0
