"""A link's state writes as plain SQL for the writer thread: subscription states, and the
whole acknowledgement of a listen in one transaction.

A cold start of 1,000 links acknowledges 1,000 listens. As three transactions each through the
async engine (bump the generation, mark the server open, mark its subscriptions ``active`` with
one awaited ``INSERT`` per event) that is a round trip through aiosqlite's thread per statement,
a large share of the daemon's CPU before every URI is read (results/daemon.md,
docs/benchmarks.md). Here one call on the writer thread does it, with ``text()`` statements
built once, as :mod:`service.store.groupcommit` does for revisions. The fence is the same: the
generation bump is conditional on the generation the link expects, and a state change only lands
while the link's generation is the one given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from service.safetext import redact_urls
from service.store import groupcommit
from service.store.dialect import Dialect, EventRow, each_dialect
from service.store.driver import sql
from service.store.records import Event, Revision

CHANGING = each_dialect(
    "SELECT s.id, s.uri, s.state, v.url FROM subscriptions s JOIN servers v ON v.id = s.server_id "
    "WHERE s.id {in_ids} AND (s.state != :state OR COALESCE(s.state_reason, '') != :reason) "
    "ORDER BY s.id"
)
SET_STATE = each_dialect(
    "UPDATE subscriptions SET state = :state, state_reason = :state_reason, "
    "state_code = :code, updated_at = :now WHERE id {in_ids} RETURNING id"
)
SET_STATE_FENCED = each_dialect(
    "UPDATE subscriptions SET state = :state, state_reason = :state_reason, "
    "state_code = :code, updated_at = :now WHERE id {in_ids} "
    "AND (SELECT generation FROM servers WHERE servers.id = subscriptions.server_id) = :generation "
    "RETURNING id"
)
OPEN_BUMPED = sql(
    "UPDATE servers SET generation = generation + 1, state = 'open', last_error = NULL, "
    "last_error_code = NULL, backoff_until = NULL, connected_at = :now, updated_at = :now "
    "WHERE id = :id AND generation = :expected RETURNING generation"
)


KEEP_DISCOVERED = sql("UPDATE servers SET discovered = :discovered WHERE id = :id")


UNREAD = sql("SELECT id FROM subscriptions WHERE server_id = :server_id AND revision = 0")
"""A link's subscriptions with no read stored yet, found through the ``(server_id, uri)``
unique index: a fixed statement, where ``id IN (...)`` would be compiled anew for every
acknowledgement."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """Subscriptions to move to ``state`` (``reason``/``code`` as in ``set_subscription_state``).

    ``unread``: the state for those of ``ids`` with no read stored yet (revision 0) instead.
    A listen's acknowledgement says the link is open, not that a read works: ``active``
    needs both, so a new subscription stays ``pending`` until its first read is stored."""

    ids: Sequence[int]
    state: str
    reason: str | None = None
    code: str | None = None
    unread: str | None = None


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """What :func:`acknowledged` wrote: the link's new generation, the events, and the
    subscriptions that went to their ``unread`` state (no read stored yet)."""

    generation: int
    events: list[Event]
    unread: frozenset[int]


def set_states(
    conn: Connection, dialect: Dialect, change: StateChange, generation: int | None, now: float
) -> list[Event]:
    """Set the state of ``change.ids``; one ``subscription.state`` event per subscription whose
    state or reason changed. With ``generation``, only while the link's generation is it."""
    if not change.ids:
        return []
    reason = None if change.reason is None else redact_urls(change.reason)
    rows = dialect.rows(
        conn,
        CHANGING[dialect.name],
        {"ids": dialect.id_list(change.ids), "state": change.state, "reason": reason or ""},
    )
    if not rows:
        return []
    params = {
        "ids": dialect.id_list([r[0] for r in rows]),
        "state": change.state,
        "state_reason": reason,
        "code": change.code,
        "now": now,
    }
    if generation is None:
        updated = dialect.rows(conn, SET_STATE[dialect.name], params)
    else:
        fenced = {**params, "generation": generation}
        updated = dialect.rows(conn, SET_STATE_FENCED[dialect.name], fenced)
    changed = {int(i) for (i,) in updated}
    events: list[EventRow] = [
        (
            int(sub_id),
            url,
            uri,
            {"state": change.state, "reason": reason, "code": change.code, "previous": previous},
        )
        for sub_id, uri, previous, url in rows
        if sub_id in changed
    ]
    return dialect.insert_events(conn, "subscription.state", now, events) if events else []


