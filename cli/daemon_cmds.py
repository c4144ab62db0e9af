"""``mcpsubctl`` commands that talk to the running daemon (``mcpsubd``) over its local API.

``subscribe``, ``unsubscribe``, ``list``, ``show``, ``status``, ``events``, ``read``, ``wait``.
Every command takes ``--api`` (see :mod:`cli.localapi`) and ``--json``. Errors print
``error-code``/``recommended-next-action`` lines (or one JSON object) on stdout, the message
on stderr, and exit with the code of their class (``docs/cli.md``); a daemon that is not
running is ``DAEMON_UNAVAILABLE`` (exit 10) with the command that starts it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cli.localapi import DaemonClient

# Imports of httpx and the engine happen inside the commands: `mcpsubctl --help` and the
# one-shot commands do not pay for them.

DEFAULT_WAIT_MS = 60_000.0
DEFAULT_READY_WAIT_MS = 30_000.0
READY_POLL_S = 0.1
DEFAULT_SUBSCRIBE_WAIT_MS = 30_000.0
POLL_CHUNK_MS = 300_000
"""Longest single long-poll; longer waits are several polls carrying the cursor on."""
FOLLOW_RETRY_S = 5.0


# API error codes the shared table (cli.failures.CTL_EXIT_CODES) does not know yet; the
# values are cli.failures' EXIT_NOT_FOUND (7), EXIT_USAGE (2), EXIT_AUTH (3) and
# EXIT_DAEMON_UNAVAILABLE (10).
def exit_code(code: str | None) -> int:
    from cli.failures import ctl_exit_code

    return ctl_exit_code(code)


def _output() -> Any:
    from cli import output

    return output


def _dumps(value: Any) -> str:
    from cli.output import dumps

    return dumps(value)


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


# ---- formatting (pure) ------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain aligned columns; the last column is not padded. Cells are shown safely: control
    and bidi characters escaped, credentials in URLs redacted (``service.safetext``)."""
    from service.safetext import shown

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


def event_line(event: dict[str, Any], now: float | None = None) -> str:
    """One event as a line. With ``now`` (stdout is a terminal: a person reads it now) the
    time is relative, ``12 s ago``, in the units of ``status``/``show``; without it (a pipe,
    a file: read later, grepped, compared with logs) it stays the absolute local time."""
    created = event.get("createdAt")
    if now is None:
        moment = when(created)
    else:
        from cli.human import ago

        moment = ago(created, now)
    parts = [str(event.get("id")), moment, str(event.get("type"))]
    if event.get("uri"):
        parts.append(str(event["uri"]))
    if event.get("revision") is not None:
        parts.append(f"rev={event['revision']}")
    data = event.get("data")
    if event.get("type") == "subscription.state" and isinstance(data, dict):
        parts.append(f"{data.get('previous')}->{data.get('state')}")
    from service.safetext import shown

    return "  ".join(shown(part) for part in parts)


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _sub_rows(subs: list[dict[str, Any]]) -> list[list[Any]]:
    return [[s["id"], s["state"], s["revision"], s["serverUrl"], s["uri"]] for s in subs]


SUB_HEADERS = ("ID", "STATE", "REV", "SERVER", "URI")


