"""Read-only look-ups the front ends need and :class:`Store` does not (yet) offer.

Kept here, in SQLAlchemy Core against the same schema, so the store's interface stays
narrow; candidates to move into ``Store`` if another caller needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, cast, func, select

from service.store import schema
from service.store.records import Event, Revision, Subscription
from service.store.store import SUBSCRIPTION_COLUMNS, Store
from service.store.store import _event as event_from_row
from service.store.store import _revision as revision_from_row
from service.store.store import _subscription as subscription_from_row


async def event_id_for_revision(store: Store, subscription_id: int, revision_id: int) -> int | None:
    """Id of the ``resource.updated`` event that announced revision ``revision_id``."""
    events = schema.events
    query = (
        select(events.c.id)
        .where(
            events.c.subscription_id == subscription_id,
            events.c.type == "resource.updated",
            events.c.revision_id == revision_id,
        )
        .order_by(events.c.id.desc())
        .limit(1)
    )
    async with store.engine.connect() as conn:
        value = await conn.scalar(query)
    return int(value) if value is not None else None


MAX_INT4 = 2**31 - 1


# ---- the console's look-ups (history, filters, overview figures) ---------------------------
def _like(fragment: str) -> str:
    """``fragment`` as a LIKE pattern: ``*`` is any run of characters, everything else is
    literal (``%``, ``_`` and the escape character escaped); no ``*`` means "contains"."""
    escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%") if "*" in fragment else f"%{escaped}%"


async def filtered_subscriptions(
    store: Store,
    *,
    server: str | None,
    uri: str | None,
    state: str | None,
    after: int,
    limit: int,
) -> list[Subscription]:
    """A page of subscriptions (id above ``after``), filtered in SQL: a server URL fragment, a
    URI pattern (``*`` wildcards, else a fragment) and a state."""
    subs, servers = schema.subscriptions, schema.servers
    query = (
        select(*SUBSCRIPTION_COLUMNS)
        .join(servers)
        .where(subs.c.id > after)
        .order_by(subs.c.id)
        .limit(limit)
    )
    if server:
        query = query.where(servers.c.url.like(_like(server), escape="\\"))
    if uri:
        query = query.where(subs.c.uri.like(_like(uri), escape="\\"))
    if state:
        query = query.where(subs.c.state == state)
    async with store.engine.connect() as conn:
        return [subscription_from_row(row) for row in await conn.execute(query)]


async def revision_page(
    store: Store, subscription_id: int, *, before: int | None, limit: int
) -> list[dict[str, Any]]:
    """The newest ``limit`` revisions below ``before``, newest first, without their contents
    (a page of 100 summaries stays small whatever the resources weigh)."""
    revs = schema.revisions
    query = (
        select(
            revs.c.revision,
            revs.c.content_hash,
            revs.c.generation,
            revs.c.read_at,
            func.length(revs.c.contents).label("size"),
        )
        .where(revs.c.subscription_id == subscription_id)
        .order_by(revs.c.revision.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(revs.c.revision < before)
    async with store.engine.connect() as conn:
        rows = await conn.execute(query)
        return [
            {
                "revision": int(row.revision),
                "contentHash": row.content_hash,
                "generation": int(row.generation),
                "readAt": float(row.read_at),
                "size": int(row.size or 0),
            }
            for row in rows
        ]


async def revision_by_number(store: Store, subscription_id: int, revision: int) -> Revision | None:
    revs = schema.revisions
    query = select(revs).where(
        revs.c.subscription_id == subscription_id, revs.c.revision == revision
    )
    async with store.engine.connect() as conn:
        row = (await conn.execute(query)).one_or_none()
    return revision_from_row(row) if row is not None else None


async def events_before(
    store: Store,
    before: int,
    *,
    limit: int,
    types: Sequence[str] | None,
    uri: str | None,
    subscription_id: int | None,
) -> list[Event]:
    """The newest ``limit`` matching events with an id below ``before``, oldest first (the
    tail a page shows before it follows the stream from the last of them)."""
    events = schema.events
    query = select(events)
    if before <= MAX_INT4:  # larger means "the newest"; PostgreSQL's int4 id takes no more
        query = query.where(events.c.id < before)
    if types:
        query = query.where(events.c.type.in_(list(types)))
    if uri is not None:
        query = query.where(events.c.uri == uri)
    if subscription_id is not None:
        query = query.where(events.c.subscription_id == subscription_id)
    async with store.engine.connect() as conn:
        rows = await conn.execute(query.order_by(events.c.id.desc()).limit(limit))
        found = [event_from_row(row) for row in rows]
    found.reverse()
    return found


async def revisions_per_minute(store: Store, now: float, minutes: int) -> list[int]:
    """Revisions read in each of the last ``minutes`` minutes, oldest minute first: counted
    by the database (a GROUP BY), not row by row here."""
    revs = schema.revisions
    since = now - minutes * 60
    minute = cast((revs.c.read_at - since) / 60, Integer).label("minute")
    query = select(minute, func.count()).where(revs.c.read_at >= since).group_by(minute)
    buckets = [0] * minutes
    async with store.engine.connect() as conn:
        for index, count in await conn.execute(query):
            buckets[min(max(int(index), 0), minutes - 1)] += int(count)
    return buckets


async def lease_view(store: Store) -> list[dict[str, Any]]:
    """Every replica with its heartbeat and the links it holds (one row on SQLite)."""
    replicas, servers = schema.replicas, schema.servers
    async with store.engine.connect() as conn:
        held = {
            str(owner): int(count)
            for owner, count in await conn.execute(
                select(servers.c.lease_owner, func.count())
                .where(servers.c.lease_owner.is_not(None))
                .group_by(servers.c.lease_owner)
            )
        }
        rows = await conn.execute(select(replicas).order_by(replicas.c.started_at))
        return [
            {
                "id": row.id,
                "host": row.host,
                "pid": int(row.pid),
                "startedAt": float(row.started_at),
                "heartbeatAt": float(row.heartbeat_at),
                "stopping": bool(row.stopping),
                "links": held.get(str(row.id), 0),
            }
            for row in rows
        ]
