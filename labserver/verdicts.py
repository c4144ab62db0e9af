"""Per-client verdicts: the lab's request log in, seed 002's checklist per client out.

The original lab kept a hand-filled checklist per agent CLI ("calls resources/list? reads?
subscribes? receives the update? reads again after it?"). This module answers it from the
event log, with the log lines as evidence, so nobody has to read the log by hand.

Pure: a list of log entries (as ``/lab/log`` returns them) and the current time in, a list
of :class:`ClientVerdict` out. Grouping:

* every ``mcp.request`` entry names its sender: ``clientInfo`` name and version (from
  ``_meta``, or from ``params`` of a 2025-era ``initialize``), else ``User-Agent @ host``.
  A request without ``clientInfo`` (a notification, say) joins the client that last sent
  ``clientInfo`` with the same ``User-Agent`` and host, so one client is one group;
* every other entry recorded while a request was handled carries ``request`` (the
  ``seq`` of that ``mcp.request``) and belongs to that request's client.

Entries recorded outside any request (the timer's ``resource.updated``, control
endpoints) belong to no client.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

MODERN: Final = "2026-07-28"
UPDATED: Final = "notifications/resources/updated"
# Named-mistake thresholds (documented in docs/labserver.md).
POLL_READS: Final = 2  # unprompted re-reads of one URI (no listen or notification between)
SESSION_STARTS: Final = frozenset({"server/discover", "initialize"})  # a new client session
RELISTEN_COUNT: Final = 5  # listens opened ...
RELISTEN_WINDOW: Final = 1.0  # ... within this many seconds = a tight re-listen loop
ACK_IGNORE_SECONDS: Final = 2.0  # stream kept open this long after an ack that dropped a URI
REREAD_GRACE: Final = 5.0  # seconds a client has to re-read before "never re-reads"
MAX_EVIDENCE: Final = 5

Status = Literal["pass", "fail", "pending", "n/a"]
"""``n/a``: the lab's own fault injection made the item impossible (the client is not
blamed, and the item does not stand between it and *passed*)."""
Outcome = Literal["passed", "failed", "incomplete"]

ITEMS: Final = (
    ("connected", f"Connected with {MODERN}"),
    ("listed", "Called resources/list"),
    ("read", "Read the resource"),
    ("listened", "Opened subscriptions/listen with it, and it was honored"),
    ("notified", f"Received {UPDATED} while the stream was open"),
    ("reread", "Read it again after the notification"),
    ("closed", "Closed or cancelled its listen cleanly"),
)
# Shown, but not needed to pass: a client given the URI has no reason to list (the spec does
# not ask for it), and the daemon and ``probe --follow`` do not.
INFORMATIONAL: Final = frozenset({"listed"})
MISTAKES: Final = {
    "legacy-only": "Speaks only 2025-era MCP (initialize, no 2026-07-28 request)",
    "polling": "Reads in a polling loop instead of listening",
    "relisten-loop": "Re-listens in a tight loop",
    "ignores-ack": "Ignores the acknowledgment (kept waiting on a stream that honored nothing)",
    "never-rereads": "Never re-reads after the notification",
    "headers": "Missing or mismatched Mcp-Method / Mcp-Name headers",
}


@dataclass(frozen=True, slots=True)
class Evidence:
    seq: int
    time: float
    line: str

    @property
    def stamp(self) -> str:
        """UTC wall time with milliseconds, as printed in the Markdown report."""
        whole = time.strftime("%H:%M:%S", time.gmtime(self.time))
        return f"{whole}.{int(self.time * 1000) % 1000:03d}Z"


@dataclass(slots=True)
class Item:
    id: str
    title: str
    status: Status
    evidence: list[Evidence] = field(default_factory=list)
    note: str = ""


@dataclass(slots=True)
class Mistake:
    id: str
    title: str
    evidence: list[Evidence]


@dataclass(slots=True)
class ClientVerdict:
    key: str
    name: str | None
    version: str | None
    user_agent: str | None
    remote: str | None
    era: str
    requests: int
    first_seen: float
    last_seen: float
    items: list[Item]
    mistakes: list[Mistake]
    outcome: Outcome

    def item(self, item_id: str) -> Item:
        return next(i for i in self.items if i.id == item_id)

    def summary(self) -> str:
        """One line for the console: the outcome and why (mistakes first, else failed items)."""
        if self.outcome == "passed":
            spared = [i.id for i in self.items if i.status == "n/a"]
            if spared:
                return (
                    f"{self.key}: passed (the lab's fault injection made these impossible: "
                    f"{', '.join(spared)})"
                )
            listed = "" if self.item("listed").status == "pass" else "; no resources/list"
            return (
                f"{self.key}: passed the full cycle (read, listen, update, re-read, close{listed})"
            )
        reasons = [m.title for m in self.mistakes]
        if not reasons:
            reasons = [f"not done: {i.title}" for i in self.items if i.status != "pass"]
        return f"{self.key}: {self.outcome}: {'; '.join(reasons)}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["userAgent"] = data.pop("user_agent")
        data["firstSeen"] = data.pop("first_seen")
        data["lastSeen"] = data.pop("last_seen")
        for item in data["items"]:
            item["ok"] = item["status"] == "pass"
        return data


# ---- evidence lines ---------------------------------------------------------------------
def safe(text: str) -> str:
    """Client-chosen text made inert for a terminal and a Markdown line.

    ``clientInfo``, ``User-Agent`` and method names come from whoever connects; the report
    is printed by ``mcp-lab-server report`` straight to a terminal, so control characters
    (escape sequences, newlines, bidi overrides) are shown as ``\\xNN`` / ``\\uNNNN``.
    """
    if text.isprintable():
        return text
    return "".join(
        ch
        if ch.isprintable()
        else (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        for ch in text
    )


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def describe_entry(entry: dict[str, Any]) -> str:
    """The human line for one log entry (what the Markdown report shows as evidence)."""
    return safe(_describe(entry))


def _describe(entry: dict[str, Any]) -> str:
    event = entry.get("event")
    if event == "mcp.request":
        who = entry.get("clientInfo") or {}
        shown = f" clientInfo={who.get('name')}/{who.get('version')}" if who else ""
        kind = "notification" if entry.get("notification") else "request"
        return f"{entry.get('method')} {kind} (protocol {entry.get('era')}){shown}"
    if event == "resources.list":
        return "[resources/list] requested"
    if event == "resources.read":
        return f"[resources/read] uri={entry.get('uri')} version={entry.get('version')}"
    if event == "listen.opened":
        return f"subscriptions/listen id={entry.get('subscriptionId')} filter={_compact(entry.get('filter'))}"
    if event == "listen.acknowledged":
        return f"acknowledged id={entry.get('subscriptionId')} honored={_compact(entry.get('honored'))}"
    if event == "listen.refused":
        return f"listen id={entry.get('subscriptionId')} refused"
    if event == "notification.sent":
        uri = f" uri={entry['uri']}" if "uri" in entry else ""
        return f"[notification/send] {entry.get('method')}{uri} on listen id={entry.get('subscriptionId')}"
    if event == "listen.closed":
        return f"listen id={entry.get('subscriptionId')} closed ({entry.get('reason')})"
    if event == "http.error":
        return f"answered HTTP {entry.get('status')} code {entry.get('code')}"
    if event == "notification.received":
        return f"notification {entry.get('method')} received"
    return str(event)


def _ev(entry: dict[str, Any], prefix: str = "") -> Evidence:
    return Evidence(int(entry["seq"]), float(entry["time"]), prefix + describe_entry(entry))


# ---- grouping ---------------------------------------------------------------------------
def _identity(entry: dict[str, Any]) -> str | None:
    info = entry.get("clientInfo")
    if isinstance(info, dict) and info.get("name"):
        return safe(f"{info['name']} {info.get('version') or '?'}".strip())
    return None


def _fallback(entry: dict[str, Any]) -> tuple[str, str]:
    return (
        safe(entry.get("userAgent") or "no User-Agent"),
        safe(entry.get("remote") or "unknown host"),
    )


def group(entries: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Client key -> that client's entries (``mcp.request`` and everything they caused)."""
    requests = [e for e in entries if e.get("event") == "mcp.request"]
    named_by_origin: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for entry in requests:
        key = _identity(entry)
        if key is not None:
            named_by_origin[_fallback(entry)].append((entry["seq"], key))
    owner: dict[int, str] = {}
    for entry in requests:
        key = _identity(entry)
        if key is None:
            origin = _fallback(entry)
            named = named_by_origin.get(origin, [])
            before = [k for seq, k in named if seq < entry["seq"]]
            if before:
                key = before[-1]
            elif named:
                key = named[0][1]
            else:
                key = f"{origin[0]} @ {origin[1]}"
        owner[entry["seq"]] = key
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        seq = entry["seq"] if entry.get("event") == "mcp.request" else entry.get("request")
        if seq in owner:
            groups[owner[seq]].append(entry)
    return dict(groups)


