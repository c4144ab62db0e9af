"""``mcpsubd backup PATH``: an online, consistent, private copy of the SQLite database.

The database holds webhook secrets, so the copy is created 0600 before a byte is written
(``O_EXCL``: an existing file is never overwritten). SQLite's backup API copies a consistent
snapshot while the daemon keeps writing; a copy that fails half-way is removed, so a path
either holds a whole backup or nothing.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path


class BackupError(Exception):
    """One line for the user; ``exit_code`` follows sysexits."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


EX_NOINPUT = 66
EX_CANTCREAT = 73
EX_IOERR = 74


def backup_sqlite(database: Path, target: Path) -> int:
    """Copy ``database`` to ``target`` (mode 0600); returns the number of pages copied."""
    if not database.is_file():
        raise BackupError(
            f"no database at {database} (has mcpsubd run with this state dir?)", EX_NOINPUT
        )
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BackupError(f"{target} exists; not overwriting it", EX_CANTCREAT) from None
    except OSError as exc:
        raise BackupError(f"cannot create {target}: {exc.strerror or exc}", EX_CANTCREAT) from None
    os.close(fd)
    try:
        source = sqlite3.connect(f"file:{database}?mode=rw", uri=True, timeout=30)
        try:
            copy = sqlite3.connect(target)
            try:
                source.backup(copy)
                pages = int(copy.execute("PRAGMA page_count").fetchone()[0])
            finally:
                copy.close()
        finally:
            source.close()
        os.chmod(target, 0o600)
    except (sqlite3.Error, OSError) as exc:
        with contextlib.suppress(OSError):
            target.unlink()
        raise BackupError(f"backup of {database} to {target} failed: {exc}", EX_IOERR) from None
    return pages
