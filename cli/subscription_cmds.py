"""``mcpsubctl subscribe|unsubscribe|list|show|status|resubscribe``: the daemon's subscriptions.

Conventions (flags, errors, exit codes) are :mod:`cli.apicmd`'s. ``subscribe`` waits for
each subscription's first state (its first read, or the error that prevents it) unless
``--no-wait``; ``status --wait-ready`` waits for a daemon that is starting.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable

from cli.apicmd import (
    DaemonClient,
    DaemonError,
    DaemonUnavailable,
    api_flags,
    emit,
    exit_code,
    fail,
    json_text,
    machine_lines_wanted,
    run,
    table,
    when,
)
from service.safetext import redact_urls, shown

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

DEFAULT_READY_WAIT_MS = 30_000.0
READY_POLL_S = 0.1
FINAL_CODES = ("SOCKET_NOT_TRUSTED", "NOT_MCPSUBD")
"""What ``status --wait-ready`` does not wait out: what serves the socket is not the daemon."""
DEFAULT_SUBSCRIBE_WAIT_MS = 30_000.0
FIRST_STATE_POLL_S = (0.02, 0.25)
"""Polling interval while waiting for a subscription's first state (grows to the cap)."""
SUBSCRIBE_TIMEOUT_HINT = (
    "the daemon keeps trying; `mcpsubctl show ID` tells when the first read is stored "
    "(or why not), or wait longer with --timeout-ms"
)

SUB_HEADERS = ("ID", "STATE", "REV", "SERVER", "URI")


def sub_rows(subs: list[dict[str, Any]], state: str | None = None) -> list[list[Any]]:
    """Table rows; ``state`` replaces each row's state (``removed`` after unsubscribe)."""
    return [[s["id"], state or s["state"], s["revision"], s["serverUrl"], s["uri"]] for s in subs]


# ---- subscribe ------------------------------------------------------------------------------
def cmd_subscribe(args: argparse.Namespace) -> int:
    """Subscribe, then (unless ``--no-wait``) wait until each subscription's first state is
    known: its first read, or the error that prevents it. The API itself
    answers at once; the waiting is this command's."""
    timeout_ms = args.timeout_ms if args.timeout_ms is not None else DEFAULT_SUBSCRIBE_WAIT_MS
    if not (timeout_ms > 0 and math.isfinite(timeout_ms)):
        return fail(args, "USAGE_ERROR", "--timeout-ms must be a number > 0", None)

    def body(client: DaemonClient) -> int:
        results = []
        for uri in args.uri:
            sub, created = client.subscribe(args.url, uri)
            results.append({**sub, "created": created})
        failure: tuple[str, str, str | None] | None = None
        if not args.no_wait:
            deadline = time.monotonic() + timeout_ms / 1000
            for index, item in enumerate(results):
                sub, code, hint = first_state(client, item["id"], deadline)
                sub.pop("link", None)
                sub.pop("current", None)
                results[index] = {**item, **sub, "created": item["created"]}
                if code is not None and failure is None:
                    failure = (code, f"{shown(item['uri'])}: {code}", hint)
            unread = [r["uri"] for r in results if r["state"] != "active"]
            if unread and failure is None:
                # Never exit 0 without a stored read: the wait ran out with nothing known.
                failure = (
                    "REQUEST_TIMEOUT",
                    f"no first read within {timeout_ms:g} ms for "
                    f"{', '.join(shown(u) for u in unread)}",
                    SUBSCRIBE_TIMEOUT_HINT,
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
            emit(json_text(body_json))
        else:
            rows = [
                ["new" if s["created"] else "existing", *r]
                for s, r in zip(results, sub_rows(results), strict=True)
            ]
            emit(table(("", *SUB_HEADERS), rows))
            if failure is not None and machine_lines_wanted(False, getattr(args, "lines", False)):
                emit(f"error-code {failure[0]}\nrecommended-next-action {failure[2] or 'null'}")
        return exit_code(failure[0]) if failure is not None else 0

    return run(args, body)


def first_state(
    client: DaemonClient, subscription_id: int, deadline: float
) -> tuple[dict[str, Any], str | None, str | None]:
    """Poll until the daemon says the subscription's first state is known: (subscription,
    code, hint).

    The daemon decides (``firstState`` of ``GET /v1/subscriptions/{id}``, from
    ``service/app/firststate.py``): the first read is stored (``code`` None), or the
    subscription or its link failed (``code`` = the daemon's error code: RESOURCE_NOT_FOUND,
    PROTOCOL_UNSUPPORTED, CONNECTION_REFUSED, REQUEST_TIMEOUT, PROTOCOL_ERROR, …) with the
    daemon's hint. On the deadline the subscription is returned as it is, with ``code`` None.
    """
    pause = FIRST_STATE_POLL_S[0]
    while True:
        sub = client.subscription(subscription_id)
        state = sub.pop("firstState", None) or {}
        if state.get("known"):
            return sub, state.get("errorCode"), state.get("hint")
        if time.monotonic() >= deadline:
            return sub, None, None
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, FIRST_STATE_POLL_S[1])