class Grouper:
    """:func:`group` one entry at a time, for the live console line.

    Only earlier entries are known here, so a request without ``clientInfo`` that comes
    before its client's first named one is filed under ``User-Agent @ host`` (the report,
    which sees the whole log, files it with the client). Bounded: the oldest request links
    are forgotten past ``max_requests``.
    """

    def __init__(self, max_requests: int = 10_000) -> None:
        self.max_requests = max_requests
        self.owner: OrderedDict[int, str] = OrderedDict()
        self.named: OrderedDict[tuple[str, str], str] = OrderedDict()

    def key_of(self, entry: dict[str, Any]) -> str | None:
        """The client key of ``entry``, or ``None`` if it belongs to no client."""
        if entry.get("event") != "mcp.request":
            request = entry.get("request")
            return self.owner.get(request) if isinstance(request, int) else None
        origin = _fallback(entry)
        key = _identity(entry)
        if key is not None:
            self.named[origin] = key
            self.named.move_to_end(origin)
        else:
            key = self.named.get(origin) or f"{origin[0]} @ {origin[1]}"
        self.owner[entry["seq"]] = key
        for table in (self.owner, self.named):
            while len(table) > self.max_requests:
                table.popitem(last=False)
        return key

    def clear(self) -> None:
        self.owner.clear()
        self.named.clear()


