"""``mcpsubctl wait``: wait for the next update of a URI through the daemon (or ``--direct``).

The output is ``mcpsubctl probe``'s (same keys, same order) plus ``eventId`` and
``revision``, so a script can switch between the two. Agent scripts call it in loops: the
path to the long-poll imports only the thin API client (``results/cli.md``); the probe
engine is imported only by ``--direct`` without a daemon.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable

from cli import apicmd
from cli.apicmd import (
    DaemonClient,
    DaemonError,
    DaemonUnavailable,
    api_flags,
    exit_code,
    machine_lines_wanted,
)
from cli.subscription_cmds import first_state
from service.safetext import shown

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

DEFAULT_WAIT_MS = 60_000.0
POLL_CHUNK_MS = 300_000
"""Longest single long-poll; longer waits are several polls carrying the cursor on."""


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _wait_timeout_ms(args: argparse.Namespace) -> float | None:
    value = args.timeout_ms
    if value is None:
        raw = os.environ.get("MCP_PROBE_TIMEOUT_MS")
        try:
            value = float(raw) if raw else DEFAULT_WAIT_MS
        except ValueError:
            return None
    return value if value > 0 and math.isfinite(value) else None


def _probe_result(uri: str, server_url: str | None) -> Any:
    from service.proberesult import ProbeResult

    result = ProbeResult(server_url or "", uri, [uri])
    result.resource_found = True
    return result


def _print_wait(args: argparse.Namespace, result: Any, event_id: Any, revision: Any) -> None:
    from cli import output

    # The keys of `mcpsubctl probe --json`, in its order, then eventId and revision.
    extra = {
        "resourceUris": [result.resource_uri],
        "notificationUri": result.notification_uri,
        "eventId": event_id,
        "revision": revision,
    }
    if args.json:
        _emit(output.json_text(output.probe_json(result, extra)))
        return
    lines = output.probe_lines(result).split("\n")
    if result.capabilities is None and lines[0] == "capabilities null":
        lines = lines[1:]  # the daemon has not discovered the server (yet): no line, not null
    lines[-1:-1] = [
        f"event-id {event_id if event_id is not None else 'null'}",
        f"revision {revision if revision is not None else 'null'}",
    ]
    _emit("\n".join(lines))


def _wait_failure(args: argparse.Namespace, code: str, message: str, hint: str | None) -> int:
    from cli import output

    sys.stderr.write(f"wait failed: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    if args.json:
        extra = {
            "resourceUris": [args.uri],
            "notificationUri": None,
            "message": message,
            "eventId": None,
            "revision": None,
        }
        _emit(output.json_text(output.failure_json(code, hint, args.url, args.uri, extra)))
    elif machine_lines_wanted(False, getattr(args, "lines", False)):
        _emit(output.failure_lines(code, hint, args.url, args.uri))
    return exit_code(code)


def cmd_wait(args: argparse.Namespace) -> int:
    timeout_ms = _wait_timeout_ms(args)
    if timeout_ms is None:
        return _wait_failure(args, "USAGE_ERROR", "--timeout-ms must be a number > 0", None)
    try:
        client = apicmd.client(args)
    except ValueError as exc:
        return _wait_failure(args, "USAGE_ERROR", str(exc), "see `mcpsubctl wait --help`")
    try:
        with client:
            from service.statusline import StatusLine

            with StatusLine.for_terminal(args.quiet) as status:
                status.phase(f"waiting for an update of {args.uri} (mcpsubd)")
                return _wait_daemon(client, args, timeout_ms)
    except DaemonUnavailable as exc:
        if args.direct:
            sys.stderr.write("wait: the daemon is not running; probing the server directly\n")
            return _wait_direct(args, timeout_ms)
        return _wait_failure(
            args,
            "DAEMON_UNAVAILABLE",
            exc.message,
            exc.hint + "; or pass --direct --url URL to probe without it",
        )
    except DaemonError as exc:
        return _wait_failure(args, exc.error_code, exc.message, exc.hint)


def _find_subscription(client: DaemonClient, uri: str, url: str | None) -> dict[str, Any] | None:
    for sub in client.subscriptions():
        if sub["uri"] == uri and url in (None, sub["serverUrl"]):
            return sub
    return None


def _wait_daemon(client: DaemonClient, args: argparse.Namespace, timeout_ms: float) -> int:
    """Wait for a revision newer than the baseline.

    The baseline is the revision current when ``wait`` starts (or the one of ``--after``).
    A URI the daemon does not watch yet is subscribed (with ``--url``); its first revision
    is then the baseline, not an update, and the change after it is what ``wait`` returns,
    all within ``--timeout-ms``.
    """
    uri: str = args.uri
    deadline = time.monotonic() + timeout_ms / 1000
    if args.after is not None:
        got = _update_after(client, args)
        if got is not None:
            _print_update(args, _probe_result(uri, args.url), got)
            return 0
    current: dict[str, Any] | None = None
    sub_id: int | None = None
    try:
        current = client.content(uri, args.url, args.server)
    except DaemonError as exc:
        if exc.error_code == "NOT_WATCHED":
            if not args.url:
                raise DaemonError(
                    exc.status,
                    exc.error_code,
                    exc.message,
                    "pass --url URL to subscribe and wait, or run "
                    "`mcpsubctl subscribe --url URL --uri URI` first",
                    exc.body,
                ) from None
            sub, _created = client.subscribe(args.url, uri)
            sub_id = sub["id"]
            sys.stderr.write(f"wait: subscribed to {uri} on {args.url}\n")
        elif exc.error_code != "NO_CONTENT_YET":
            raise
    result = _probe_result(uri, args.url or (current or {}).get("serverUrl"))
    if current is None:
        # No baseline yet: the subscription's first read is the baseline, not an update.
        if sub_id is None:
            found = _find_subscription(client, uri, args.url)
            sub_id = found["id"] if found else None
        if sub_id is not None:
            _sub, code, hint = first_state(client, sub_id, deadline)
            if code is not None:
                return _wait_failure(args, code, f"the subscription of {uri} failed: {code}", hint)
        current = _current_or_none(client, uri, args.url, args.server)
        if current is None:
            return _wait_timed_out(client, args, result, None, timeout_ms)
    result.server_url = result.server_url or current.get("serverUrl") or ""
    baseline_event = current.get("eventId")
    after: int | None = args.after if args.after is not None else baseline_event
    if args.after is None or (baseline_event is not None and baseline_event <= args.after):
        result.initial_text = current.get("text")
    while True:
        chunk = min(POLL_CHUNK_MS, max(1, math.ceil((deadline - time.monotonic()) * 1000)))
        try:
            got = client.wait(uri, url=args.url, after=after, timeout_ms=chunk, server=args.server)
            break
        except DaemonError as exc:
            if exc.error_code != "NOTIFICATION_TIMEOUT":
                raise
            after = exc.body.get("after", after)
            if time.monotonic() < deadline:
                continue
            return _wait_timed_out(client, args, result, current, timeout_ms)
    if "link" not in got:  # a daemon older than the answer's link
        got["link"] = _link(client, got["event"].get("subscriptionId"))
    _print_update(args, result, got)
    return 0


def _update_after(client: DaemonClient, args: argparse.Namespace) -> dict[str, Any] | None:
    """The update after ``--after`` if there is one already, in one request (the common
    case of a script's loop); None sends ``wait`` down the full path (a URI not
    watched yet, no update yet, an older daemon), which asks again from the start."""
    try:
        got = client.wait(
            args.uri, url=args.url, after=args.after, timeout_ms=1, server=args.server
        )
    except DaemonError:
        return None
    return got if isinstance(got.get("link"), dict) else None


def _print_update(args: argparse.Namespace, result: Any, got: dict[str, Any]) -> None:
    uri: str = args.uri
    event, revision = got["event"], got.get("revision") or {}
    previous = got.get("previous")
    if isinstance(previous, dict) and "text" in previous:
        # The revision just before the one returned is the baseline, exactly (it also covers
        # --after and a change that landed between reading `current` and the long-poll).
        result.initial_text = previous["text"]
    link = got["link"] if isinstance(got.get("link"), dict) else {}
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    notified = data.get("trigger") == "notification"
    result.server_url = revision.get("serverUrl") or event.get("serverUrl") or result.server_url
    # A notification led to the read → route subscription; a re-read after a (re)listen
    # found the change → pre-completion, as the probe says it (seed §3.5).
    result.route = "subscription" if notified else "pre-completion"
    result.capabilities = link.get("capabilities")
    result.listen_acknowledged = bool(link.get("streamOpen", True))
    result.honored_uris = list(link.get("honoredUris") or [uri])
    result.notification_count = 1 if notified else 0
    result.notification_uri = uri if notified else None
    result.final_text = revision.get("text")
    _print_wait(args, result, event.get("id"), revision.get("revision", event.get("revision")))


def _current_or_none(
    client: DaemonClient, uri: str, url: str | None, server: str | None = None
) -> dict[str, Any] | None:
    try:
        return client.content(uri, url, server)
    except DaemonError as exc:
        if exc.error_code in ("NO_CONTENT_YET", "NOT_WATCHED"):
            return None
        raise


def _link(client: DaemonClient, subscription_id: Any) -> dict[str, Any]:
    if not isinstance(subscription_id, int):
        return {}
    try:
        link = client.subscription(subscription_id).get("link")
    except DaemonError:
        return {}
    return link if isinstance(link, dict) else {}


def _wait_timed_out(
    client: DaemonClient,
    args: argparse.Namespace,
    result: Any,
    current: dict[str, Any] | None,
    timeout_ms: float,
) -> int:
    sub_id = (current or {}).get("subscriptionId")
    sub: dict[str, Any] | None = None
    if sub_id is None:  # nothing read yet: the (first) subscription of the URI
        sub = _find_subscription(client, args.uri, args.url)
        if sub is not None:
            sub_id = sub["id"]
            result.server_url = result.server_url or sub["serverUrl"]
    link = _link(client, sub_id)
    result.route = "timeout"
    result.error_code = "NOTIFICATION_TIMEOUT"
    result.capabilities = link.get("capabilities")
    result.listen_acknowledged = bool(link.get("streamOpen", False))
    result.honored_uris = list(link.get("honoredUris") or [])
    sys.stderr.write(f"wait: no update of {shown(args.uri)} within {timeout_ms:g} ms\n")
    if link.get("lastErrorCode"):
        code = link["lastErrorCode"]
        sys.stderr.write(f"hint: the daemon's link to the server reports {code}: ")
        sys.stderr.write(f"{shown(link.get('lastError'))} (see `mcpsubctl status`)\n")
        if link.get("lastErrorHint"):
            sys.stderr.write(f"hint: {link['lastErrorHint']}\n")
    _print_wait(args, result, None, (current or {}).get("revision"))
    return exit_code("NOTIFICATION_TIMEOUT")


def _wait_direct(args: argparse.Namespace, timeout_ms: float) -> int:
    if not args.url:
        return _wait_failure(
            args, "SERVER_URL_UNKNOWN", "--direct needs --url", "pass --url with --direct"
        )
    from cli.runner import run_subscribe_probe

    token = os.environ.get("MCPSUB_AUTH_TOKEN") or os.environ.get("MCP_PROBE_AUTH_TOKEN")
    outcome = run_subscribe_probe(
        url=args.url,
        uris=[args.uri],
        explicit_token=token or None,
        timeout_ms=timeout_ms,
        skip_list_check=False,
        ca_cert=None,
        compat=False,
        client_name="mcpsubctl",
        program="mcpsubctl",
        quiet=args.quiet,
    )
    if outcome.failure is not None:
        f = outcome.failure
        return _wait_failure(args, f.code, f.message, f.hint)
    result = outcome.result
    if result.error_message:
        sys.stderr.write(f"wait: {result.error_message}\n")
    _print_wait(args, result, None, None)
    return exit_code(result.error_code)


def register(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add ``wait`` to ``mcpsubctl``'s subparsers and ``commands``."""
    from cli.parsing import sub_parser

    p = sub_parser(sub, "wait", help="daemon: wait for the next update of a URI")
    api_flags(p)
    p.add_argument("--uri", required=True, help="resource URI")
    p.add_argument("--url", default=None, help="server URL; subscribes first when not watched")
    p.add_argument(
        "--server",
        default=None,
        metavar="URL|ID",
        help="the server (its URL or id), when several watch the URI (else AMBIGUOUS_URI)",
    )
    p.add_argument(
        "--after",
        type=int,
        default=None,
        help="event id; default: the revision current when wait starts",
    )
    p.add_argument(
        "--timeout-ms",
        type=float,
        default=None,
        help="how long to wait, in ms (env MCP_PROBE_TIMEOUT_MS; default 60000)",
    )
    p.add_argument(
        "--direct", action="store_true", help="without a daemon, probe the server once instead"
    )
    commands["wait"] = cmd_wait
