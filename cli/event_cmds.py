"""``mcpsubctl events`` (a page of the event log, or ``--follow`` it) and ``mcpsubctl read``.

Conventions (flags, errors, exit codes) are :mod:`cli.apicmd`'s. Both are called by agent
scripts in loops, so they import nothing beyond the thin API client on their way
(``results/cli.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from cli.apicmd import (
    DaemonClient,
    DaemonError,
    DaemonUnavailable,
    api_flags,
    emit,
    json_text,
    run,
    stdout_is_terminal,
)
from service.eventtypes import EVENT_TYPES, unknown_types
from service.safetext import shown

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

FOLLOW_RETRY_S = 5.0


# ---- formatting (pure) ------------------------------------------------------------------
def _moment(event: dict[str, Any], now: float | None) -> str:
    """With ``now`` (stdout is a terminal: a person reads it now) the time is relative,
    ``12 s ago``, in the units of ``status``/``show``; without it (a pipe, a file: read
    later, grepped, compared with logs) it stays the absolute local time."""
    from cli.apicmd import when

    if now is None:
        return when(event.get("createdAt"))
    from cli.human import ago

    return ago(event.get("createdAt"), now)


def _detail(event: dict[str, Any]) -> str | None:
    data = event.get("data")
    if not isinstance(data, dict):
        return None
    if event.get("type") == "subscription.state":
        return f"{data.get('previous')}->{data.get('state')}"
    if event.get("type") == "daemon.storage":
        return str(data.get("state"))
    if "targetId" in data:
        return f"target={data['targetId']}"
    return None


def event_line(event: dict[str, Any], now: float | None = None) -> str:
    """One event as a line, fields two spaces apart (for pipes and files): id, time, type,
    then the URI, ``rev=N`` and the state change when the event has them."""
    parts = [str(event.get("id")), _moment(event, now), str(event.get("type"))]
    if event.get("uri"):
        parts.append(str(event["uri"]))
    if event.get("revision") is not None:
        parts.append(f"rev={event['revision']}")
    data = event.get("data")
    if event.get("type") == "subscription.state" and isinstance(data, dict):
        parts.append(f"{data.get('previous')}->{data.get('state')}")
    return "  ".join(shown(part) for part in parts)


def event_table(events: list[dict[str, Any]], now: float) -> str:
    """Events as aligned columns, for a terminal."""
    from cli.apicmd import table

    rows = [
        [
            e.get("id"),
            _moment(e, now),
            e.get("type"),
            e.get("uri"),
            e.get("revision"),
            _detail(e),
        ]
        for e in events
    ]
    return table(("ID", "WHEN", "TYPE", "URI", "REV", "DETAIL"), rows)


# ---- events ---------------------------------------------------------------------------------
def cmd_events(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        if args.follow:
            return _follow(client, args)
        page = client.events(args.since or 0, args.limit, args.uri, args.type)
        if args.json:
            emit(json_text(page))
        elif not page["events"]:
            emit("no events" + (f" after {args.since}" if args.since else ""))
        elif stdout_is_terminal():
            emit(event_table(page["events"], time.time()))
        else:
            for event in page["events"]:
                emit(event_line(event))
        return 0

    return run(args, body)


def _follow(client: DaemonClient, args: argparse.Namespace) -> int:
    last: int | None = args.since
    if last is None:
        last = int(client.status().get("lastEventId") or 0)
    seen = 0
    human = stdout_is_terminal()
    try:
        while True:
            try:
                for event_id, event_type, data in client.stream(
                    last_event_id=last, uri=args.uri, types=args.type
                ):
                    if event_id is not None:
                        last = event_id
                    if event_type == "reset":
                        data = {"type": "reset", **data}
                        sys.stderr.write("events: history was pruned past the cursor (reset)\n")
                    if args.json:
                        emit(json_text(data))
                    else:
                        now = time.time() if human else None
                        emit(event_line(data, now) if event_type != "reset" else f"reset {data}")
                    seen += 1
                    if args.max_events is not None and seen >= args.max_events:
                        return 0
            except (DaemonUnavailable, DaemonError) as exc:
                sys.stderr.write(f"events: {exc}; reconnecting in {FOLLOW_RETRY_S:g} s\n")
            else:
                sys.stderr.write("events: the daemon closed the stream; reconnecting\n")
            time.sleep(FOLLOW_RETRY_S)
    except KeyboardInterrupt:
        return 0


# ---- read -----------------------------------------------------------------------------------
def cmd_read(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        content = client.content(args.uri, args.url, args.server)
        if args.json:
            emit(json_text(content))
            return 0
        text = content.get("text")
        if text is None:
            emit(json_text(content.get("contents")))
        elif args.raw or not stdout_is_terminal():
            emit(text)  # the bytes as stored: for pipes, files and diff tools
        else:  # a person's terminal: the server's text must not drive it (as `show` does)
            from service.safetext import terminal_safe

            emit(terminal_safe(text, keep_lines=True))
        return 0

    return run(args, body)


# ---- argparse wiring ------------------------------------------------------------------------
def event_types(text: str) -> str:
    """``--type``: comma-separated event types; an unknown one is a usage error listing all."""
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    unknown = unknown_types(wanted)
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(
            f"invalid event type {', '.join(unknown) or repr(text)} "
            f"(choose from {', '.join(EVENT_TYPES)})"
        )
    return ",".join(wanted)


def register(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add ``events`` and ``read`` to ``mcpsubctl``'s subparsers and ``commands``."""
    from cli.parsing import sub_parser

    p = sub_parser(
        sub,
        "events",
        help="daemon: the event log (or --follow it)",
        description="daemon: the event log (or --follow it). On a terminal the events are "
        "aligned columns and each time reads '12 s ago'; in a pipe or a file each event is "
        "one line with the absolute local time; --json keeps the raw data (createdAt in "
        "epoch seconds).",
    )
    api_flags(p, follow=True)
    p.add_argument(
        "--follow",
        action="store_true",
        help="stream new events (SSE) until Ctrl-C, which exits 0",
    )
    p.add_argument(  # --after, as the API's ?after= and wait/tail/deliveries; --since still works
        "--after",
        "--since",
        dest="since",
        metavar="ID",
        type=int,
        default=None,
        help="only events after this id",
    )
    p.add_argument("--limit", type=int, default=100, help="page size without --follow (<=1000)")
    p.add_argument("--uri", default=None, help="only events of this URI")
    types = p.add_argument(
        "--type",
        type=event_types,
        default=None,
        metavar="TYPE[,TYPE…]",
        help="only these types (comma-separated): " + ", ".join(EVENT_TYPES),
    )
    types.completion_choices = EVENT_TYPES  # type: ignore[attr-defined]  # cli.parsertree
    p.add_argument("--max-events", type=int, default=None, help=argparse.SUPPRESS)

    p = sub_parser(
        sub,
        "read",
        help="daemon: the current content of a URI",
        description="daemon: the current content of a URI. On a terminal, control and bidi "
        "characters in the text are shown escaped (\\x1b), as every other command shows "
        "server text; to a pipe or a file, or with --raw, the text is written as stored.",
    )
    api_flags(p)
    p.add_argument(
        "--raw",
        action="store_true",
        help="write the text as stored even to a terminal (escape sequences included)",
    )
    p.add_argument("--uri", required=True, help="resource URI")
    p.add_argument("--url", default=None, help="server URL, when several watch the URI")
    p.add_argument(
        "--server",
        default=None,
        metavar="URL|ID",
        help="the server (its URL or id), when several watch the URI (else AMBIGUOUS_URI)",
    )
    commands.update(events=cmd_events, read=cmd_read)