# ---- judging one client -----------------------------------------------------------------
@dataclass(slots=True)
class _Stream:
    request: int
    opened: dict[str, Any]
    acked: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None
    closed: dict[str, Any] | None = None
    notifications: list[dict[str, Any]] = field(default_factory=list)

    def lab_withheld_all(self) -> bool:
        """The ack honored none of the asked-for URIs, and the lab's fault knobs are why."""
        if self.acked is None or self.honored_uris():
            return False
        withheld = self.acked.get("withheld") or []
        asked = self.requested_uris()
        return bool(asked) and all(uri in withheld for uri in asked)

    def ended_by_lab(self) -> bool:
        return self.closed is not None and self.closed.get("reason") in ("graceful", "dropped")

    def honored_uris(self) -> list[str]:
        if self.acked is None:
            return []
        honored = self.acked.get("honored") or {}
        uris = honored.get("resourceSubscriptions") if isinstance(honored, dict) else None
        return [u for u in uris or [] if isinstance(u, str)]

    def honors_anything(self) -> bool:
        """Whether the ack honored any notification type or URI at all."""
        honored = self.acked.get("honored") if self.acked is not None else None
        return isinstance(honored, dict) and any(bool(v) for v in honored.values())

    def requested_uris(self) -> list[str]:
        wanted = self.opened.get("filter") or {}
        uris = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        return [u for u in uris or [] if isinstance(u, str)]


