"""What changed, done once for every front end: the change an event describes, the next
change after a cursor within a deadline, the events after a cursor as a stream, and the
history a subscription keeps. ``/v1/content``, ``/v1/wait``, ``/v1/events(/stream)``, the
history routes and the face inside the daemon (``/mcp``) call :class:`Changes`; each renders
its answer with :mod:`service.app.views`.

The events table is the truth and its ids are the cursors. The event hub
(:class:`service.store.eventhub.EventHub`) says when there is something new, and its ring
answers "events after this cursor" from memory whenever it can prove it holds them all: a
caught-up follower or waiter then costs no query. Every wait here ends at a deadline its
caller gives, and every read is a page of a bounded size.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from service.app import queries
from service.store.eventhub import EventHub
from service.store.records import Event, Revision, Subscription
from service.store.store import Store

FOLLOW_PAGE = 500
"""Events read per query while a follower catches up; it never holds more in memory."""


@dataclass(frozen=True, slots=True)
class Change:
    """A ``resource.updated`` event with its subscription and the two sides of the change."""

    event: Event
    subscription: Subscription
    revision: Revision | None
    """The revision the event recorded, else the current one (pruned or removed since);
    None when the subscription keeps none."""
    previous: Revision | None
    """The revision before :attr:`revision` (a waiter's baseline); None for a first one."""

    @property
    def event_id(self) -> int | None:
        """The event that announced :attr:`revision`: this one, unless a newer revision
        stood in for a pruned one (then None, as ``/v1/content`` says of a pruned event)."""
        if self.revision is None or self.revision.id != self.event.revision_id:
            return None
        return self.event.id


@dataclass(frozen=True, slots=True)
class Waited:
    """What :meth:`Changes.wait` found: the first matching event, or None at the deadline;
    ``cursor``: every event up to it was looked at (wait again from there to miss none)."""

    event: Event | None
    cursor: int


@dataclass(frozen=True, slots=True)
class Reset:
    """A follower's cursor names events that are gone (pruned) or not yet written (another
    database): it restarts from the oldest kept event, and should refetch what it shows."""

    requested_after: int
    first_id: int
    last_id: int


KEEPALIVE = None
"""What :meth:`Changes.follow` yields when nothing happened for its ``idle_s``."""


def needs_reset(cursor: int, first_id: int, last_id: int) -> bool:
    """True when events after ``cursor`` were pruned, or the cursor is from another database."""
    if cursor > last_id:
        return True
    return first_id > 0 and cursor < first_id - 1


class Changes:
    def __init__(self, store: Store, hub: EventHub) -> None:
        self.store = store
        self.hub = hub

    # ---- cursors ------------------------------------------------------------------------
    async def last_event_id(self) -> int:
        """The newest event id in the table: "from now on" for a new waiter or follower."""
        return await self.store.last_event_id()

    @property
    def published_id(self) -> int:
        """The newest event this process was told of, without a query."""
        return int(self.hub.last_id)

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        """True as soon as an event newer than ``cursor`` may exist; False after ``timeout``."""
        return await self.hub.wait_beyond(cursor, timeout)

    # ---- events -------------------------------------------------------------------------
    async def events_after(
        self,
        after: int,
        *,
        limit: int,
        types: Sequence[str] | None = None,
        uri: str | None = None,
        subscription_ids: Sequence[int] | None = None,
    ) -> list[Event]:
        """At most ``limit`` matching events with an id above ``after``, oldest first: from
        the hub's ring when it holds them all, else from the table."""
        found, _covered = await self._after(after, limit, types, uri, subscription_ids)
        return found

    async def _after(
        self,
        after: int,
        limit: int,
        types: Sequence[str] | None,
        uri: str | None,
        subscription_ids: Sequence[int] | None,
    ) -> tuple[list[Event], int]:
        """The matching events and the id every event up to which was looked at."""
        recent = self.hub.recent_after(
            after, types=types, uri=uri, subscription_ids=subscription_ids
        )
        if recent is not None:  # from memory: no query while caught up
            items, covered = recent
            if len(items) > limit:
                return items[:limit], items[limit - 1].id
            return items, covered
        # Read the high-water mark before the query: an event committed in between is then
        # either in the page or beyond the mark, so a wait from the mark sees it.
        mark = await self.store.last_event_id()
        page = await self.store.events_after(
            after, limit=limit, types=types, uri=uri, subscription_ids=subscription_ids
        )
        last = page[-1].id if page else after
        return page, (last if len(page) == limit else max(mark, last))

    async def next_events(
        self,
        after: int,
        *,
        limit: int,
        timeout: float,
        types: Sequence[str] | None = None,
    ) -> list[Event]:
        """:meth:`events_after`, waiting up to ``timeout`` for the first when there is none
        yet: ``[]`` after ``timeout`` (or when only events ``types`` leaves out came)."""
        found = await self.events_after(after, limit=limit, types=types)
        if found or not await self.hub.wait_beyond(after, timeout):
            return found
        return await self.events_after(after, limit=limit, types=types)

    async def events_before(
        self,
        before: int,
        *,
        limit: int,
        types: Sequence[str] | None = None,
        uri: str | None = None,
        subscription_id: int | None = None,
    ) -> tuple[list[Event], int]:
        """The newest ``limit`` matching events below ``before`` (oldest first), and the
        cursor to follow from: every event up to it was looked at."""
        tail = await queries.events_before(
            self.store, before, limit=limit, types=types, uri=uri, subscription_id=subscription_id
        )
        return tail, min(before - 1, await self.store.last_event_id())

    async def wait(
        self,
        *,
        after: int,
        deadline: float,
        types: Sequence[str] | None = None,
        uri: str | None = None,
        subscription_ids: Sequence[int] | None = None,
    ) -> Waited:
        """The first matching event with an id above ``after``, waiting for it until
        ``deadline`` (``time.monotonic()``); ``Waited(None, cursor)`` once it passed."""
        cursor = after
        while True:
            found, covered = await self._after(cursor, 1, types, uri, subscription_ids)
            if found:
                return Waited(found[0], found[0].id)
            cursor = max(cursor, covered)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Waited(None, cursor)
            await self.hub.wait_beyond(cursor, remaining)

    async def follow(
        self,
        *,
        after: int,
        idle_s: float,
        types: Sequence[str] | None = None,
        uri: str | None = None,
    ) -> AsyncIterator[Event | Reset | None]:
        """Every matching event after ``after``, oldest first, for as long as the caller
        iterates: first a :class:`Reset` if the cursor names events that are not kept, then
        the kept ones page by page, then each new one as it is committed (from the ring
        while it can prove it holds them all); :data:`KEEPALIVE` after ``idle_s`` of quiet.
        """
        cursor = after
        first_id, last_id = await self.store.first_event_id(), await self.store.last_event_id()
        if needs_reset(cursor, first_id, last_id):
            yield Reset(cursor, first_id, last_id)
            cursor = max(first_id - 1, 0) if cursor <= last_id else last_id
        while True:
            page, covered = await self._after(cursor, FOLLOW_PAGE, types, uri, None)
            for event in page:
                yield event
            cursor = max(cursor, covered)
            if len(page) == FOLLOW_PAGE:
                continue
            if not await self.hub.wait_beyond(cursor, idle_s):
                yield KEEPALIVE

    # ---- what a change is -------------------------------------------------------------
    async def change_for(
        self, event: Event, subscription: Subscription | None = None
    ) -> Change | None:
        """The change ``event`` (a ``resource.updated``) describes; None when its
        subscription is gone. ``subscription``: the event's, when the caller has it."""
        sub = subscription
        if sub is None:
            sub = await self.store.get_subscription(event.subscription_id or 0)
            if sub is None:
                return None
        store = self.store
        rev = await store.get_revision(event.revision_id) if event.revision_id else None
        if rev is None:  # pruned or removed since: hand out what is current
            rev = await store.current_revision(sub.id)
        previous = None if rev is None else await store.revision_before(sub.id, rev.revision)
        return Change(event, sub, rev, previous)

    async def revision_of(self, event: Event) -> Revision | None:
        """The revision ``event`` recorded (a stream's ``include=content``); None if gone."""
        if event.type != "resource.updated" or event.revision_id is None:
            return None
        return await self.store.get_revision(event.revision_id)

    # ---- what a subscription keeps ------------------------------------------------------
    async def watchers(self, uri: str, url: str | None = None) -> list[Subscription]:
        """The subscriptions of ``uri`` (on the server ``url``, when named)."""
        return await self.store.find_subscriptions(uri, url)

    async def subscription(self, subscription_id: int) -> Subscription | None:
        return await self.store.get_subscription(subscription_id)

    async def current(self, sub: Subscription) -> tuple[Revision, int | None] | None:
        """The newest kept revision and the event that announced it (None if pruned);
        None before the first read."""
        rev = await self.store.current_revision(sub.id)
        if rev is None:
            return None
        return rev, await queries.event_id_for_revision(self.store, sub.id, rev.id)

    async def revision(self, sub: Subscription, number: int) -> Revision | None:
        return await queries.revision_by_number(self.store, sub.id, number)

    async def revision_page(
        self, sub: Subscription, *, before: int | None, limit: int
    ) -> list[dict[str, Any]]:
        """Newest first, without contents (:func:`service.app.queries.revision_page`)."""
        return await queries.revision_page(self.store, sub.id, before=before, limit=limit)
