"""``mcpsubd``'s command line: ``run`` (the default: serve in the foreground,
:mod:`service.daemon.run`), ``migrate``, ``backup PATH`` and ``migrate-db --to URL``
(:mod:`service.daemon.dbcommands`). Settings: flags > ``MCPSUB_*`` > TOML > defaults
(:mod:`service.daemon.config`), re-read on SIGHUP (:mod:`service.daemon.reload`).
"""

from __future__ import annotations

import service.daemon.without_dev_extras  # noqa: F401  # first: no rich, no httpx CLI

# isort: split
import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from service import eventloop
from service._version import __version__
from service.daemon import dbcommands
from service.daemon.config import ConfigError
from service.daemon.exitcodes import EXIT_CONFIG
from service.daemon.reload import ConfigSource
from service.daemon.run import configure_logging, prepare_state_dir, serve
from service.statusline import StatusLine


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpsubd",
        description="mcpsub daemon: keeps MCP 2026-07-28 subscriptions alive and serves them.",
        epilog="exit codes: 0 stopped cleanly (SIGTERM, or Ctrl-C while serving), 2 unknown "
        "flag or command, 69 database "
        "unavailable, 70 start-up failed inside mcpsubd (the log says why), 71 cannot listen "
        "(the socket path is too long or its directory is not usable; the log's hint says "
        "what to do), 75 another mcpsubd serves the socket (or runs on the state migrate-db "
        "would copy), 66 no SQLite database to copy, 73 migrate-db target not empty, 78 bad "
        "setting or unusable state directory, 130 Ctrl-C during migrate, migrate-db or backup",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=["run", "migrate", "backup", "migrate-db"],
        help="run: serve in the foreground (default); migrate: apply database migrations, "
        "exit; backup PATH: online copy of the SQLite database to PATH (mode 0600); "
        "migrate-db --to URL: copy the SQLite state into an empty PostgreSQL database",
    )
    parser.add_argument(
        "--to", metavar="URL", help="migrate-db: the PostgreSQL database to copy into"
    )
    parser.add_argument(
        "path", nargs="?", type=Path, help="backup: the file to create (never overwritten)"
    )
    parser.add_argument(
        "--state-dir",
        help="database, API socket and token (env MCPSUB_STATE_DIR; default "
        "$XDG_STATE_HOME/mcpsub)",
    )
    parser.add_argument(
        "--api",
        help="unix:///PATH or http://127.0.0.1:PORT (tcp://127.0.0.1:PORT too; env MCPSUB_API; "
        "default unix://<state-dir>/api.sock, or a short private directory's when that path "
        "is too long for a socket: docs/operations.md)",
    )
    parser.add_argument(
        "--database-url",
        help="postgresql://USER@HOST/DB for replicas sharing one database "
        "(env MCPSUB_DATABASE_URL; default SQLite in the state dir)",
    )
    parser.add_argument("--config", type=Path, help="TOML file (env MCPSUB_CONFIG)")
    parser.add_argument(
        "--log-level",
        help="debug, info, warning or error (env MCPSUB_LOG_LEVEL; default info)",
    )
    parser.add_argument(
        "--log-format",
        help="json, console or auto: JSON unless stderr is a terminal (env MCPSUB_LOG_FORMAT; "
        "default auto)",
    )
    parser.add_argument("--version", action="version", version=f"mcpsubd v{__version__}")
    return parser


@contextlib.contextmanager
def _transcript(path: str) -> Iterator[None]:
    """``trace_file``: every transport the daemon makes writes the wire transcript there."""
    if not path:
        yield
        return
    from service.mcp.transports.trace import recording

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(recording(path, program="mcpsubd"))
        except OSError as exc:
            raise ConfigError(f"trace_file {path}: {exc.strerror or exc}") from exc
        yield


def main(argv: list[str] | None = None) -> None:
    from service.exits import exit_now, run_main

    exit_now(run_main(lambda: _main(argv)))


def _main(argv: list[str] | None) -> int:
    # Everything the daemon creates (database, WAL, socket, token) is for its owner only.
    os.umask(0o077)
    # A reload asked for before the loop handles SIGHUP must not kill us (start reads the files).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.path is not None and args.command != "backup":
        parser.error(f"{args.command} takes no path (did you mean `mcpsubd backup PATH`?)")
    source = ConfigSource(
        {
            "state_dir": args.state_dir,
            "api": args.api,
            "database_url": args.database_url,
            "log_level": args.log_level,
            "log_format": args.log_format,
        },
        args.config,
    )
    try:
        settings = source.load()
        prepare_state_dir(settings.state_dir)
        # Before the logging: its lines then erase the status line before they print.
        status = StatusLine.for_terminal().start() if args.command == "run" else None
        configure_logging(settings)
        if args.command == "backup":
            return dbcommands.backup(settings, args.path)
        if args.command == "migrate-db":
            if not args.to:
                parser.error("migrate-db needs the target: mcpsubd migrate-db --to postgresql://…")
            return dbcommands.migrate_db(settings, args.to)
        if args.command == "migrate":
            return dbcommands.migrate(settings)
        with _transcript(settings.trace_file):
            return eventloop.run(serve(settings, source, status))
    except (ConfigError, eventloop.EventLoopError) as exc:
        print(f"mcpsubd: {exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    main()