def _streams(entries: Iterable[dict[str, Any]]) -> list[_Stream]:
    streams: dict[int, _Stream] = {}
    for entry in entries:
        event, request = entry.get("event"), entry.get("request")
        if event == "listen.opened" and isinstance(request, int):
            streams[request] = _Stream(request, entry)
            continue
        stream = streams.get(request) if isinstance(request, int) else None
        if stream is None:
            continue
        if event == "listen.acknowledged":
            stream.acked = entry
        elif event == "listen.refused":
            stream.refused = entry
        elif event == "listen.closed":
            stream.closed = entry
        elif event == "notification.sent" and entry.get("method") == UPDATED:
            stream.notifications.append(entry)
    return list(streams.values())


def _first(entries: Iterable[dict[str, Any]], event: str) -> dict[str, Any] | None:
    return next((e for e in entries if e.get("event") == event), None)


def _item(item_id: str, status: Status, evidence: list[Evidence], note: str = "") -> Item:
    title = dict(ITEMS)[item_id]
    return Item(item_id, title, status, evidence[:MAX_EVIDENCE], note)


def judge_client(key: str, entries: list[dict[str, Any]], now: float) -> ClientVerdict:
    """The checklist and named mistakes for one client's entries (in ``seq`` order)."""
    requests = [e for e in entries if e.get("event") == "mcp.request"]
    errors = {e["request"]: e for e in entries if e.get("event") == "http.error"}
    # Requests the lab's fault knobs answered (legacyMode, failMethods, refuseListen) or held
    # unanswered (silentMethods): what became of them is the lab's doing.
    held = {e["request"] for e in entries if e.get("event") in ("request.held", "legacy.answer")}
    injected = held | {seq for seq, e in errors.items() if e.get("injected")}
    streams = _streams(entries)
    reads = [e for e in entries if e.get("event") == "resources.read"]
    items: list[Item] = []
    mistakes: list[Mistake] = []

    # connected
    modern = [e for e in requests if e.get("era") == MODERN and not e.get("notification")]
    answered = [e for e in modern if e["seq"] not in errors and e["seq"] not in injected]
    legacy = [e for e in requests if e.get("era") == "2025"]
    # legacyMode / failMethods answers are the lab's doing, not the client's.
    lab_refused = bool(modern) and all(e["seq"] in injected for e in modern)
    if answered:
        note = "also tried a 2025-era initialize" if legacy else ""
        items.append(_item("connected", "pass", [_ev(answered[0], "answered: ")], note))
    else:
        tried = (modern or legacy or requests)[:1]
        evidence = [_ev(e) for e in tried] + [
            _ev(errors[e["seq"]]) for e in tried if e["seq"] in errors
        ]
        note = "no 2026-07-28 request was answered"
        if lab_refused:
            note = "the lab's legacyMode/failMethods/silentMethods answered instead"
        items.append(_item("connected", "n/a" if lab_refused else "fail", evidence, note))
        if legacy:
            legacy_evidence = [_ev(legacy[0])]
            if legacy[0]["seq"] in errors:
                legacy_evidence.append(_ev(errors[legacy[0]["seq"]]))
            mistakes.append(Mistake("legacy-only", MISTAKES["legacy-only"], legacy_evidence))

    listed = _first(entries, "resources.list")
    items.append(_item("listed", "pass" if listed else "fail", [_ev(listed)] if listed else []))
    asked = {
        method: [e for e in modern if e.get("method") == method]
        for method in ("resources/read", "subscriptions/listen")
    }

    def all_injected(method: str) -> bool:
        sent = asked[method]
        return bool(sent) and all(e["seq"] in injected for e in sent)

    honored = [s for s in streams if s.honored_uris()]
    # Every listen it sent was answered by a fault knob, refused by refuseListen, or
    # acknowledged with everything it asked for withheld by dishonorUris/advertiseSubscribe.
    no_subscribe = [e for e in entries if e.get("event") == "discover"]
    lab_prevented = not honored and (
        lab_refused
        # Told by discovery that the server cannot deliver updates, it did not ask.
        or (
            not asked["subscriptions/listen"]
            and bool(no_subscribe)
            and all(e.get("subscribe") is False for e in no_subscribe)
        )
        or (
            bool(asked["subscriptions/listen"])
            and all(
                e["seq"] in injected
                or any(
                    s.request == e["seq"]
                    and (
                        (s.refused is not None and s.refused.get("injected"))
                        or s.lab_withheld_all()
                    )
                    for s in streams
                )
                for e in asked["subscriptions/listen"]
            )
        )
    )
    if reads:
        items.append(_item("read", "pass", [_ev(reads[0])]))
    elif all_injected("resources/read"):
        items.append(_item("read", "n/a", [], "the lab's fault injection answered its reads"))
    elif lab_prevented:
        # A subscriber given the URI reads after an honored acknowledgement; none came.
        items.append(_item("read", "n/a", [], "no listen could be honored"))
    else:
        items.append(_item("read", "fail", []))

    # listened (with the resource) and honored
    if lab_prevented:
        evidence = [_ev(e) for s in streams[:1] for e in (s.opened, s.acked, s.refused) if e]
        items.append(_item("listened", "n/a", evidence, "the lab's fault injection refused it"))
    elif honored:
        s = honored[0]
        assert s.acked is not None
        items.append(_item("listened", "pass", [_ev(s.opened), _ev(s.acked)]))
    elif streams:
        s = streams[0]
        evidence = [_ev(s.opened)] + [_ev(e) for e in (s.acked, s.refused) if e is not None]
        open_now = s.closed is None and s.refused is None and s.acked is None
        items.append(
            _item(
                "listened",
                "pending" if open_now else "fail",
                evidence,
                "no resource URI honored" if s.acked is not None else "",
            )
        )
    else:
        items.append(_item("listened", "fail", [], "never opened subscriptions/listen"))

    # notified, and read again after it
    notified = [(s, n) for s in streams for n in s.notifications]
    notified.sort(key=lambda pair: pair[1]["seq"])
    reread_found: tuple[dict[str, Any], dict[str, Any]] | None = None
    # A re-read counts once it is asked for (a served read, or a read request for the URI
    # whose answer the lab had not given yet when the client's run ended: readDelayMs).
    read_asks = [e for e in asked["resources/read"] if e.get("uri") is not None]
    for _, note_entry in notified:
        # The served read is the better evidence (it shows the version); the ask is enough.
        later = [
            r
            for pool in (reads, read_asks)
            for r in pool
            if r["seq"] > note_entry["seq"] and r.get("uri") == note_entry.get("uri")
        ]
        if later:
            reread_found = (note_entry, later[0])
            break
    # No update could reach it: the lab ended every honored stream before one came, and the
    # client listened again after each (its last stream may have ended with its run).
    cut_short = (
        not notified
        and len(honored) >= 2
        and all(s.ended_by_lab() for s in honored[:-1])
        and honored[-1].closed is not None
    )
    impossible = lab_prevented or cut_short
    if notified:
        items.append(_item("notified", "pass", [_ev(notified[0][1])]))
    elif impossible:
        note = (
            "no listen could be honored"
            if lab_prevented
            else "the lab ended every stream before an update came; it listened again each time"
        )
        evidence = [_ev(s.closed) for s in honored[:MAX_EVIDENCE] if s.closed is not None]
        items.append(_item("notified", "n/a", evidence, note))
    else:
        waiting = any(s.acked is not None and s.closed is None for s in honored)
        items.append(_item("notified", "pending" if waiting else "fail", []))
    if impossible and not notified:
        items.append(_item("reread", "n/a", [], "no update reached it"))
    elif reread_found is not None:
        note_entry, read = reread_found
        items.append(_item("reread", "pass", [_ev(note_entry), _ev(read, "after it: ")]))
    elif notified and any(
        e["seq"] in injected and e["seq"] > notified[0][1]["seq"] for e in asked["resources/read"]
    ):
        # It tried to read again; the lab's fault knob answered instead of the resource.
        items.append(
            _item("reread", "n/a", [_ev(notified[0][1])], "the lab's fault injection answered")
        )
    elif notified:
        stream, last = notified[-1]
        gave_up = stream.closed is not None or now - float(last["time"]) >= REREAD_GRACE
        items.append(_item("reread", "fail" if gave_up else "pending", [_ev(last)]))
        if gave_up:
            evidence = [_ev(last)] + ([_ev(stream.closed)] if stream.closed else [])
            mistakes.append(Mistake("never-rereads", MISTAKES["never-rereads"], evidence))
    else:
        items.append(_item("reread", "fail" if not streams else "pending", []))

    # closed cleanly
    accepted = [s for s in streams if s.refused is None]
    still_open = [s for s in accepted if s.closed is None]
    if not accepted:
        if lab_prevented:
            items.append(_item("closed", "n/a", [], "no listen stream was accepted"))
        else:
            items.append(_item("closed", "fail", [], "no listen stream"))
    elif still_open:
        items.append(_item("closed", "pending", [_ev(still_open[0].opened)], "still open"))
    else:
        last_closed = accepted[-1].closed
        assert last_closed is not None
        cancelled = [
            e
            for e in requests
            if e.get("method") == "notifications/cancelled" and e["seq"] > accepted[0].request
        ]
        evidence = [_ev(last_closed)] + [_ev(e) for e in cancelled[:1]]
        # A stream the lab ended (gracefully, or dropped by its own fault) is not the
        # client's unclean close.
        reason = last_closed.get("reason")
        note = f"ended by the lab ({reason})" if reason in ("graceful", "dropped") else ""
        items.append(_item("closed", "pass", evidence, note))

    mistakes.extend(_named_mistakes(entries, requests, streams, now))
    outcome: Outcome
    if mistakes or (items[0].status == "fail" and not lab_refused):
        outcome = "failed"
    elif all(i.status in ("pass", "n/a") for i in items if i.id not in INFORMATIONAL):
        outcome = "passed"
    else:
        outcome = "incomplete"
    first = requests[0] if requests else entries[0]
    named = next((e["clientInfo"] for e in requests if e.get("clientInfo")), None) or {}
    if legacy and not modern:
        era = "2025 only"
    elif modern:
        era = MODERN + (" (tried 2025 initialize)" if legacy else "")
    else:
        era = "unknown"
    return ClientVerdict(
        key=key,
        name=named.get("name"),
        version=named.get("version"),
        user_agent=first.get("userAgent"),
        remote=first.get("remote"),
        era=era,
        requests=len(requests),
        first_seen=float(entries[0]["time"]),
        last_seen=float(entries[-1]["time"]),
        items=items,
        mistakes=mistakes,
        outcome=outcome,
    )


