"""The SQLite token store (seed-behaviour §5.6, §5.7).

One row per origin. Only :func:`TokenStore.create` makes the file (``--login``); token
resolution and ``--logout`` open it only if it exists. ``BEGIN IMMEDIATE`` is the
cross-process lock that serializes refreshes, because the gateway revokes a whole
refresh-token family when a consumed refresh token is presented again.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from service import statepaths
from service.auth.errors import LockTimeout

APP_DIR = "mcp-resource-subscriber"
DB_NAME = "tokens.db"
SCHEMA_VERSION = 1
DEFAULT_BUSY_TIMEOUT_MS = 5000
SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    origin TEXT PRIMARY KEY,
    client_id TEXT,
    access_token TEXT NOT NULL,
    refresh_token TEXT,
    expires_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT
"""


def now_ms() -> int:
    return int(time.time() * 1000)


def default_store_path(
    env: Mapping[str, str] | None = None, platform: str | None = None, home: Path | None = None
) -> Path:
    """``MCP_PROBE_TOKEN_STORE_PATH``, else the platform's per-user state directory."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    override = env.get("MCP_PROBE_TOKEN_STORE_PATH")
    if override:
        return Path(override)
    base = Path(statepaths.state_base(env, platform, None if home is None else str(home)))
    return base / APP_DIR / DB_NAME


def store_signature(path: Path | None = None) -> tuple[int, ...] | None:
    """What changes whenever the store's rows may have, or None when there is no store: the
    file's inode, size and modification time, SQLite's file change counter (header bytes
    24-27, moved by every commit in the store's rollback-journal mode: two writes within one
    tick of the file system's clock are told apart) and any journal's inode, size and time.
    Lets a caller that keeps an answer (the daemon's links, :mod:`service.daemon.tokens`)
    skip opening the database."""
    path = default_store_path() if path is None else path
    try:
        with open(path, "rb") as handle:
            main = os.fstat(handle.fileno())
            counter = handle.read(28)[24:]
    except OSError:
        return None
    signature = [main.st_ino, main.st_size, main.st_mtime_ns, int.from_bytes(counter, "big")]
    for suffix in ("-wal", "-journal"):
        try:
            side = os.stat(f"{path}{suffix}")
        except OSError:
            continue
        signature += [side.st_ino, side.st_size, side.st_mtime_ns]
    return tuple(signature)


@dataclass(frozen=True)
class TokenRow:
    origin: str
    client_id: str | None
    access_token: str
    refresh_token: str | None
    expires_at: int
    updated_at: int

    def __repr__(self) -> str:  # never show token values
        return (
            f"TokenRow(origin={self.origin!r}, client_id={self.client_id!r}, "
            f"expires_at={self.expires_at}, has_refresh={self.refresh_token is not None})"
        )


class TokenStore:
    """An open token database. Use :meth:`open_existing` or :meth:`create`."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    # ---- opening -----------------------------------------------------------------------
    @classmethod
    def _connect(cls, path: Path) -> TokenStore:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=0)
        conn.execute(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}")
        return cls(path, conn)

    @classmethod
    def open_existing(cls, path: Path | None = None) -> TokenStore | None:
        """The store if its file exists, else None (never creates anything)."""
        path = default_store_path() if path is None else path
        if not path.is_file():
            return None
        store = cls._connect(path)
        store._migrate()
        return store

    @classmethod
    def create(cls, path: Path | None = None) -> TokenStore:
        """Open the store, creating the directory (0700) and file (0600) if needed."""
        path = default_store_path() if path is None else path
        if not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.name != "nt":
                os.chmod(path.parent, 0o700)
        if not path.exists():
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        if os.name != "nt":
            os.chmod(path, 0o600)
        store = cls._connect(path)
        store._migrate()
        return store

    def _migrate(self) -> None:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if version >= SCHEMA_VERSION:
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(SCHEMA)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> TokenStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- rows --------------------------------------------------------------------------
    def get(self, origin: str) -> TokenRow | None:
        row = self._conn.execute(
            "SELECT origin, client_id, access_token, refresh_token, expires_at, updated_at "
            "FROM tokens WHERE origin = ?",
            (origin,),
        ).fetchone()
        if row is None:
            return None
        return TokenRow(
            str(row[0]),
            None if row[1] is None else str(row[1]),
            str(row[2]),
            None if row[3] is None else str(row[3]),
            int(row[4]),
            int(row[5]),
        )

    def save(
        self,
        origin: str,
        *,
        client_id: str | None,
        access_token: str,
        refresh_token: str | None,
        expires_at: int,
    ) -> None:
        self._conn.execute(
            "INSERT INTO tokens (origin, client_id, access_token, refresh_token, expires_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(origin) DO UPDATE SET "
            "client_id = excluded.client_id, access_token = excluded.access_token, "
            "refresh_token = excluded.refresh_token, expires_at = excluded.expires_at, "
            "updated_at = excluded.updated_at",
            (origin, client_id, access_token, refresh_token, expires_at, now_ms()),
        )

    def delete(self, origin: str) -> bool:
        cursor = self._conn.execute("DELETE FROM tokens WHERE origin = ?", (origin,))
        return cursor.rowcount > 0

    # ---- the cross-process lock --------------------------------------------------------
    def lock(self, budget_ms: float | None = None) -> StoreLock:
        return StoreLock(self, budget_ms)

    def _begin_immediate(self, budget_ms: float | None) -> None:
        if budget_ms is not None and budget_ms <= 0:
            raise LockTimeout("no time left to take the token store lock")
        conn = self._conn
        if budget_ms is None:
            conn.execute("BEGIN IMMEDIATE")
            return
        conn.execute(f"PRAGMA busy_timeout = {max(1, int(budget_ms))}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LockTimeout(
                f"timed out after {int(budget_ms)} ms waiting for the token store lock"
            ) from exc
        finally:
            conn.execute(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}")

    def _end(self, commit: bool) -> None:
        self._conn.execute("COMMIT" if commit else "ROLLBACK")


class StoreLock:
    """``with store.lock(ms):`` — BEGIN IMMEDIATE; COMMIT on success, ROLLBACK on error."""

    def __init__(self, store: TokenStore, budget_ms: float | None) -> None:
        self._store = store
        self._budget_ms = budget_ms

    def __enter__(self) -> TokenStore:
        self._store._begin_immediate(self._budget_ms)
        return self._store

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._store._end(commit=exc_type is None)
