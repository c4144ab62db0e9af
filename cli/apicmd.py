"""What every ``mcpsubctl`` command that talks to ``mcpsubd`` shares: flags, output, errors.

Commands take ``--api`` (see :mod:`cli.localapi`) and ``--json``. Errors print
``error-code``/``recommended-next-action`` lines (or one JSON object) on stdout, the message
on stderr, and exit with the code of their class (``docs/cli.md``); a daemon that is not
running is ``DAEMON_UNAVAILABLE`` (exit 10) with the command that starts it.

This module is on the path of every daemon command, which agent scripts call in loops
(``results/cli.md``), so it imports only what every one of them needs: the thin API client,
the text escaping and the exit-code table. The rest (human units, the engine) is imported
where it is used.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence

from cli.exitcodes import ctl_exit_code as exit_code
from cli.localapi import DaemonClient, DaemonError, DaemonUnavailable
from service.safetext import shown

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DaemonClient",
    "DaemonError",
    "DaemonUnavailable",
    "api_flags",
    "client",
    "emit",
    "exit_code",
    "fail",
    "json_text",
    "machine_lines_wanted",
    "run",
    "stdout_is_terminal",
    "table",
    "when",
]


def json_text(value: Any) -> str:
    """Compact JSON, non-ASCII kept (``cli.output.json_text`` without importing the engine)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def machine_lines_wanted(json_mode: bool, lines_mode: bool = False) -> bool:
    from cli.human import machine_lines_wanted as wanted

    return wanted(json_mode, lines_mode)


# ---- formatting (pure) ------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain aligned columns; the last column is not padded. Cells are shown safely: control
    and bidi characters escaped, credentials in URLs redacted (``service.safetext``)."""
    cells = [[str(h) for h in headers]] + [
        ["-" if v is None else shown(v) for v in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


# ---- flags ------------------------------------------------------------------------------
API_HELP = (
    "daemon API: unix:///path/api.sock or http://127.0.0.1:PORT "
    "(tcp://127.0.0.1:PORT too; env MCPSUB_API; default <state dir>/api.sock)"
)


def api_flags(p: argparse.ArgumentParser, *, follow: bool = False) -> None:
    """``--api``, ``--json`` and the terminal flags of a daemon command."""
    from cli.parsing import add_quiet

    p.add_argument("--api", default=None, help=API_HELP)
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object on stdout" + (" (NDJSON with --follow)" if follow else ""),
    )
    add_quiet(p)


# ---- the shared error path ----------------------------------------------------------------
def fail(args: argparse.Namespace, code: str, message: str, hint: str | None) -> int:
    """Print a failure the documented way and return its exit code; without a hint of its
    own the failure points to the command's ``--help``."""
    if hint is None:  # never `recommended-next-action null` for a daemon command
        action = getattr(args, "action", None)
        hint = f"see `mcpsubctl {args.command}{' ' + action if action else ''} --help`"
    sys.stderr.write(f"mcpsubctl {args.command}: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    if args.json:
        emit(json_text({"errorCode": code, "message": message, "recommendedNextAction": hint}))
    elif machine_lines_wanted(False, getattr(args, "lines", False)):
        emit(f"error-code {code}\nrecommended-next-action {hint or 'null'}")
    return exit_code(code)


def client(args: argparse.Namespace) -> DaemonClient:
    """The client for ``--api`` (raises ValueError for a malformed one)."""
    return DaemonClient.from_options(args.api, quiet=getattr(args, "quiet", False))


def run(args: argparse.Namespace, body: Callable[[DaemonClient], int]) -> int:
    """Run ``body`` with a client; the daemon's failures become the documented output."""
    try:
        made = client(args)
    except ValueError as exc:
        return fail(args, "USAGE_ERROR", str(exc), "see `mcpsubctl --help`")
    try:
        with made:
            return body(made)
    except DaemonUnavailable as exc:
        return fail(args, "DAEMON_UNAVAILABLE", exc.message, exc.hint)
    except DaemonError as exc:
        return fail(args, exc.error_code, exc.message, exc.hint)
