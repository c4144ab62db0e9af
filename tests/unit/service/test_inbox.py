"""The link inbox: coalescing per URI, a hard bound with back-pressure, ends kept apart."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from service.daemon.inbox import LeanEvent, LinkInbox, first_of

pytestmark = pytest.mark.anyio


async def test_updates_coalesce_per_uri() -> None:
    inbox: LinkInbox[str] = LinkInbox(capacity=4)
    added = [await inbox.put_update(uri) for uri in ["a", "b", "a", "a", "b"]]
    assert added == [True, True, False, False, False]
    assert len(inbox) == 2
    assert inbox.take() == (["a", "b"], [])
    assert len(inbox) == 0
    assert await inbox.put_update("a") is True, "taken URIs can be pending again"


async def test_full_inbox_makes_the_reader_wait_until_the_link_drains() -> None:
    inbox: LinkInbox[str] = LinkInbox(capacity=2)
    await inbox.put_update("a")
    await inbox.put_update("b")
    assert await inbox.put_update("a") is False, "a pending URI never waits"
    third = asyncio.ensure_future(inbox.put_update("c"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not third.done(), "no room: the reader waits (and reads no more bytes)"
    assert len(inbox) == 2
    assert inbox.take() == (["a", "b"], [])
    assert await third is True
    assert inbox.take() == (["c"], [])


async def test_ends_are_kept_with_their_generation_and_wake_the_link() -> None:
    inbox: LinkInbox[str] = LinkInbox()
    waiter = asyncio.ensure_future(inbox.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    inbox.put_end(3, "lost")
    await asyncio.wait_for(waiter, 1)
    await inbox.put_update("x")
    assert inbox.take() == (["x"], [(3, "lost")])


async def test_lean_event_behaves_as_asyncio_event() -> None:
    event = LeanEvent()
    assert not event.is_set()
    first = asyncio.ensure_future(event.wait())
    second = asyncio.ensure_future(event.wait())
    gone = asyncio.ensure_future(event.wait())
    await asyncio.sleep(0)
    gone.cancel()  # a cancelled waiter neither wakes nor blocks the others
    await asyncio.sleep(0)
    assert not (first.done() or second.done())
    event.set()
    assert await first is True and await second is True
    assert gone.cancelled()
    assert event.is_set() and await event.wait() is True, "set: wait returns at once"
    event.clear()
    late = asyncio.ensure_future(event.wait())
    await asyncio.sleep(0)
    assert not late.done(), "cleared: waits again"
    event.set()
    event.clear()  # set then cleared before the waiter ran: it was woken all the same
    assert await late is True
    assert event._waiters is None, "no waiter list is kept once nobody waits"


async def test_first_of_waits_on_one_future_for_either_event_and_leaves_none_behind() -> None:
    """What an idle link waits on (its inbox, its URI set changing): one future in both
    events' waiters, removed when either is set or the wait is cancelled; no task."""
    inbox: LinkInbox[str] = LinkInbox()
    changed = LeanEvent()
    ready = inbox.ready()
    assert not ready.is_set()
    tasks_before = len(asyncio.all_tasks())
    waiting = asyncio.ensure_future(first_of(inbox.ready(), changed))
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == tasks_before + 1  # the test's own, nothing more
    assert ready._waiters is not None and changed._waiters == ready._waiters
    await inbox.put_update("test://a")
    await waiting
    assert ready._waiters is None and changed._waiters is None
    assert inbox.ready().is_set()  # something pending: set until taken
    inbox.take()
    assert not inbox.ready().is_set()
    changed.set()
    await first_of(inbox.ready(), changed)  # already set: returns at once
    changed.clear()
    cancelled = asyncio.ensure_future(first_of(inbox.ready(), changed))
    await asyncio.sleep(0)
    cancelled.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await cancelled
    assert ready._waiters is None and changed._waiters is None


def test_an_inbox_has_no_attribute_dict() -> None:
    """Every link's session holds one: slots, not a ~300-byte attribute dict."""
    inbox: LinkInbox[str] = LinkInbox()
    assert not hasattr(inbox, "__dict__")
