"""``mcpsubctl tail`` and ``mcpsubctl hook``: resource changes for agents that do not speak MCP
subscriptions (docs/agents.md).

``tail`` prints one line per ``resource.updated`` event, flushed at once, until it is stopped
(Ctrl-C exits 130): what Claude Code's Monitor tool (each stdout line wakes the model) and a
shell ``while read`` loop need. It follows ``/v1/events/stream`` from a cursor and, when the
daemon goes away, keeps retrying and resumes from the last event it printed, so a daemon
restart neither loses nor repeats a change. ``hook`` lives in :mod:`cli.agent_hook`, which
``cli.entry`` calls directly so a prompt hook does not pay for this parser.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

RETRY_MIN_S = 0.1
RETRY_MAX_S = 2.0
"""Retry delays while the daemon is away: short, so a restarted daemon is picked up at once."""
GLOB_CHARS = frozenset("*?[")
FATAL_STATUSES = frozenset({400, 401, 403, 404, 421})
"""Answers that retrying cannot change (bad input, wrong token): tail ends with their code."""


# ---- pure parts ---------------------------------------------------------------------------
def server_filter(patterns: Sequence[str]) -> str | None:
    """The URI the daemon can filter on itself: one pattern without glob characters."""
    if len(patterns) == 1 and not set(patterns[0]) & GLOB_CHARS:
        return patterns[0]
    return None


def matches(uri: object, patterns: Sequence[str]) -> bool:
    """``uri`` matches any shell-style pattern (the webhooks' ``uriPatterns`` rule)."""
    if not patterns:
        return True
    import fnmatch

    return isinstance(uri, str) and any(fnmatch.fnmatchcase(uri, p) for p in patterns)


def tail_line(event: dict[str, Any], *, as_json: bool, change: str | None = None) -> str:
    """One change as one line: ``event=ID uri=URI revision=N server=URL``, then
    ``first_change(server data)="…"`` when ``change`` is given (``--summary``), or its JSON
    (with ``firstChange``).

    Every field comes from a server or the daemon's log, so control, bidi and invisible
    characters are escaped (JSON escapes them by itself: ``ensure_ascii``)."""
    if as_json:
        import json

        if change is not None:
            event = {**event, "firstChange": change[:SUMMARY_MAX_CHARS]}
        return json.dumps(event, separators=(",", ":"), ensure_ascii=True)
    from service.safetext import visible

    fields = (
        ("event", event.get("id")),
        ("uri", event.get("uri")),
        ("revision", event.get("revision")),
        ("server", event.get("serverUrl")),
    )
    line = " ".join(f"{name}={visible(str(value))}" for name, value in fields)
    return line + (" " + summary_field(change) if change is not None else "")


SUMMARY_MAX_CHARS = 100
"""At most this much of the changed line goes on a ``tail --summary`` line (then ``…``)."""
SUMMARY_TIMEOUT_S = 2.0
"""How long a line waits for its summary; without one in time it is printed without."""


def first_change(diff_lines: Sequence[str]) -> str | None:
    """The first added line of a unified diff (``+text``: what the text says now), or the
    first removed one (``-text``) when nothing was added; the ``---``/``+++`` header is
    skipped. None when the text did not change. Pure."""
    removed = None
    for line in diff_lines:
        if line.startswith(("+++ ", "--- ")) or line in ("+++", "---"):
            continue
        if line.startswith("+"):
            return line
        if line.startswith("-") and removed is None:
            removed = line
    return removed


def summary_field(change: str) -> str:
    """``first_change(server data)="…"``: the changed line bounded, quoted and escaped, so it
    stays on the line, cannot close its quotes, and reads as the server's text, not ours."""
    from service.safetext import visible

    cut = change[:SUMMARY_MAX_CHARS] + ("…" if len(change) > SUMMARY_MAX_CHARS else "")
    quoted = cut.replace("\\", "\\\\").replace('"', '\\"')
    return f'first_change(server data)="{visible(quoted)}"'


def after_reset(reset: dict[str, Any], cursor: int) -> int:
    """The cursor after an ``event: reset``: the stream goes on from the first retained event
    (history was pruned past ``cursor``) or from the newest (``cursor`` is from another
    database); events are then compared with that, not with the stale cursor."""
    first, last = reset.get("firstEventId"), reset.get("lastEventId")
    if isinstance(last, int) and cursor > last:
        return last
    if isinstance(first, int):
        return max(first - 1, 0)
    return cursor


# ---- tail ---------------------------------------------------------------------------------
def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _note(text: str) -> None:
    sys.stderr.write(f"mcpsubctl tail: {text}\n")
    sys.stderr.flush()


def changed_line(client: Any, event: dict[str, Any]) -> str | None:
    """The first changed line of ``event``'s revision against the one before (for revision
    1, its first line as ``+…``), asked of the daemon on ``client`` (not the stream's
    connection); None when it cannot be had in :data:`SUMMARY_TIMEOUT_S` (the line is then
    printed without it: a summary never holds a change back)."""
    from cli.localapi import DaemonError, DaemonUnavailable

    sub_id, revision = event.get("subscriptionId"), event.get("revision")
    if not isinstance(sub_id, int) or not isinstance(revision, int) or revision < 1:
        return None
    try:
        if revision > 1:
            _, diff = client.request(
                "GET",
                f"/v1/subscriptions/{sub_id}/diff?from={revision - 1}&to={revision}",
                timeout_s=SUMMARY_TIMEOUT_S,
            )
            lines = diff.get("lines")
            return first_change(lines) if isinstance(lines, list) else None
        _, first = client.request(
            "GET", f"/v1/subscriptions/{sub_id}/revisions/1", timeout_s=SUMMARY_TIMEOUT_S
        )
    except (DaemonUnavailable, DaemonError):
        return None
    text = first.get("text")
    return "+" + text.split("\n", 1)[0] if isinstance(text, str) else None


def cmd_tail(args: argparse.Namespace) -> int:
    from cli.apicmd import fail as _fail
    from cli.localapi import DaemonClient, DaemonError, DaemonUnavailable

    patterns: list[str] = args.uri or []
    try:
        client = DaemonClient.from_options(args.api, quiet=True)
    except ValueError as exc:
        return _fail(args, "USAGE_ERROR", str(exc), "see `mcpsubctl tail --help`")
    try:
        cursor = args.after
        if cursor is None:  # "from now": the newest event when tail starts
            cursor = int(client.status().get("lastEventId") or 0)
        server = _server_url(client, args.server) if args.server else None
    except DaemonUnavailable as exc:
        return _fail(args, "DAEMON_UNAVAILABLE", exc.message, exc.hint)
    except DaemonError as exc:
        return _fail(args, exc.error_code, exc.message, exc.hint)
    exact = server_filter(patterns)
    side = DaemonClient.from_options(args.api, quiet=True) if args.summary else None
    delay = RETRY_MIN_S
    away: str | None = None
    shown = 0
    with client:
        while True:
            try:
                for event_id, event_type, data in client.stream(
                    last_event_id=cursor, uri=exact, types="resource.updated"
                ):
                    delay = RETRY_MIN_S
                    if away is not None:
                        _note(f"the daemon is back; resuming after event {cursor}")
                        away = None
                    if event_type == "reset":
                        cursor = after_reset(data, cursor)
                        _note(f"history was pruned or replaced ({data}); going on from {cursor}")
                        continue
                    if event_id is None or event_id <= cursor:
                        continue  # already printed before a reconnect
                    cursor = event_id
                    if (
                        event_type == "resource.updated"
                        and matches(data.get("uri"), patterns)
                        and server in (None, data.get("serverUrl"))
                    ):
                        change = changed_line(side, data) if side is not None else None
                        _emit(tail_line(data, as_json=args.json, change=change))
                        shown += 1
                        if args.max_events is not None and shown >= args.max_events:
                            return 0
                reason = "the daemon closed the stream"
            except DaemonUnavailable as exc:
                reason = exc.message
            except DaemonError as exc:
                if exc.status in FATAL_STATUSES or exc.error_code == "SOCKET_NOT_TRUSTED":
                    return _fail(args, exc.error_code, exc.message, exc.hint)
                reason = exc.message
            if away is None:
                _note(f"{reason}; retrying (resumes after event {cursor})")
                away = reason
            time.sleep(delay)  # a retry interval, not synchronisation
            delay = min(delay * 2, RETRY_MAX_S)


def _server_url(client: Any, server: str) -> str:
    """``--server``'s URL: as given, or the URL of the watched server with that id (the ids
    ``AMBIGUOUS_URI`` and ``mcpsubctl status --json`` show); DaemonError when none has it."""
    from cli.localapi import DaemonError

    if not server.isdigit():
        from service.safetext import redact_urls

        return redact_urls(server)  # events carry the shown URL
    for link in client.status().get("links") or []:
        if link.get("serverId") == int(server):
            return str(link.get("url"))
    raise DaemonError(
        404,
        "NOT_WATCHED",
        f"no watched server has id {server}",
        "see `mcpsubctl status --json`",
        {},
    )


def cmd_hook(args: argparse.Namespace) -> int:
    """``mcpsubctl [global flags] hook AGENT``: the same as the fast path in cli.entry."""
    from cli.agent_hook import main

    argv = [args.agent] + (["--api", args.api] if args.api else [])
    return main(argv)


# ---- argparse wiring ----------------------------------------------------------------------
def add_agent_commands(
    sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]] | None = None
) -> None:
    """Add ``tail`` and ``hook`` to the subparsers and their handlers to ``commands``."""
    if commands is not None:
        commands.update(AGENT_COMMANDS)
    from cli.agent_hook import AGENTS
    from cli.parsing import sub_parser

    p = sub_parser(
        sub,
        "tail",
        help="daemon: one line per resource change until stopped (for Monitor and shell loops)",
        description="daemon: one line per resource change (event=ID uri=URI revision=N "
        "server=URL, or its JSON), flushed at once, until Ctrl-C (exit 130). It survives a "
        "daemon restart: it retries and resumes after the last event it printed. Pass "
        "--after ID (the event= of a line) to resume a tail that was stopped.",
    )
    p.add_argument(
        "--api",
        default=None,
        help="daemon API: unix:///path/api.sock or http://127.0.0.1:PORT "
        "(env MCPSUB_API; default <state dir>/api.sock)",
    )
    p.add_argument(
        "--json", action="store_true", help="each change as its event's JSON, one per line"
    )
    p.add_argument(
        "--uri",
        action="append",
        default=None,
        metavar="PATTERN",
        help="only these URIs: exact or shell-style pattern (test://review/*); repeatable",
    )
    p.add_argument(
        "--server",
        default=None,
        metavar="URL|ID",
        help="only the changes read from this server (its URL or id)",
    )
    p.add_argument(
        "--after",
        type=_event_id,
        default=None,
        metavar="ID",
        help="replay the changes after this event id first (default: only new ones)",
    )
    p.add_argument(
        "--summary",
        action="store_true",
        help='end each line with first_change(server data)="+line": the first changed '
        "line of the diff (at most 100 characters, quoted and escaped; server text, not "
        "instructions); --json: firstChange",
    )
    p.add_argument("--max-events", type=int, default=None, help=argparse.SUPPRESS)

    p = sub_parser(
        sub,
        "hook",
        help="run as an agent's prompt hook: the changes since this session's last prompt",
        description="Reads the hook's JSON on stdin and prints the JSON the agent documents "
        "for adding context (hookSpecificOutput.additionalContext) listing the resource "
        "changes since this session's previous call; nothing when nothing changed. Exits 0 "
        "even when the daemon is down (a note on stderr): it never blocks a prompt. "
        "docs/agents.md has each agent's hook config.",
    )
    p.add_argument("agent", choices=AGENTS, help="the agent running the hook")
    p.add_argument(
        "--api",
        default=None,
        help="daemon API: unix:///path/api.sock or http://127.0.0.1:PORT "
        "(env MCPSUB_API; default <state dir>/api.sock)",
    )


def _event_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"not an event id (an integer >= 0): {text!r}")
    return int(text)


AGENT_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "tail": cmd_tail,
    "hook": cmd_hook,
}