def _named_mistakes(
    entries: list[dict[str, Any]],
    requests: list[dict[str, Any]],
    streams: list[_Stream],
    now: float,
) -> list[Mistake]:
    found: list[Mistake] = []
    # Polling: a read of a URI with no listen opened and no update for it since the last read
    # of the same session. A session starts with discovery (``server/discover``, or a 2025-era
    # ``initialize``): a new process run by the same client (seed 000's "repeated probes each
    # see the update") starts over, and its first read is owed to nobody.
    prompted: dict[str, bool] = {}
    unprompted: list[Evidence] = []
    for entry in entries:
        event = entry.get("event")
        if event == "mcp.request" and entry.get("method") in SESSION_STARTS:
            prompted = {}
        elif event == "listen.opened":
            prompted = {uri: True for uri in prompted}
        elif event == "notification.sent" and entry.get("method") == UPDATED:
            prompted[str(entry.get("uri"))] = True
        elif event == "resources.read":
            uri = str(entry.get("uri"))
            if uri in prompted and not prompted[uri]:
                unprompted.append(_ev(entry))
            prompted[uri] = False
    if len(unprompted) >= POLL_READS:
        found.append(Mistake("polling", MISTAKES["polling"], unprompted[:MAX_EVIDENCE]))
    # Tight re-listen loop: RELISTEN_COUNT listens within RELISTEN_WINDOW seconds.
    opened = [s.opened for s in streams]
    for i in range(len(opened) - RELISTEN_COUNT + 1):
        window = opened[i : i + RELISTEN_COUNT]
        if float(window[-1]["time"]) - float(window[0]["time"]) <= RELISTEN_WINDOW:
            found.append(
                Mistake("relisten-loop", MISTAKES["relisten-loop"], [_ev(e) for e in window])
            )
            break
    # Ignored ack: the ack honored nothing the client asked for, and it kept waiting on the
    # stream anyway. (A partly honored stream is worth keeping: not flagged.)
    for s in streams:
        if s.acked is None or not s.requested_uris() or s.honors_anything():
            continue
        end = float(s.closed["time"]) if s.closed is not None else now
        if end - float(s.acked["time"]) >= ACK_IGNORE_SECONDS:
            evidence = [_ev(s.acked)] + ([_ev(s.closed)] if s.closed else [])
            found.append(Mistake("ignores-ack", MISTAKES["ignores-ack"], evidence))
            break
    # Routing headers (2026-07-28 requests only; notifications are not checked).
    bad = [
        e
        for e in requests
        if any(v not in ("ok", "n/a") for v in (e.get("headers") or {}).values())
    ]
    if bad:
        evidence = [
            Evidence(
                e["seq"],
                e["time"],
                f"{safe(str(e.get('method')))}: Mcp-Method {e['headers'].get('method')}, "
                f"Mcp-Name {e['headers'].get('name')}",
            )
            for e in bad[:MAX_EVIDENCE]
        ]
        found.append(Mistake("headers", MISTAKES["headers"], evidence))
    return found