# ---- unsubscribe, list, show -------------------------------------------------------------------
def cmd_unsubscribe(args: argparse.Namespace) -> int:
    if (args.id is None) == (args.uri is None):
        return fail(args, "USAGE_ERROR", "pass a subscription ID or --uri", "see --help")

    def body(client: DaemonClient) -> int:
        if args.id is not None:
            ids = [args.id]
        else:
            subs = client.subscriptions()
            shown_url = None if args.url is None else redact_urls(args.url)  # as the API shows
            ids = [
                s["id"]
                for s in subs
                if s["uri"] == args.uri and shown_url in (None, s["serverUrl"])
            ]
            if not ids:
                where = f" on {shown_url}" if shown_url else ""
                raise DaemonError(
                    404,
                    "SUBSCRIPTION_NOT_FOUND",
                    f"nothing watches {args.uri}{where}",
                    "list the subscriptions with `mcpsubctl list`",
                    {},
                )
        removed = [client.unsubscribe(i) for i in ids]
        if args.json:
            emit(json_text({"removed": removed}))
        else:  # the rows as they were, but no longer "active": they are gone
            emit(table(SUB_HEADERS, sub_rows(removed, state="removed")))
        return 0

    return run(args, body)


def cmd_list(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        subs = client.subscriptions()
        if args.json:
            emit(json_text({"subscriptions": subs}))
        else:
            emit(table(SUB_HEADERS, sub_rows(subs)) if subs else "no subscriptions")
        return 0

    return run(args, body)


def _when_ago(ts: Any, ago: Callable[[Any], str]) -> str:
    return "-" if not isinstance(ts, (int, float)) else f"{ago(ts)} ({when(ts)})"


def cmd_show(args: argparse.Namespace) -> int:
    from cli.human import ago, error_text, listing, yes_no

    def body(client: DaemonClient) -> int:
        sub = client.subscription(args.id)
        if args.json:
            emit(json_text(sub))
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
        from service.safetext import terminal_safe

        lines = [f"{k + ':':<13} {'-' if v is None else shown(v)}" for k, v in rows]
        if current:
            lines += ["text:", terminal_safe(str(current.get("text") or ""), keep_lines=True)]
        emit("\n".join(lines))
        return 0

    return run(args, body)


# ---- status, resubscribe ------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    def body(client: DaemonClient) -> int:
        st = _wait_ready(client, args) if args.wait_ready else client.status()
        if args.json:
            emit(json_text(st))
            return 0
        emit(status_text(st))
        return 0

    return run(args, body)


def status_text(st: dict[str, Any]) -> str:
    """``/v1/status`` as a person reads it."""
    from cli.human import error_text, yes_no
    from service.statusline import duration

    counts = ", ".join(f"{v} {k}" for k, v in st.get("counts", {}).items())
    states = ", ".join(f"{v} {k}" for k, v in st.get("subscriptionsByState", {}).items())
    ready = st.get("ready")
    last_event = st.get("lastEventId")
    lines = [
        f"mcpsubd {st.get('version')}: {'ready' if ready else 'not ready'}, "
        f"up {duration(st.get('uptimeSeconds'))}",
        f"last event id:  {last_event if last_event is not None else '-'}",
        f"counts:         {counts or '-'}",
        f"subscriptions:  {states or 'none'}",
    ]
    storage = st.get("storage") or {}
    if storage and not storage.get("ok", True):
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
        for ln in links:
            if ln.get("lastErrorHint"):
                lines.append(shown(f"hint ({ln.get('url')}): {ln.get('lastErrorHint')}"))
    return "\n".join(lines)


def _wait_ready(client: DaemonClient, args: argparse.Namespace) -> dict[str, Any]:
    """``status --wait-ready``: poll until the daemon answers and says ready (bounded)."""
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
                if isinstance(exc, DaemonError) and exc.error_code in FINAL_CODES:
                    break  # waiting longer changes nothing
                if isinstance(exc, DaemonError) and exc.status == 401 and client.reread_token():
                    continue  # the daemon wrote its token after we started: try it now
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
            emit(json_text({"rechecked": urls}))
        else:
            emit("\n".join(f"rechecking {u}" for u in urls) if urls else "no links to recheck")
        return 0

    return run(args, body)


# ---- argparse wiring ------------------------------------------------------------------------
def register(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the subscription commands to ``mcpsubctl``'s subparsers and ``commands``."""
    from cli.parsing import sub_parser

    p = sub_parser(sub, "subscribe", help="daemon: watch URIs on a server")
    api_flags(p)
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
    api_flags(p)
    p.add_argument("id", nargs="?", type=int, default=None, help="subscription ID")
    p.add_argument("--uri", default=None, help="remove the subscriptions of this URI")
    p.add_argument("--url", default=None, help="only on this server")

    p = sub_parser(sub, "list", help="daemon: list subscriptions")
    api_flags(p)

    p = sub_parser(sub, "show", help="daemon: one subscription, its link and current revision")
    api_flags(p)
    p.add_argument("id", type=int, help="subscription ID")

    p = sub_parser(sub, "status", help="daemon: version, links, counts")
    api_flags(p)
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
    api_flags(p)
    p.add_argument("--url", default=None, help="only the link to this server")
    commands.update(
        subscribe=cmd_subscribe,
        unsubscribe=cmd_unsubscribe,
        list=cmd_list,
        show=cmd_show,
        status=cmd_status,
        resubscribe=cmd_resubscribe,
    )