# ---- shared error path ----------------------------------------------------------------
def _fail(args: argparse.Namespace, code: str, message: str, hint: str | None) -> int:
    sys.stderr.write(f"mcpsubctl {args.command}: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    from cli.human import machine_lines_wanted

    if args.json:
        _emit(_dumps({"errorCode": code, "message": message, "recommendedNextAction": hint}))
    elif machine_lines_wanted(False, getattr(args, "lines", False)):
        _emit(f"error-code {code}\nrecommended-next-action {hint or 'null'}")
    return exit_code(code)


def _client(args: argparse.Namespace) -> DaemonClient:
    from cli.localapi import DaemonClient

    return DaemonClient.from_options(args.api, quiet=getattr(args, "quiet", False))


def _run(args: argparse.Namespace, body: Callable[[DaemonClient], int]) -> int:
    from cli.localapi import DaemonError, DaemonUnavailable

    try:
        client = _client(args)
    except ValueError as exc:
        return _fail(args, "USAGE_ERROR", str(exc), "see `mcpsubctl --help`")
    try:
        with client:
            return body(client)
    except DaemonUnavailable as exc:
        return _fail(args, "DAEMON_UNAVAILABLE", exc.message, exc.hint)
    except DaemonError as exc:
        return _fail(args, exc.error_code, exc.message, exc.hint)


# ---- commands -----------------------------------------------------------------------------
def cmd_subscribe(args: argparse.Namespace) -> int:
    """Subscribe, then (unless ``--no-wait``) wait until each subscription's first state is
    known: its first read, or the error that prevents it (issue 10 §4). The API itself
    answers at once; the waiting is this command's."""
    timeout_ms = args.timeout_ms if args.timeout_ms is not None else DEFAULT_SUBSCRIBE_WAIT_MS
    if not (timeout_ms > 0 and math.isfinite(timeout_ms)):
        return _fail(args, "USAGE_ERROR", "--timeout-ms must be a number > 0", None)

    def body(client: DaemonClient) -> int:
        results = []
        for uri in args.uri:
            sub, created = client.subscribe(args.url, uri)
            results.append({**sub, "created": created})
        from service.safetext import shown

        failure: tuple[str, str, str | None] | None = None
        if not args.no_wait:
            deadline = time.monotonic() + timeout_ms / 1000
            for index, item in enumerate(results):
                sub, code, hint = _first_state(client, item["id"], deadline)
                sub.pop("link", None)
                sub.pop("current", None)
                results[index] = {**item, **sub, "created": item["created"]}
                if code is not None and failure is None:
                    failure = (code, f"{shown(item['uri'])}: {code}", hint)
            pending = [r["uri"] for r in results if r["state"] == "pending"]
            if pending and failure is None:
                sys.stderr.write(
                    f"mcpsubctl subscribe: no first read within {timeout_ms:g} ms for "
                    f"{', '.join(pending)}; the daemon keeps trying (see `mcpsubctl status`)\n"
                )
        if failure is not None:
            code, message, hint = failure
            sys.stderr.write(f"mcpsubctl subscribe: {message}\n")
            if hint:
                sys.stderr.write(f"hint: {hint}\n")
        if args.json:
            body_json: dict[str, Any] = {"subscriptions": results}
            if failure is not None:
                body_json.update(errorCode=failure[0], recommendedNextAction=failure[2])
            _emit(_dumps(body_json))
        else:
            rows = [
                ["new" if s["created"] else "existing", *r]
                for s, r in zip(results, _sub_rows(results), strict=True)
            ]
            _emit(table(("", *SUB_HEADERS), rows))
            from cli.human import machine_lines_wanted

            if failure is not None and machine_lines_wanted(False, getattr(args, "lines", False)):
                _emit(f"error-code {failure[0]}\nrecommended-next-action {failure[2] or 'null'}")
        return exit_code(failure[0]) if failure is not None else 0

    return _run(args, body)


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    if (args.id is None) == (args.uri is None):
        return _fail(args, "USAGE_ERROR", "pass a subscription ID or --uri", "see --help")

    from cli.localapi import DaemonError

    def body(client: DaemonClient) -> int:
        if args.id is not None:
            ids = [args.id]
        else:
            subs = client.subscriptions()
            ids = [
                s["id"] for s in subs if s["uri"] == args.uri and args.url in (None, s["serverUrl"])
            ]
            if not ids:
                where = f" on {args.url}" if args.url else ""
                raise DaemonError(
                    404,
                    "SUBSCRIPTION_NOT_FOUND",
                    f"nothing watches {args.uri}{where}",
                    "list the subscriptions with `mcpsubctl list`",
                    {},
                )
        removed = [client.unsubscribe(i) for i in ids]
        if args.json:
            _emit(_dumps({"removed": removed}))
        else:
            _emit(table(SUB_HEADERS, _sub_rows(removed)))
        return 0

    return _run(args, body)


def cmd_list(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        subs = client.subscriptions()
        if args.json:
            _emit(_dumps({"subscriptions": subs}))
        else:
            _emit(table(SUB_HEADERS, _sub_rows(subs)) if subs else "no subscriptions")
        return 0

    return _run(args, body)


def cmd_show(args: argparse.Namespace) -> int:
    from cli.human import ago, error_text, listing, yes_no

    def body(client: DaemonClient) -> int:
        sub = client.subscription(args.id)
        if args.json:
            _emit(_dumps(sub))
            return 0
        link = sub.get("link") or {}
        current = sub.get("current") or {}
        rows = [
            ("id", sub["id"]),
            ("server", sub["serverUrl"]),
            ("uri", sub["uri"]),
            ("state", sub["state"]),
            ("reason", sub.get("stateReason")),
            ("revision", sub["revision"]),
            ("last read", _when_ago(sub.get("lastReadAt"), ago)),
            ("created", _when_ago(sub.get("createdAt"), ago)),
            ("link", link.get("state")),
            ("stream open", yes_no(link.get("streamOpen"))),
            ("honored", listing(link.get("honoredUris"))),
            ("reconnects", link.get("reconnects")),
            ("last error", error_text(link.get("lastErrorCode"), link.get("lastError"))),
        ]
        from service.safetext import shown, terminal_safe

        lines = [f"{k + ':':<13} {'-' if v is None else shown(v)}" for k, v in rows]
        if current:
            lines += ["text:", terminal_safe(str(current.get("text") or ""), keep_lines=True)]
        _emit("\n".join(lines))
        return 0

    return _run(args, body)


def _when_ago(ts: Any, ago: Callable[[Any], str]) -> str:
    return "-" if not isinstance(ts, (int, float)) else f"{ago(ts)} ({when(ts)})"


def cmd_status(args: argparse.Namespace) -> int:
    from cli.human import error_text, yes_no
    from service.statusline import duration

    def body(client: DaemonClient) -> int:
        st = _wait_ready(client, args) if args.wait_ready else client.status()
        if args.json:
            _emit(_dumps(st))
            return 0
        counts = ", ".join(f"{v} {k}" for k, v in st.get("counts", {}).items())
        states = ", ".join(f"{v} {k}" for k, v in st.get("subscriptionsByState", {}).items())
        ready = st.get("ready")
        lines = [
            f"mcpsubd {st.get('version')}: {'ready' if ready else 'not ready'}, "
            f"up {duration(st.get('uptimeSeconds'))}",
            f"last event id:  {st.get('lastEventId') if st.get('lastEventId') is not None else '-'}",
            f"counts:         {counts or '-'}",
            f"subscriptions:  {states or 'none'}",
        ]
        storage = st.get("storage") or {}
        if storage and not storage.get("ok", True):
            from service.safetext import shown

            lines.append(
                f"storage:        FAILING since {when(storage.get('since'))}: "
                f"{shown(storage.get('error'))} (writes retried; see docs/operations.md)"
            )
        hooks = st.get("webhooks") or {}
        if hooks:
            deliveries = ", ".join(f"{v} {k}" for k, v in (st.get("deliveries") or {}).items())
            lines += [
                f"webhooks:       {hooks.get('targets', 0)} targets, {hooks.get('enabled', 0)} enabled",
                f"deliveries:     {deliveries or '-'}",
            ]
        links = st.get("links") or []
        if links:
            rows = [
                [
                    ln.get("serverId"),
                    ln.get("state"),
                    yes_no(ln.get("streamOpen")),
                    ln.get("reconnects"),
                    ln.get("url"),
                    error_text(ln.get("lastErrorCode"), ln.get("lastError")),
                ]
                for ln in links
            ]
            lines += ["", table(("SERVER", "STATE", "STREAM", "RECONNECTS", "URL", "ERROR"), rows)]
            from service.safetext import shown

            hints = [ln for ln in links if ln.get("lastErrorHint")]
            for ln in hints:
                lines.append(shown(f"hint ({ln.get('url')}): {ln.get('lastErrorHint')}"))
        _emit("\n".join(lines))
        return 0

    return _run(args, body)


def _wait_ready(client: DaemonClient, args: argparse.Namespace) -> dict[str, Any]:
    """``status --wait-ready``: poll until the daemon answers and says ready (bounded)."""
    from cli.localapi import DaemonError, DaemonUnavailable
    from service.statusline import StatusLine

    timeout_ms = args.timeout_ms if args.timeout_ms is not None else DEFAULT_READY_WAIT_MS
    deadline = time.monotonic() + timeout_ms / 1000
    last: Exception | None = None
    with StatusLine.for_terminal(args.quiet) as status:
        status.phase(f"waiting for mcpsubd to be ready ({client.endpoint.display})")
        while True:
            try:
                st = client.status()
                if st.get("ready"):
                    return st
                last = DaemonError(503, "NOT_READY", "the daemon is not ready yet", None, st)
            except (DaemonUnavailable, DaemonError) as exc:
                last = exc
            if time.monotonic() >= deadline:
                break
            time.sleep(READY_POLL_S)
    if isinstance(last, DaemonError) and last.error_code != "NOT_READY":
        raise last
    raise DaemonUnavailable(
        f"the daemon was not ready within {timeout_ms:g} ms"
        + (f": {getattr(last, 'message', last)}" if last else ""),
        client.endpoint.start_hint(),
    )


def cmd_resubscribe(args: argparse.Namespace) -> int:
    """Reconnect links now, e.g. after upgrading a server the daemon parked in ``error``."""

    def body(client: DaemonClient) -> int:
        urls = client.resubscribe(args.url)
        if args.json:
            _emit(_dumps({"rechecked": urls}))
        else:
            _emit("\n".join(f"rechecking {u}" for u in urls) if urls else "no links to recheck")
        return 0

    return _run(args, body)


def cmd_read(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        content = client.content(args.uri, args.url)
        if args.json:
            _emit(_dumps(content))
        else:
            text = content.get("text")
            _emit(text if text is not None else _dumps(content.get("contents")))
        return 0

    return _run(args, body)


def cmd_events(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        if args.follow:
            return _follow(client, args)
        page = client.events(args.since or 0, args.limit, args.uri, args.type)
        if args.json:
            _emit(_dumps(page))
        elif not page["events"]:
            _emit("no events" + (f" after {args.since}" if args.since else ""))
        else:
            human = _stdout_is_terminal()
            for event in page["events"]:
                _emit(event_line(event, time.time() if human else None))
        return 0

    return _run(args, body)


def _follow(client: DaemonClient, args: argparse.Namespace) -> int:
    from cli.localapi import DaemonError, DaemonUnavailable

    last: int | None = args.since
    if last is None:
        last = int(client.status().get("lastEventId") or 0)
    seen = 0
    human = _stdout_is_terminal()
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
                        _emit(_dumps(data))
                    else:
                        now = time.time() if human else None
                        _emit(event_line(data, now) if event_type != "reset" else f"reset {data}")
                    seen += 1
                    if args.max_events is not None and seen >= args.max_events:
                        return 0
            except (DaemonUnavailable, DaemonError) as exc:
                sys.stderr.write(f"events: {exc}; reconnecting in {FOLLOW_RETRY_S:g} s\n")
            except OSError as exc:  # the stream broke (daemon restart)
                sys.stderr.write(f"events: stream lost ({exc}); reconnecting\n")
            else:
                sys.stderr.write("events: the daemon closed the stream; reconnecting\n")
            time.sleep(FOLLOW_RETRY_S)
    except KeyboardInterrupt:
        return 0


# ---- wait -------------------------------------------------------------------------------
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
    from service.probe import ProbeResult

    result = ProbeResult(server_url or "", uri, [uri])
    result.resource_found = True
    return result


def _print_wait(args: argparse.Namespace, result: Any, event_id: Any, revision: Any) -> None:
    # The keys of `mcpsubctl probe --json`, in its order, then eventId and revision.
    extra = {
        "resourceUris": [result.resource_uri],
        "notificationUri": result.notification_uri,
        "eventId": event_id,
        "revision": revision,
    }
    if args.json:
        _emit(_output().dumps(_output().probe_json(result, extra)))
        return
    lines = _output().probe_lines(result).split("\n")
    if result.capabilities is None and lines[0] == "capabilities null":
        lines = lines[1:]  # the daemon has not discovered the server (yet): no line, not null
    lines[-1:-1] = [
        f"event-id {event_id if event_id is not None else 'null'}",
        f"revision {revision if revision is not None else 'null'}",
    ]
    _emit("\n".join(lines))


def _wait_failure(args: argparse.Namespace, code: str, message: str, hint: str | None) -> int:
    sys.stderr.write(f"wait failed: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    from cli.human import machine_lines_wanted

    if args.json:
        extra = {
            "resourceUris": [args.uri],
            "notificationUri": None,
            "message": message,
            "eventId": None,
            "revision": None,
        }
        _emit(_output().dumps(_output().failure_json(code, hint, args.url, args.uri, extra)))
    elif machine_lines_wanted(False, getattr(args, "lines", False)):
        _emit(_output().failure_lines(code, hint, args.url, args.uri))
    return exit_code(code)


def cmd_wait(args: argparse.Namespace) -> int:
    timeout_ms = _wait_timeout_ms(args)
    if timeout_ms is None:
        return _wait_failure(args, "USAGE_ERROR", "--timeout-ms must be a number > 0", None)
    from cli.localapi import DaemonError, DaemonUnavailable

    try:
        client = _client(args)
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


FIRST_STATE_POLL_S = (0.02, 0.25)
"""Polling interval while waiting for a subscription's first state (grows to the cap)."""
LINK_FAILED_STATES = ("error", "login_required", "throttled", "backoff")
SUBSCRIPTION_HINTS = {
    "SUBSCRIPTION_NOT_HONORED": "the server acknowledged the stream without this URI; check "
    "it with `mcpsubctl probe --url URL --uri URI`",
    "AUTH_LOGIN_REQUIRED": "run `mcpsubctl login URL`; the daemon picks the token up",
}


def _first_state(
    client: DaemonClient, subscription_id: int, deadline: float
) -> tuple[dict[str, Any], str | None, str | None]:
    """Poll until the subscription's first state is known: (subscription, code, hint).

    Known means a first revision was read (``code`` None), or the subscription or its link
    failed (``code`` = the daemon's error code: RESOURCE_NOT_FOUND, PROTOCOL_UNSUPPORTED,
    CONNECTION_REFUSED, …). On the deadline the subscription is returned as it is, with
    ``code`` None and ``state`` still ``pending``.
    """
    from cli.failures import RESOURCE_NOT_FOUND_HINT

    pause = FIRST_STATE_POLL_S[0]
    while True:
        sub = client.subscription(subscription_id)
        link = sub.get("link") or {}
        failed = sub.get("state") in ("error", "not_honored", "login_required")
        if sub.get("revision", 0) >= 1 and not failed:
            return sub, None, None
        if failed:
            code = sub.get("stateCode") or link.get("lastErrorCode") or "INTERNAL_ERROR"
            hint = link.get("lastErrorHint") if code == link.get("lastErrorCode") else None
            if code == "RESOURCE_NOT_FOUND":
                hint = RESOURCE_NOT_FOUND_HINT
            return sub, code, hint or SUBSCRIPTION_HINTS.get(code)
        if link.get("state") in LINK_FAILED_STATES and link.get("lastErrorCode"):
            hint = link.get("lastErrorHint")
            if link.get("state") == "backoff":
                hint = (hint + "; " if hint else "") + "the daemon keeps retrying"
            return sub, str(link["lastErrorCode"]), hint
        if time.monotonic() >= deadline:
            return sub, None, None
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, FIRST_STATE_POLL_S[1])


def _find_subscription(client: DaemonClient, uri: str, url: str | None) -> dict[str, Any] | None:
    for sub in client.subscriptions():
        if sub["uri"] == uri and url in (None, sub["serverUrl"]):
            return sub
    return None


def _wait_daemon(client: DaemonClient, args: argparse.Namespace, timeout_ms: float) -> int:
    """Wait for a revision newer than the baseline (issue 10 §2).

    The baseline is the revision current when ``wait`` starts (or the one of ``--after``).
    A URI the daemon does not watch yet is subscribed (with ``--url``); its first revision
    is then the baseline, not an update, and the change after it is what ``wait`` returns,
    all within ``--timeout-ms``.
    """
    from cli.localapi import DaemonError

    uri: str = args.uri
    deadline = time.monotonic() + timeout_ms / 1000
    current: dict[str, Any] | None = None
    sub_id: int | None = None
    try:
        current = client.content(uri, args.url)
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
            _sub, code, hint = _first_state(client, sub_id, deadline)
            if code is not None:
                return _wait_failure(args, code, f"the subscription of {uri} failed: {code}", hint)
        current = _current_or_none(client, uri, args.url)
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
            got = client.wait(uri, url=args.url, after=after, timeout_ms=chunk)
            break
        except DaemonError as exc:
            if exc.error_code != "NOTIFICATION_TIMEOUT":
                raise
            after = exc.body.get("after", after)
            if time.monotonic() < deadline:
                continue
            return _wait_timed_out(client, args, result, current, timeout_ms)
    event, revision = got["event"], got.get("revision") or {}
    previous = got.get("previous")
    if isinstance(previous, dict) and "text" in previous:
        # The revision just before the one returned is the baseline, exactly (it also covers
        # --after and a change that landed between reading `current` and the long-poll).
        result.initial_text = previous["text"]
    link = _link(client, event.get("subscriptionId"))
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
    return 0


def _current_or_none(client: DaemonClient, uri: str, url: str | None) -> dict[str, Any] | None:
    from cli.localapi import DaemonError

    try:
        return client.content(uri, url)
    except DaemonError as exc:
        if exc.error_code in ("NO_CONTENT_YET", "NOT_WATCHED"):
            return None
        raise


def _link(client: DaemonClient, subscription_id: Any) -> dict[str, Any]:
    from cli.localapi import DaemonError

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
    from service.safetext import shown

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


# ---- argparse wiring ------------------------------------------------------------------
EVENT_TYPES = (
    "subscription.created",
    "subscription.deleted",
    "subscription.state",
    "resource.updated",
    "webhook.disabled",
)
"""Every type the daemon writes to its event log (docs/api.md#events)."""


def event_types(text: str) -> str:
    """``--type``: comma-separated event types; an unknown one is a usage error listing all."""
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in EVENT_TYPES]
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(
            f"invalid event type {', '.join(unknown) or repr(text)} "
            f"(choose from {', '.join(EVENT_TYPES)})"
        )
    return ",".join(wanted)


def _common(p: argparse.ArgumentParser, *, follow: bool = False) -> None:
    from cli.parsing import add_quiet

    p.add_argument(
        "--api",
        default=None,
        help="daemon API: unix:///path/api.sock or http://127.0.0.1:PORT "
        "(env MCPSUB_API; default <state dir>/api.sock)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object on stdout" + (" (NDJSON with --follow)" if follow else ""),
    )
    add_quiet(p)


def add_daemon_commands(sub: Any) -> None:
    """Add the daemon commands to ``mcpsubctl``'s subparsers."""
    from cli.parsing import sub_parser

    p = sub_parser(sub, "subscribe", help="daemon: watch URIs on a server")
    _common(p)
    p.add_argument("--url", required=True, help="MCP endpoint URL")
    p.add_argument("--uri", action="append", required=True, help="resource URI (repeatable)")
    p.add_argument(
        "--no-wait",
        action="store_true",
        help="return at once instead of waiting for each subscription's first state",
    )
    p.add_argument(
        "--timeout-ms",
        type=float,
        default=None,
        help=f"longest wait for the first state (default {DEFAULT_SUBSCRIBE_WAIT_MS:g})",
    )

    p = sub_parser(sub, "unsubscribe", help="daemon: stop watching (by ID or --uri)")
    _common(p)
    p.add_argument("id", nargs="?", type=int, default=None, help="subscription ID")
    p.add_argument("--uri", default=None, help="remove the subscriptions of this URI")
    p.add_argument("--url", default=None, help="only on this server")

    p = sub_parser(sub, "list", help="daemon: list subscriptions")
    _common(p)

    p = sub_parser(sub, "show", help="daemon: one subscription, its link and current revision")
    _common(p)
    p.add_argument("id", type=int, help="subscription ID")

    p = sub_parser(sub, "status", help="daemon: version, links, counts")
    _common(p)
    p.add_argument(
        "--wait-ready",
        action="store_true",
        help="wait until the daemon answers and is ready (for scripts started with it); "
        "exit 10 if it is not within --timeout-ms",
    )
    p.add_argument(
        "--timeout-ms",
        type=float,
        default=None,
        help="how long --wait-ready waits, in ms (default 30000)",
    )

    p = sub_parser(
        sub, "resubscribe", help="daemon: reconnect links now (after a server upgrade or login)"
    )
    _common(p)
    p.add_argument("--url", default=None, help="only the link to this server")

    p = sub_parser(
        sub,
        "events",
        help="daemon: the event log (or --follow it)",
        description="daemon: the event log (or --follow it). On a terminal each event's "
        "time reads '12 s ago'; in a pipe or a file it is the absolute local time; --json "
        "keeps the raw data (createdAt in epoch seconds).",
    )
    _common(p, follow=True)
    p.add_argument(
        "--follow",
        action="store_true",
        help="stream new events (SSE) until Ctrl-C, which exits 0",
    )
    p.add_argument("--since", type=int, default=None, help="only events after this id")
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

    p = sub_parser(sub, "read", help="daemon: the current content of a URI")
    _common(p)
    p.add_argument("--uri", required=True, help="resource URI")
    p.add_argument("--url", default=None, help="server URL, when several watch the URI")

    p = sub_parser(sub, "wait", help="daemon: wait for the next update of a URI")
    _common(p)
    p.add_argument("--uri", required=True, help="resource URI")
    p.add_argument("--url", default=None, help="server URL; subscribes first when not watched")
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


DAEMON_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "subscribe": cmd_subscribe,
    "unsubscribe": cmd_unsubscribe,
    "list": cmd_list,
    "show": cmd_show,
    "status": cmd_status,
    "resubscribe": cmd_resubscribe,
    "events": cmd_events,
    "read": cmd_read,
    "wait": cmd_wait,
}