def unread_ids(conn: Connection, dialect: Dialect, server_id: int, ids: Sequence[int]) -> set[int]:
    """Those of ``ids`` (subscriptions of link ``server_id``) with no read stored yet."""
    unread = {int(i) for (i,) in dialect.rows(conn, UNREAD, {"server_id": server_id})}
    return unread.intersection(ids)


def acknowledged(
    conn: Connection,
    dialect: Dialect,
    server_id: int,
    expected: int,
    changes: Sequence[StateChange],
    discovered: str | None = None,
) -> Acknowledgement | None:
    """A listen was acknowledged: bump the link's generation (fenced on ``expected``), mark it
    ``open`` and apply ``changes`` under the new generation, all in this transaction.
    ``discovered``: the session's discover result to keep for the next start
    (:mod:`service.mcp.discovercache`), written here rather than in a transaction of its own.

    None when the generation was no longer ``expected``: another replica claimed the link,
    and nothing was written."""
    dialect.order_events(conn)
    now = time.time()
    bumped = dialect.rows(conn, OPEN_BUMPED, {"id": server_id, "expected": expected, "now": now})
    if not bumped:
        return None
    ((value,),) = bumped
    if discovered is not None:
        dialect.rows(conn, KEEP_DISCOVERED, {"id": server_id, "discovered": discovered})
    events: list[Event] = []
    unread: set[int] = set()
    for change in changes:
        if change.unread is None or not change.ids:
            events += set_states(conn, dialect, change, int(value), now)
            continue
        missing = unread_ids(conn, dialect, server_id, change.ids)
        unread |= missing
        read = [i for i in change.ids if i not in missing]
        events += set_states(
            conn,
            dialect,
            StateChange(read, change.state, change.reason, change.code),
            int(value),
            now,
        )
        events += set_states(
            conn, dialect, StateChange(sorted(missing), change.unread), int(value), now
        )
    return Acknowledgement(int(value), events, frozenset(unread))


def record_reads(
    conn: Connection,
    dialect: Dialect,
    reads: Sequence[groupcommit.Read],
    sinks: Sequence[Callable[[Connection, Event], object]],
    activated: list[Event],
) -> list[tuple[Revision, Event] | None]:
    """:func:`groupcommit.record_reads`, and first, for every read flagged ``activate``, its
    subscription marked ``active`` in the same transaction, fenced on the read's generation
    like its revision: "active" and "a read is stored" commit together, never one without
    the other, and the state's event comes before the revision's (a cursor taken at the
    revision sees no state change after it). The state events are appended to ``activated``.
    """
    by_generation: dict[int, list[groupcommit.Read]] = {}
    for read in reads:
        if read.activate:
            by_generation.setdefault(read.generation, []).append(read)
    if by_generation:
        dialect.order_events(conn)
    # One statement pair per generation, not per read: a cold start flags 10,000 first reads,
    # and one ``set_states`` each was a seventh of its CPU. The fence is per row (each
    # subscription's own server must be at the generation), so a group that spans servers
    # with the same generation number is fenced exactly as its reads one by one.
    for generation, group in by_generation.items():
        change = StateChange([read.subscription_id for read in group], "active")
        activated += set_states(conn, dialect, change, generation, max(r.read_at for r in group))
    return groupcommit.record_reads(conn, dialect, reads, sinks)
