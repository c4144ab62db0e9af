"""``mcpsubctl webhook …`` and ``mcpsubctl deliveries …``: webhook targets and their outbox.

``webhook add|list|show|remove|enable|disable|test|rotate-secret`` and
``deliveries list|retry|recover``, over the daemon's local API (``docs/webhooks.md``). Same
conventions as :mod:`cli.apicmd`: ``--api``, ``--json``, error lines on stdout, the
message on stderr, one exit code per class. A secret is printed by ``add`` and
``rotate-secret`` only (it is never shown again); listings never contain it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cli.apicmd import api_flags, emit, exit_code, fail, json_text, run, table, when
from service.safetext import shown

if TYPE_CHECKING:
    from cli.localapi import DaemonClient

MODES = ("all", "latest")
STATES = ("pending", "failed", "delivered", "dead", "superseded")
SECRET_NOTE = "the secret is shown once: store it in your receiver's configuration now"

# ---- formatting (pure) ------------------------------------------------------------------
TARGET_HEADERS = ("ID", "ENABLED", "MODE", "FAILURES", "URL", "FILTER")
DELIVERY_HEADERS = (
    "ID",
    "TARGET",
    "STATE",
    "ATTEMPTS",
    "STATUS",
    "WEBHOOK-ID",
    "WHEN",
    "URI",
    "LAST ERROR",
)


def target_filter(t: dict[str, Any]) -> str:
    parts = [*t.get("uriPatterns", []), *(f"sub:{i}" for i in t.get("subscriptionIds", []))]
    return " ".join(parts) or "*"


def target_rows(targets: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            t["id"],
            "yes" if t["enabled"] else "no",
            t["mode"],
            t["consecutiveFailures"],
            t["url"],
            target_filter(t),
        ]
        for t in targets
    ]


def delivery_rows(deliveries: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for d in deliveries:
        moment = d.get("deliveredAt") if d["state"] == "delivered" else d.get("nextAttemptAt")
        rows.append(
            [
                d["id"],
                d["targetId"],
                d["state"],
                d["attempts"],
                d.get("lastStatus"),
                d["webhookId"],
                when(moment),
                d["uri"],
                d.get("lastError"),
            ]
        )
    return rows


def delivery_lines(d: dict[str, Any]) -> str:
    """One delivery, a field per line (``deliveries show``): the last error in full."""
    lines = [
        f"id:            {d['id']}",
        f"target:        {d['targetId']}",
        f"state:         {d['state']}",
        f"attempts:      {d['attempts']}",
        f"last status:   {d.get('lastStatus') if d.get('lastStatus') is not None else '-'}",
        f"last error:    {shown(d['lastError']) if d.get('lastError') else '-'}",
        f"next attempt:  {when(d.get('nextAttemptAt'))}",
        f"delivered:     {when(d.get('deliveredAt'))}",
        f"created:       {when(d.get('createdAt'))}",
        f"webhook-id:    {d['webhookId']}",
        f"event:         {d.get('eventId')}",
        f"subscription:  {d.get('subscriptionId')}",
        f"uri:           {shown(d['uri'])}",
    ]
    return "\n".join(lines)


def target_lines(t: dict[str, Any]) -> str:
    lines = [
        f"id:               {t['id']}",
        f"url:              {shown(t['url'])}",
        f"mode:             {t['mode']}",
        f"enabled:          {'yes' if t['enabled'] else 'no'}"
        + (f" ({t['disabledReason']})" if t.get("disabledReason") else ""),
        f"filter:           {shown(target_filter(t))}",
        f"failures in row:  {t['consecutiveFailures']}",
        f"failing since:    {when(t.get('failingSince'))}",
        f"last success:     {when(t.get('lastSuccessAt'))}",
        f"created:          {when(t.get('createdAt'))}",
    ]
    counts = t.get("deliveries")
    if isinstance(counts, dict):
        lines.append("deliveries:       " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)


# ---- webhook --------------------------------------------------------------------------------
def cmd_webhook(args: argparse.Namespace) -> int:
    action: str = args.action

    def body(client: DaemonClient) -> int:
        if action == "add":
            created = client.add_webhook(
                args.url,
                uri_patterns=args.uri,
                subscription_ids=args.subscription,
                mode=args.mode,
                secret=args.secret,
                allow_private_target=args.allow_private_target,
            )
            if args.json:
                emit(json_text(created))
            else:
                emit(table(TARGET_HEADERS, target_rows([created])))
                emit(f"secret {created['secret']}")
            if args.secret is None:
                sys.stderr.write(f"mcpsubctl webhook add: {SECRET_NOTE}\n")
            return 0
        if action == "list":
            targets = client.webhooks()
            if args.json:
                emit(json_text({"webhooks": targets}))
            else:
                emit(table(TARGET_HEADERS, target_rows(targets)) if targets else "no webhooks")
            return 0
        if action == "show":
            target = client.webhook(args.id)
            emit(json_text(target) if args.json else target_lines(target))
            return 0
        if action == "remove":
            removed = client.remove_webhook(args.id)
            emit(json_text(removed) if args.json else table(TARGET_HEADERS, target_rows([removed])))
            return 0
        if action in ("enable", "disable"):
            target = client.webhook_action(args.id, action)
            emit(json_text(target) if args.json else table(TARGET_HEADERS, target_rows([target])))
            return 0
        if action == "test":
            return _test(client, args)
        if action == "rotate-secret":
            rotated = client.webhook_action(args.id, "rotate-secret")
            if args.json:
                emit(json_text(rotated))
            else:
                emit(f"id {rotated['id']}\nsecret {rotated['secret']}")
                emit(
                    f"previous secret also signs until {when(rotated['previousSecretValidUntil'])}"
                )
            sys.stderr.write(f"mcpsubctl webhook rotate-secret: {SECRET_NOTE}\n")
            return 0
        raise AssertionError(action)

    return run(args, body)


def _test(client: DaemonClient, args: argparse.Namespace) -> int:
    result = client.webhook_action(args.id, "test")
    if args.json:
        emit(json_text(result))
    elif result["ok"]:
        emit(f"ok {result['status']} in {result['elapsedMs']:g} ms")
    if result["ok"]:
        return 0
    reason = result.get("error") or f"HTTP {result.get('status')}"
    if args.json:
        sys.stderr.write(
            f"mcpsubctl webhook test: the receiver did not accept the ping: {reason}\n"
        )
        return exit_code("WEBHOOK_TEST_FAILED")
    return fail(
        args,
        "WEBHOOK_TEST_FAILED",
        f"the receiver did not accept the ping: {reason}",
        "check the URL and that the receiver answers 2xx to a signed POST",
    )


# ---- deliveries ---------------------------------------------------------------------------
def cmd_deliveries(args: argparse.Namespace) -> int:
    action: str = args.action

    def body(client: DaemonClient) -> int:
        if action == "list":
            page = client.deliveries(
                target=args.target, state=args.state, after=args.after, limit=args.limit
            )
            if args.json:
                emit(json_text(page))
            else:
                found = page["deliveries"]
                emit(table(DELIVERY_HEADERS, delivery_rows(found)) if found else "no deliveries")
            return 0
        if action == "show":
            found = client.delivery(args.id)
            emit(json_text(found) if args.json else delivery_lines(found))
            return 0
        if action == "retry":
            retried = client.retry_delivery(args.id)
            emit(
                json_text(retried)
                if args.json
                else table(DELIVERY_HEADERS, delivery_rows([retried]))
            )
            return 0
        if action == "recover":
            result = client.recover_deliveries(args.target, args.since)
            if args.json:
                emit(json_text(result))
            else:
                count = result["recovered"]
                noun = "delivery" if count == 1 else "deliveries"
                emit(
                    f"{count} failed or dead {noun} of target {result['targetId']} "
                    "queued to be sent again"
                )
            return 0
        raise AssertionError(action)

    return run(args, body)


# ---- argparse wiring ------------------------------------------------------------------
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_value(text: str) -> str:
    """``--since``: a duration back from now (``2h``) becomes Unix seconds; ISO-8601 and Unix
    seconds pass through (the daemon checks them)."""
    value = text.strip()
    unit = DURATION_UNITS.get(value[-1:].lower())
    if unit is None or not value[:-1].isdigit():
        return value
    import time

    return str(int(time.time()) - int(value[:-1]) * unit)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an id: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"an id is >= 1, got {value}")
    return value


def add_webhook_commands(sub: Any, commands: dict[str, Any]) -> None:
    """Add ``webhook`` and ``deliveries`` to ``mcpsubctl``'s subparsers and ``commands``."""
    from cli.parsing import sub_parser

    parser_class = sub._parser_class  # the _Parser of ctl.py: JSON usage errors, exit 2
    webhook = sub_parser(sub, "webhook", help="daemon: webhook targets (add, list, test, …)")
    actions = webhook.add_subparsers(
        dest="action", required=True, parser_class=parser_class, metavar="ACTION"
    )

    p = sub_parser(actions, "add", help="add a target; prints its secret once")
    api_flags(p)
    p.add_argument("url", help="http:// or https:// endpoint")
    p.add_argument("--uri", action="append", default=None, help="URI glob (repeatable)")
    p.add_argument(
        "--subscription",
        action="append",
        type=_positive_int,
        default=None,
        help="subscription ID (repeatable)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        default=None,
        help="all: every revision; latest: only the newest pending one (default all)",
    )
    p.add_argument("--secret", default=None, help="your own whsec_… secret (24-64 bytes)")
    p.add_argument(
        "--allow-private-target",
        action="store_true",
        help="allow a link-local or cloud-metadata address (refused by default)",
    )

    p = sub_parser(actions, "list", help="list targets (never their secrets)")
    api_flags(p)
    for name, text in (
        ("show", "one target and its delivery counts"),
        ("remove", "remove a target and its deliveries"),
        ("enable", "enable a target (after 410 Gone or `disable`)"),
        ("disable", "stop delivering to a target"),
        ("test", "send a signed webhook.test ping now"),
        ("rotate-secret", "new secret (printed once); the old one also signs for 24 h"),
    ):
        p = sub_parser(actions, name, help=text)
        api_flags(p)
        p.add_argument("id", type=_positive_int, help="target ID")

    deliveries = sub_parser(sub, "deliveries", help="daemon: the webhook outbox (list, retry, …)")
    actions = deliveries.add_subparsers(
        dest="action", required=True, parser_class=parser_class, metavar="ACTION"
    )
    p = sub_parser(actions, "list", help="deliveries, oldest first")
    api_flags(p)
    p.add_argument("--target", type=_positive_int, default=None, help="only this target")
    p.add_argument("--state", choices=STATES, default=None, help="only this state")
    p.add_argument("--after", type=int, default=0, help="only ids above this one")
    p.add_argument("--limit", type=int, default=100, help="page size (<= 1000)")
    p = sub_parser(actions, "show", help="one delivery")
    api_flags(p)
    p.add_argument("id", type=_positive_int, help="delivery ID")
    p = sub_parser(actions, "retry", help="send a delivery again now, same webhook-id")
    api_flags(p)
    p.add_argument("id", type=_positive_int, help="delivery ID")
    p = sub_parser(actions, "recover", help="re-send a target's failed and dead deliveries")
    api_flags(p)
    p.add_argument("--target", type=_positive_int, required=True, help="target ID")
    p.add_argument(
        "--since",
        required=True,
        type=since_value,
        help="deliveries created since: a duration back from now (90s, 30m, 2h, 7d), "
        "ISO-8601 (2026-11-29T00:00:00Z) or Unix seconds",
    )

    commands.update({"webhook": cmd_webhook, "deliveries": cmd_deliveries})