def judge(entries: Sequence[dict[str, Any]], now: float) -> list[ClientVerdict]:
    """A verdict per client seen in ``entries``, in order of first appearance."""
    ordered = sorted(entries, key=lambda e: e["seq"])
    groups = group(ordered)
    verdicts = [judge_client(key, items, now) for key, items in groups.items()]
    verdicts.sort(key=lambda v: v.first_seen)
    return verdicts


# ---- rendering --------------------------------------------------------------------------
def report_json(verdicts: Sequence[ClientVerdict], now: float) -> dict[str, Any]:
    return {"generatedAt": now, "clients": [v.to_json() for v in verdicts]}


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


MARK: Final = {"pass": "✅", "fail": "❌", "pending": "⏳", "n/a": "➖"}


def report_markdown(verdicts: Sequence[ClientVerdict], now: float) -> str:
    """The checklist, one section per client, as the original lab README laid it out."""
    lines = [f"# Lab report ({_iso(now)})", ""]
    if not verdicts:
        lines += ["No MCP client has talked to this lab yet.", ""]
    for v in verdicts:
        lines += [f"## {v.key}", ""]
        lines.append(
            f"Verdict: **{v.outcome}** · protocol: {safe(v.era)} · User-Agent: "
            f"`{safe(v.user_agent or '-')}` · from {v.remote or '-'} · {v.requests} requests · "
            f"{_iso(v.first_seen)} – {_iso(v.last_seen)}"
        )
        lines.append("")
        for item in v.items:
            note = f" ({item.note})" if item.note else ""
            evidence = "; ".join(f"`{e.stamp} #{e.seq} {e.line}`" for e in item.evidence)
            lines.append(
                f"- {MARK[item.status]} {item.title}{note}" + (f": {evidence}" if evidence else "")
            )
        if v.mistakes:
            lines += ["", "Mistakes:", ""]
            for m in v.mistakes:
                evidence = "; ".join(f"`{e.stamp} #{e.seq} {e.line}`" for e in m.evidence)
                lines.append(f"- ⚠️ {m.title}: {evidence}")
        lines.append("")
    return "\n".join(lines)
