"""``mcpsubd``'s exit codes (sysexits.h where one fits): what a service manager or a script
sees (``RestartPreventExitStatus`` names ``EXIT_CONFIG``; docs/operations.md lists them)."""

from __future__ import annotations

EXIT_CONFIG = 78  # EX_CONFIG
EXIT_ALREADY_RUNNING = 75  # EX_TEMPFAIL
EXIT_DB_UNAVAILABLE = 69  # EX_UNAVAILABLE: the database did not answer (restart may help)
EXIT_NO_INPUT = 66  # EX_NOINPUT: migrate-db found no SQLite database to copy
EXIT_CANT_CREATE = 73  # EX_CANTCREAT: migrate-db target not empty (or the copy did not verify)
EXIT_SOFTWARE = 70  # EX_SOFTWARE: start-up failed inside mcpsubd (the log has the traceback)
EXIT_CANNOT_LISTEN = 71  # EX_OSERR: the API socket cannot be made (path too long, unusable dir)
